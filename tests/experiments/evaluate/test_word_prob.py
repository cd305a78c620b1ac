"""``--word-prob corrected`` (Pimentel & Meister 2024): the formula by hand, and ``hf:`` word surprisals equal to
the authors' ``wordsprobability`` package word by word on a tiny GPT-2 built here (the package from the
``hf-parity`` extra; its model classes read a local folder as they read a hub name)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch

from experiments.cli import main
from experiments.evaluate.scorers import hf
from experiments.evaluate.word_prob import corrected_word_logprobs
from lightning_modules.data.tree import clean, read_bracketed
from tests.experiments.evaluate.test_hf_scorer import build_tiny_gpt2
from tests.tolerances import FLOAT32_RTOL

TOLERANCE = 1e-4  # nats (float32 logits; the package sums surprisals in float32 too)


@pytest.fixture(scope="module")
def sentences(shared_data: Path) -> list[list[str]]:
    """PTB-sample sentences: contractions (``n't``), numbers, punctuation, quotes."""
    trees = read_bracketed(shared_data / "ptb_nltk_sample" / "combined" / "wsj_0010.mrg")
    return [words for words in (clean(t).leaves() for _, t in trees) if len(words) <= 40][:10]


@pytest.fixture(scope="module")
def added_eos(tmp_path_factory: pytest.TempPathFactory, shared_data: Path) -> Path:
    """EOS added after the BPE's vocabulary: the package's sets are then exactly the paper's."""
    return build_tiny_gpt2(tmp_path_factory.mktemp("gpt2-added-eos"), shared_data, eos_in_vocab=False)


@pytest.fixture(scope="module")
def vocab_eos(tmp_path_factory: pytest.TempPathFactory, shared_data: Path) -> Path:
    """EOS in the BPE's vocabulary, as GPT-2's ``<|endoftext|>`` is."""
    return build_tiny_gpt2(tmp_path_factory.mktemp("gpt2-vocab-eos"), shared_data)


def package_surprisals(folder: Path, sentences: list[list[str]]) -> list[list[tuple[str, float, float]]]:
    """(word, corrected surprisal, summed surprisal) per word from ``wordsprobability``, nats."""
    import wordsprobability.models as registry
    from wordsprobability.main import _get_surprisal_per_word
    from wordsprobability.models.bow_lm import GPT2BaseModel

    class Local(GPT2BaseModel):
        model_name = str(folder)

    registry.MODELS["synbench-local"] = Local
    try:
        frame = _get_surprisal_per_word([" ".join(w) for w in sentences], "synbench-local", True)
    finally:
        del registry.MODELS["synbench-local"]
    return [[(row.word, float(row.surprisal), float(row.surprisal_buggy)) for row in group.itertuples()]
            for _, group in frame.groupby(level="text_id")]


def test_the_formula_by_hand():
    lp = [math.log(0.5), math.log(0.25), math.log(0.1)]  # pieces: word 0 = pieces 0-1, word 1 = piece 2
    boundary = [math.log(0.9), math.log(0.3), math.log(0.6), math.log(0.8)]  # before each piece, after the last
    first = math.log(0.7)
    words = corrected_word_logprobs(lp, [0, 0, 1], boundary, first)
    assert words == pytest.approx([math.log(0.5 * 0.25 * 0.6 / 0.7), math.log(0.1 * 0.8 / 0.6)])
    assert sum(words) == pytest.approx(sum(lp) + boundary[-1] - first)  # telescopes
    with pytest.raises(ValueError, match="in order"):
        corrected_word_logprobs(lp, [0, 1, 0], boundary, first)
    with pytest.raises(ValueError, match="boundary masses"):
        corrected_word_logprobs(lp, [0, 0, 1], boundary[:-1], first)


def test_corrected_equals_wordsprobability_word_by_word(added_eos, sentences):
    scores = hf.load(f"hf:{added_eos}", word_prob="corrected").score(sentences)
    summed = hf.load(f"hf:{added_eos}").score(sentences)
    theirs = package_surprisals(added_eos, sentences)
    corrections = []
    for words, ours, plain, package in zip(sentences, scores, summed, theirs, strict=True):
        assert [w for w, _, _ in package] == words  # the same words (ASCII: pieces decode to the words)
        for k, (mine, sum_pieces, (_, corrected, buggy)) in enumerate(zip(ours.word_logprobs, plain.word_logprobs,
                                                                         package, strict=True)):
            assert -mine == pytest.approx(corrected, rel=FLOAT32_RTOL, abs=TOLERANCE), (words, k)
            assert -sum_pieces == pytest.approx(buggy, rel=FLOAT32_RTOL, abs=TOLERANCE), (words, k)
            corrections.append(abs(mine - sum_pieces))
        assert ours.total == plain.total  # the text's probability does not depend on the words' convention
    assert max(corrections) > 0.05  # the correction matters on this model (the first words' above all)


def test_the_package_counts_eos_twice_in_the_first_words_denominator(vocab_eos, sentences):
    """With EOS in the base vocabulary the package's first-word set (mid-word + punctuation + EOS pieces) holds
    EOS twice; we count it once. Every other word is equal; the first differs by exactly that mass."""
    from transformers import AutoTokenizer, GPT2LMHeadModel

    scorer = hf.load(f"hf:{vocab_eos}", word_prob="corrected")
    ours = scorer.score(sentences)
    theirs = package_surprisals(vocab_eos, sentences)
    tokenizer = AutoTokenizer.from_pretrained(vocab_eos, local_files_only=True)
    model = GPT2LMHeadModel.from_pretrained(vocab_eos, local_files_only=True).eval()
    with torch.no_grad():
        probs = model(torch.tensor([[tokenizer.eos_token_id]])).logits[0, 0].softmax(-1)
    marked = torch.tensor([t.startswith("Ġ") for t in tokenizer.convert_ids_to_tokens(range(len(probs)))])
    eos = probs[tokenizer.eos_token_id]
    unmarked = probs[~marked].sum()  # EOS included once
    for words, mine, package in zip(sentences, ours, theirs, strict=True):
        assert -mine.word_logprobs[0] - package[0][1] == pytest.approx(float(torch.log(unmarked / (unmarked + eos))),
                                                                       abs=TOLERANCE)
        assert [-v for v in mine.word_logprobs[1:]] == pytest.approx([c for _, c, _ in package[1:]],
                                                                      rel=FLOAT32_RTOL, abs=TOLERANCE), words


def test_corrected_is_recorded_in_eval_results_and_refused_where_it_does_not_apply(capsys, added_eos, tmp_path,
                                                                                   prepared_data_dir):
    common = ("--corpus", "ptb-sample", "--split", "test", "--limit", 3, "--data-dir", prepared_data_dir, "--json")
    assert main(["eval", "ppl", f"hf:{added_eos}", "--word-prob", "corrected", "--out", str(tmp_path / "c"),
                 *map(str, common)]) == 0
    settings = json.loads(capsys.readouterr().out)["settings"]
    assert settings["word_prob"] == settings["scorer_convention"]["word_prob"] == "corrected"
    assert "corrected (Pimentel & Meister 2024)" in settings["description"]
    assert json.loads((tmp_path / "c" / "results.json").read_text())["settings"]["word_prob"] == "corrected"
    assert main(["eval", "ppl", f"hf:{added_eos}", "--word-prob", "corrected", "--hf-convention", "lm-eval",
                 "--out", str(tmp_path / "l"), *map(str, common)]) == 2
    assert "--word-prob: the lm-eval convention reproduces its requests" in capsys.readouterr().err
