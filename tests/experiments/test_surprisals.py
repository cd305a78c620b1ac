"""``synbench surprisals MODEL TEXT`` and ``experiments.surprisals.load``: per-word surprisals of a text file from
an ``hf:`` model (equal to minicons word by word), a string checkpoint (exact, equal to its scorer) and a joint
one (the beam ``eval sg`` picks, stated), as a TSV with its conventions; bad input is one error line."""

from __future__ import annotations

import csv
import math
from pathlib import Path

import pytest

from experiments.cli import main
from experiments.evaluate.scorers import load_scorer
from experiments.surprisals import COLUMNS, load
from experiments.train import train
from lightning_modules.data.tree import clean, read_bracketed, to_bracketed
from tests.experiments.evaluate.test_hf_scorer import build_tiny_gpt2
from tests.experiments.test_train import config
from tests.tolerances import FLOAT32_RTOL

TOLERANCE = 1e-4  # nats
BEAM = ["--beam", "3", "--word-beam", "2", "--max-actions", "2"]


@pytest.fixture(scope="module")
def gpt2(tmp_path_factory: pytest.TempPathFactory, shared_data: Path) -> Path:
    return build_tiny_gpt2(tmp_path_factory.mktemp("gpt2"), shared_data)


@pytest.fixture(scope="module")
def treebank(tmp_path_factory: pytest.TempPathFactory, shared_data: Path) -> Path:
    trees = [t for _, t in read_bracketed(shared_data / "ptb_nltk_sample" / "combined" / "wsj_0001.mrg")]
    path = tmp_path_factory.mktemp("tb") / "small.mrg"
    path.write_text("".join(to_bracketed(t) + "\n" for t in trees))
    return path


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory: pytest.TempPathFactory, treebank: Path) -> dict[str, Path]:
    """A string model (exact) and a joint one (beam by default), two training steps each."""
    root = tmp_path_factory.mktemp("runs")
    steps = ["train.max_steps=2", "train.val_every=2", "train.ckpt_every=2", "data.min_count=1"]
    for family in ("txl-terminals", "tg"):
        train(config(family, treebank, *steps), seed=0, run_dir=root / family)
    return {family: root / family / "checkpoints" / "best.ckpt" for family in ("txl-terminals", "tg")}


@pytest.fixture(scope="module")
def text(tmp_path_factory: pytest.TempPathFactory, shared_data: Path) -> Path:
    """PTB-sample sentences, one per line: contractions, numbers, punctuation, a quote character."""
    trees = read_bracketed(shared_data / "ptb_nltk_sample" / "combined" / "wsj_0010.mrg")
    lines = [" ".join(words) for words in (clean(t).leaves() for _, t in trees) if len(words) <= 25][:6]
    path = tmp_path_factory.mktemp("text") / "sentences.txt"
    path.write_text("\n".join([*lines, 'He said " no " .']) + "\n")
    return path


def read_tsv(path: Path) -> tuple[list[str], list[dict[str, str]]]:
    """The ``#`` lines and the rows (by column name)."""
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    comments = [line.rstrip("\n") for line in lines if line.startswith("#")]
    rows = list(csv.DictReader([line for line in lines if not line.startswith("#")], delimiter="\t"))
    return comments, rows


def surprisals(capsys: pytest.CaptureFixture, *argv: object) -> tuple[int, str, str]:
    code = main(["surprisals", *map(str, argv)])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_hf_surprisals_equal_minicons_word_by_word(capsys, gpt2, text, tmp_path):
    from minicons.scorer import IncrementalLMScorer

    out = tmp_path / "s.tsv"
    code, stdout, err = surprisals(capsys, f"hf:{gpt2}", text, "--out", out)
    assert code == 0 and stdout == "" and f"-> {out}" in err
    comments, rows = read_tsv(out)
    assert tuple(rows[0]) == COLUMNS
    assert "# method: exact: exact, minicons convention" in "\n".join(comments)
    assert any(line.startswith("# word_prob: sum-pieces") for line in comments)
    sentences = text.read_text().splitlines()
    assert [(int(r["sentence"]), int(r["word_index"]), r["word"]) for r in rows] == [
        (k, i, word) for k, line in enumerate(sentences, 1) for i, word in enumerate(line.split(), 1)]
    for r in rows:
        assert float(r["surprisal_bits"]) == pytest.approx(float(r["surprisal_nats"]) / math.log(2), rel=1e-12)
    minicons = IncrementalLMScorer(str(gpt2), device="cpu")
    theirs = [value for sentence in minicons.word_score_tokenized(sentences, tokenize_function=str.split,
                                                                  bos_token=True, surprisal=True)
              for _, value in sentence]
    assert [float(r["surprisal_nats"]) for r in rows] == pytest.approx(theirs, rel=FLOAT32_RTOL, abs=TOLERANCE)
    # the API: the same numbers, and log p(x) = minus the words' surprisals (no end-of-sentence term)
    model = load(f"hf:{gpt2}", batch_size=3)
    api = [w for sentence in model.surprisals(sentences) for w in sentence]
    assert [(w.sentence, w.index, w.word) for w in api] == [(int(r["sentence"]), int(r["word_index"]), r["word"])
                                                             for r in rows]
    assert [w.nats for w in api] == pytest.approx([float(r["surprisal_nats"]) for r in rows], abs=TOLERANCE)
    totals = minicons.sequence_score(sentences, bos_token=True, reduction=lambda lp: lp.sum(0).item())
    assert model.logprob([s.split() for s in sentences]) == pytest.approx(totals, rel=FLOAT32_RTOL, abs=TOLERANCE)
    # the corrected convention is stated and changes the numbers; stdout without --out
    code, stdout, _ = surprisals(capsys, f"hf:{gpt2}", text, "--word-prob", "corrected")
    assert code == 0 and "# word_prob: corrected (Pimentel & Meister 2024" in stdout
    corrected = [float(line.split("\t")[-1]) for line in stdout.splitlines()[len(comments) + 1 :]]
    assert len(corrected) == len(rows) and corrected != pytest.approx(theirs, abs=TOLERANCE)


