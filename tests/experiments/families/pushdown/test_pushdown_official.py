"""``synbench import pushdown|base-lm``: parity with the official Pushdown Layers network, and bad input.

The golden files (``tests/golden/pushdown/FAMILY``: a small official model's ``model.pt`` and ``vocab.pkl``, and
the official per-token values on 20 PTB-sample sentences) come from ``benchmarks/golden_pushdown_network.py``
run against the official code (its README names the commit). Each test imports them with the real command
line into a temporary run folder and compares our network's values with the official ones (fp32, 1e-5
relative).
"""

from __future__ import annotations

import json
import math
import pickle
import sys
import types
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from experiments.cli import main

GOLDEN = Path(__file__).resolve().parents[3] / "golden" / "pushdown"
RTOL = 1e-5


def golden(family: str) -> dict[str, Any]:
    return json.loads((GOLDEN / family / "golden.json").read_text(encoding="utf-8"))


def run_cli(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture(scope="module")
def imported(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Both golden models imported through the command line, once for the module."""
    root = tmp_path_factory.mktemp("imported")
    runs = {}
    for name in ("pushdown", "base-lm", "pushdown-gpt2"):
        out = root / name
        tokenizer = ["--tokenizer", str(GOLDEN / "gpt2-tiny")] if name.endswith("gpt2") else []
        code = main(["import", name.removesuffix("-gpt2"), str(GOLDEN / name / "model.pt"), "--vocab",
                     str(GOLDEN / name / "vocab.pkl"), *tokenizer, "--out", str(out)])
        assert code == 0
        runs[name] = out
    return runs


def ours(run: Path, family: str) -> list[tuple[np.ndarray, np.ndarray]]:
    """Our official-convention per-token values of the golden sentences, from the imported checkpoint."""
    from experiments.families.pushdown.official import END, official_logprobs
    from experiments.families.pushdown.scorers import PushdownModel
    from lightning_modules.data.tree import clean, drop_pos_tags, parse_tree
    from lightning_modules.data.vocab import SPECIALS, TokenVocab
    from lightning_modules.families.pushdown.batch import PushdownSentence
    from lightning_modules.families.pushdown.encoding import encode

    model = PushdownModel.load(str(run / "checkpoints" / "best.ckpt"))
    vocab = TokenVocab(model.tokens[len(SPECIALS):])
    encoded = []
    for sentence in golden(family)["sentences"]:
        example = encode(drop_pos_tags(clean(parse_tree(sentence["tree"]))), split=model.pieces)
        encoded.append(PushdownSentence(vocab.sentence_ids(example.leaves), example.attachment, example.spans, 0))
        pieces = [model.tokens[i] for i in encoded[-1].ids[1:]]
        assert pieces == sentence["sentence"].split(" ")  # the official pieces, <eos> last
    return official_logprobs(model.module, encoded, model.ids[END])


def test_run_folder_is_an_ordinary_finished_run(imported: dict[str, Path]) -> None:
    from experiments.checkpoints import read_checkpoint

    run = imported["pushdown"]
    assert sorted(p.name for p in run.iterdir()) == ["DONE", "checkpoints", "config.json"]
    config = json.loads((run / "config.json").read_text())
    assert config["family"] == "pushdown" and config["seed"] == 0
    assert config["model"]["sentence_end"] == "official"
    assert config["model"]["d_model"] == 16 and config["model"]["n_layers"] == 2 and config["model"]["d_ff"] == 32
    assert config["model"]["n_heads"] == 8 and config["model"]["attachment_depth_dim"] == 8
    done = json.loads((run / "DONE").read_text())
    import hashlib

    assert done["imported"]["files"]["checkpoint"] == hashlib.sha256(
        (GOLDEN / "pushdown" / "model.pt").read_bytes()).hexdigest()
    meta = read_checkpoint(run / "checkpoints" / "best.ckpt", "pushdown")["synbench"]
    assert meta["config"] == {k: v for k, v in config.items() if k != "seed"}
    assert meta["vocab"]["tokens"][:3] == ["<pad>", "<s>", "<eos>"] and meta["vocab"]["tokens"][-2] == "</s>"


@pytest.mark.parametrize("family", ["pushdown", "base-lm", "pushdown-gpt2"])
def test_per_token_logprobs_and_losses_equal_the_official(imported: dict[str, Path], family: str) -> None:
    expected = golden(family)
    values = ours(imported[family], family)
    for (words, attach), sentence in zip(values, expected["sentences"], strict=True):
        np.testing.assert_allclose(words, sentence["lm_logprobs"], rtol=RTOL, atol=1e-6)
        np.testing.assert_allclose(attach, sentence["attachment_logprobs"], rtol=RTOL, atol=1e-6)
    lm = -np.concatenate([w for w, _ in values])
    attachment = -np.concatenate([a for _, a in values])
    assert lm.mean() == pytest.approx(expected["losses"]["lm"], rel=RTOL)
    assert attachment.mean() == pytest.approx(expected["losses"]["attachment"], rel=RTOL)


@pytest.mark.parametrize("name", ["pushdown", "pushdown-gpt2"])
def test_eval_ppl_gold_equals_the_official_eval_gold(imported: dict[str, Path], tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str], name: str) -> None:
    """Whole words, and GPT-2 pieces (a word after the first read with a leading space, as officially)."""
    expected = golden(name)["sentences"]
    code, out, err = run_cli(["eval", "ppl", str(imported[name] / "checkpoints" / "best.ckpt"), "--method",
                              "gold", "--corpus", "ptb-sample", "--split", "train", "--limit", "20", "--out",
                              str(tmp_path / "eval"), "--json"], capsys)
    assert code == 0, err
    result = json.loads(out)
    assert result["settings"]["sentence_end"] == "official" and result["metrics"]["unknown_words"] == 0
    items = [json.loads(line) for line in (tmp_path / "eval" / "items.jsonl").read_text().splitlines()]
    items = sorted(items, key=lambda item: int(item["id"]))
    # the official eval_gold's totals beside the common convention's (<eos> ends the sentence: no </s>, and
    # <eos>'s attachment is not scored), which the comparison table reads
    np.testing.assert_allclose([item["official_logprob"] for item in items],
                               [s["gold_joint_logprob"] for s in expected], rtol=RTOL)
    words = result["metrics"]["words"]
    official = sum(s["gold_joint_logprob"] for s in expected)
    assert result["metrics"]["word_ppl_official"] == pytest.approx(math.exp(-official / words), rel=RTOL)
    common = [sum(s["lm_logprobs"][:-1]) + sum(s["attachment_logprobs"][:-1]) for s in expected]
    np.testing.assert_allclose([item["logprob"] for item in items], common, rtol=RTOL)


def test_the_beam_equals_the_official_beam_at_width_5(imported: dict[str, Path], tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    """The official ``BeamSearchDepthBased(5)``'s final beam: its log-sum-exp (``eval_beam`` marginalised), the
    best hypothesis' joint log-probability and attachment decisions (``<eos>``'s 0 last)."""
    from experiments.families.pushdown.scorers import BeamScorer, PushdownModel
    from lightning_modules.data.tree import clean, drop_pos_tags, parse_tree
    from lightning_modules.numeric import logsumexp

    expected = golden("pushdown")["sentences"]
    checkpoint = imported["pushdown"] / "checkpoints" / "best.ckpt"
    scorer = BeamScorer(PushdownModel.load(str(checkpoint)), 5)
    scores = scorer.score([drop_pos_tags(clean(parse_tree(s["tree"]))).leaves() for s in expected])
    for score, sentence in zip(scores, expected, strict=True):
        official = [hypothesis["score"] for hypothesis in sentence["beam"]]
        assert score.total == pytest.approx(logsumexp(np.array(official)), rel=RTOL)
        assert score.extra["best_logprob"] == pytest.approx(official[0], rel=RTOL)
        assert [*score.extra["attachment"][1:], 0] == sentence["beam"][0]["attachments"]
    code, out, err = run_cli(["eval", "ppl", str(checkpoint), "--beam", "5", "--corpus", "ptb-sample", "--split",
                              "train", "--limit", "20", "--out", str(tmp_path / "eval"), "--json"], capsys)
    assert code == 0, err
    assert "official sentence end" in json.loads(out)["settings"]["description"]
    assert json.loads(out)["metrics"]["logprob"] == pytest.approx(sum(s.total for s in scores), rel=RTOL)


def test_base_lm_exact_equals_the_official_eval_base_model(imported: dict[str, Path], tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    """The official ``eval_base_model`` drops the ``</s>`` term: words and ``<eos>``, as our exact scorer."""
    expected = golden("base-lm")["sentences"]
    code, out, err = run_cli(["eval", "ppl", str(imported["base-lm"] / "checkpoints" / "best.ckpt"), "--corpus",
                              "ptb-sample", "--split", "train", "--limit", "20", "--out", str(tmp_path / "eval"),
                              "--json"], capsys)
    assert code == 0, err
    items = [json.loads(line) for line in (tmp_path / "eval" / "items.jsonl").read_text().splitlines()]
    totals = [item["logprob"] for item in sorted(items, key=lambda item: int(item["id"]))]
    np.testing.assert_allclose(totals, [sum(s["lm_logprobs"][:-1]) for s in expected], rtol=RTOL)


def test_training_refuses_the_official_sentence_end() -> None:
    from experiments.families import get_family
    from lightning_modules.errors import InputError

    with pytest.raises(InputError, match="sentence_end"):
        get_family("pushdown").build_module({"model": {"sentence_end": "official"}}, None)


# -- bad input: one error line naming the file, exit 2, nothing written -----------------------------------------
def official_class(name: str, monkeypatch: pytest.MonkeyPatch) -> type:
    """A class standing for ``vocabulary.NAME`` of the official code (a module ``vocabulary`` made here), so
    that its instances pickle under the official name."""
    module = types.ModuleType("vocabulary")
    cls = type(name, (), {"__module__": "vocabulary", "__qualname__": name})
    setattr(module, name, cls)
    monkeypatch.setitem(sys.modules, "vocabulary", module)
    return cls


def fake_vocabulary_pickle(words: list[str], monkeypatch: pytest.MonkeyPatch) -> bytes:
    """A pickle of a ``vocabulary.WordVocabulary`` with ``words``, made without the official code."""
    vocab = official_class("WordVocabulary", monkeypatch)()
    vocab.words = {w: i for i, w in enumerate(words)}
    vocab.inv_words = dict(enumerate(words))
    return pickle.dumps(vocab)


class Evil:
    """Unpickling it would create the marker file."""

    marker = ""

    def __reduce__(self) -> tuple[Any, tuple[str, str]]:
        return (Path.write_text, (Path(self.marker), "ran"))  # type: ignore[return-value]


def assert_refused(argv: list[str], named: Path, out: Path, capsys: pytest.CaptureFixture[str], match: str) -> None:
    code, stdout, err = run_cli(argv, capsys)
    assert code == 2 and stdout == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"synbench: error: {named}: "), err
    assert match in lines[0]
    assert not out.exists()
    assert not [p for p in out.parent.iterdir() if p.name.startswith(f".{out.name}")]  # no staging left


def import_argv(family: str, checkpoint: Path, vocab: Path, out: Path) -> list[str]:
    return ["import", family, str(checkpoint), "--vocab", str(vocab), "--out", str(out)]


def test_another_family_or_format_is_refused(imported: dict[str, Path], tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    vocab = GOLDEN / "pushdown" / "vocab.pkl"
    out = tmp_path / "out" / "run"
    out.parent.mkdir()
    synbench = imported["pushdown"] / "checkpoints" / "best.ckpt"
    assert_refused(import_argv("pushdown", synbench, vocab, out), synbench, out, capsys, "a synbench checkpoint")
    other = tmp_path / "other.pt"
    torch.save({"encoder.layers.0.weight": torch.zeros(2, 2)}, other)
    assert_refused(import_argv("pushdown", other, vocab, out), other, out, capsys, "not an official")
    base = GOLDEN / "base-lm" / "model.pt"
    assert_refused(import_argv("pushdown", base, vocab, out), base, out, capsys, "import it as base-lm")
    text = tmp_path / "model.txt"
    text.write_text("not a checkpoint")
    assert_refused(import_argv("pushdown", text, vocab, out), text, out, capsys, "cannot read")


def test_a_vocabulary_of_another_size_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    vocab = tmp_path / "vocab.pkl"
    vocab.write_bytes(fake_vocabulary_pickle(["<pad>", "a", "b", "<eos>"], monkeypatch))
    out = tmp_path / "out" / "run"
    out.parent.mkdir()
    model = GOLDEN / "pushdown" / "model.pt"
    assert_refused(import_argv("pushdown", model, vocab, out), vocab, out, capsys, "not this model's vocabulary")


def test_truncated_files_are_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out" / "run"
    out.parent.mkdir()
    model, vocab = GOLDEN / "pushdown" / "model.pt", GOLDEN / "pushdown" / "vocab.pkl"
    cut_model, cut_vocab = tmp_path / "model.pt", tmp_path / "vocab.pkl"
    cut_model.write_bytes(model.read_bytes()[: model.stat().st_size // 2])
    cut_vocab.write_bytes(vocab.read_bytes()[: vocab.stat().st_size // 2])
    assert_refused(import_argv("pushdown", cut_model, vocab, out), cut_model, out, capsys, "cannot read")
    assert_refused(import_argv("pushdown", model, cut_vocab, out), cut_vocab, out, capsys, "not an official vocab")


def test_a_pickle_naming_anything_else_is_refused_and_runs_nothing(tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture[str],
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    out = tmp_path / "out" / "run"
    out.parent.mkdir()
    model = GOLDEN / "pushdown" / "model.pt"
    marker = tmp_path / "marker"
    Evil.marker = str(marker)
    evil = tmp_path / "evil.pkl"
    evil.write_bytes(pickle.dumps(Evil()))
    assert_refused(import_argv("pushdown", model, evil, out), evil, out, capsys, "only vocabulary.WordVocabulary")
    assert not marker.exists()
    other = tmp_path / "other.pkl"
    other.write_bytes(pickle.dumps(official_class("CharVocabulary", monkeypatch)()))
    assert_refused(import_argv("pushdown", model, other, out), other, out, capsys, "vocabulary.CharVocabulary")


def test_an_existing_run_folder_is_not_overwritten(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "run"
    out.mkdir()
    (out / "keep").write_text("x")
    code, _, err = run_cli(import_argv("pushdown", GOLDEN / "pushdown" / "model.pt",
                                       GOLDEN / "pushdown" / "vocab.pkl", out), capsys)
    assert code == 2 and err.startswith(f"synbench: error: {out}: ") and sorted(p.name for p in out.iterdir()) == [
        "keep"]


def test_a_tokenizer_that_does_not_know_the_vocabulary_is_refused(tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    """Whole-word vocabulary, GPT-2 pieces: the tokenizer would never produce its words."""
    out = tmp_path / "out" / "run"
    out.parent.mkdir()
    tokenizer = GOLDEN / "gpt2-tiny"
    argv = [*import_argv("pushdown", GOLDEN / "pushdown" / "model.pt", GOLDEN / "pushdown" / "vocab.pkl", out),
            "--tokenizer", str(tokenizer)]
    assert_refused(argv, tokenizer, out, capsys, "is not in this tokenizer")