def test_family_checkpoints_string_exact_and_joint_beam(capsys, checkpoints, text, tmp_path):
    sentences = [line.split() for line in text.read_text().splitlines()[:3]]
    short = tmp_path / "short.txt"
    short.write_text("\n".join(" ".join(words) for words in sentences) + "\n")
    # a string model: exact, its scorer's word log-probs; log p(x) includes </s>
    code, _, err = surprisals(capsys, checkpoints["txl-terminals"], short, "--out", tmp_path / "exact.tsv")
    assert code == 0, err
    comments, rows = read_tsv(tmp_path / "exact.tsv")
    assert "# method: exact: exact" in comments and "# per-word values: exact" in comments
    scores = load_scorer(checkpoints["txl-terminals"]).score(sentences)
    assert [float(r["surprisal_nats"]) for r in rows] == pytest.approx(
        [-lp for s in scores for lp in s.word_logprobs], rel=1e-12)
    assert load(checkpoints["txl-terminals"]).logprob(sentences) == pytest.approx([s.total for s in scores])
    # a joint model: the beam eval sg picks by default, its estimates stated as such
    code, _, err = surprisals(capsys, checkpoints["tg"], short, *BEAM, "--out", tmp_path / "beam.tsv")
    assert code == 0, err
    comments, rows = read_tsv(tmp_path / "beam.tsv")
    assert any(line.startswith("# method: beam: beam 3/2") for line in comments)
    assert "# per-word values: estimates, beam" in comments
    beam = load_scorer(checkpoints["tg"], "beam", beam=3, word_beam=2, max_actions=2).score(sentences)
    assert [float(r["surprisal_nats"]) for r in rows] == pytest.approx(
        [-lp for s in beam for lp in s.word_logprobs], rel=1e-9)
    # --word-prob corrected needs subword pieces
    code, _, err = surprisals(capsys, checkpoints["tg"], short, "--word-prob", "corrected")
    assert code == 2 and err.startswith("synbench: error: --word-prob: tg --method beam has no --word-prob corrected")


def test_an_ngram_model_is_exact_and_has_one_convention(capsys, treebank, text, tmp_path):
    from experiments.evaluate.scorers import ngram
    from lightning_modules.data.vocab import WordVocab

    sentences = [clean(t).leaves() for _, t in read_bracketed(treebank)]
    model = ngram.KneserNey.train(sentences, WordVocab.build([w for s in sentences for w in s], min_count=1), 3)
    ngram.save(model, tmp_path / "kn.json")
    code, stdout, err = surprisals(capsys, tmp_path / "kn.json", text)
    assert code == 0, err
    rows = [line.split("\t") for line in stdout.splitlines() if not line.startswith("#")][1:]
    words = [line.split() for line in text.read_text().splitlines()]
    assert [float(r[-1]) for r in rows] == pytest.approx([-lp for s in model.score(words) for lp in s.word_logprobs])
    code, _, err = surprisals(capsys, tmp_path / "kn.json", text, "--word-prob", "corrected")
    assert code == 2 and "--word-prob: an n-gram model has no --word-prob corrected" in err


def test_bad_input_is_one_error_line_and_writes_nothing(capsys, gpt2, text, tmp_path):
    out = tmp_path / "never.tsv"
    blank = tmp_path / "blank.txt"
    blank.write_text("The dog barked .\n\nIt ran .\n")
    long = tmp_path / "long.txt"
    long.write_text("A short one .\n" + " ".join(["word"] * 200) + "\n")
    latin1 = tmp_path / "latin1.txt"
    latin1.write_bytes("ok .\ncaf\u00e9 .\n".encode("latin-1"))
    cases = [
        ((f"hf:{gpt2}", tmp_path / "missing.txt"), f"{tmp_path / 'missing.txt'}: cannot read the text"),
        ((f"hf:{gpt2}", blank), f"{blank}:2: blank line"),
        ((f"hf:{gpt2}", latin1), f"{latin1}:2: not UTF-8 text"),
        ((f"hf:{gpt2}", long), f"{long}:2: 600 pieces, but the model reads the BOS token and at most 127"),
        ((f"hf:{tmp_path / 'nowhere'}", text), f"{tmp_path / 'nowhere'}: model folder not found"),
        ((tmp_path / "missing.ckpt", text), f"{tmp_path / 'missing.ckpt'}: model file not found"),
        ((f"hf:{gpt2}", text, "--method", "gold"), "argument --method: invalid choice: 'gold'"),
    ]
    for argv, message in cases:
        code, stdout, err = surprisals(capsys, *argv, "--out", out)
        assert code == 2 and stdout == "", argv
        assert err.startswith("synbench: error: ") and message in err and err.count("\n") == 1, err
        assert not out.exists() and not list(tmp_path.glob(".never.tsv.*"))
    with pytest.raises(TypeError, match="unknown option 'beams'"):
        load(f"hf:{gpt2}", beams=3)
