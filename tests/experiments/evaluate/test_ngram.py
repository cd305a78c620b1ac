"""Unigram and interpolated modified Kneser–Ney baselines: normalisation, hand-computed values, PTB sample."""

import json
import math

import pytest

from experiments.evaluate.scorer import Scorer
from experiments.evaluate.scorers.ngram import (
    EOS,
    FALLBACK_DISCOUNTS,
    KneserNey,
    Unigram,
    build_ngram,
    corpus_sentences,
    discounts_from_counts,
    load,
    save,
)
from lightning_modules.data.vocab import WordVocab
from lightning_modules.errors import InputError

TINY = [["a", "b"], ["a", "a"]]
D = [(0.5, 1.0, 1.5)] * 3


def tiny_vocab():
    return WordVocab.build([w for s in TINY for w in s], min_count=1)  # a, b, UNK


def test_discounts_from_count_of_counts():
    # t1 = 4, t2 = 2, t3 = 1, t4 = 1: Y = 1/2, D1 = 1 - 2Y t2/t1, D2 = 2 - 3Y t3/t2, D3+ = 3 - 4Y t4/t3
    assert discounts_from_counts([1, 1, 1, 1, 2, 2, 3, 4, 5, 9]) == ((0.5, 1.25, 1.0), False)
    assert discounts_from_counts([1, 1, 2]) == (FALLBACK_DISCOUNTS, True)  # no 3s or 4s: KenLM's fallback
    assert discounts_from_counts([1, 1, 1, 1, 2, 2, 3, 4, 4]) == (FALLBACK_DISCOUNTS, True)  # D3+ < 0


def test_bigram_kn_equals_hand_computed_values():
    """<s> a b </s>, <s> a a </s>; V = {a, b, UNK, </s>}; D = 0.5, 1.0, 1.5 at both orders.

    Unigram continuation counts: a 2 ({<s>, a}), b 1 ({a}), </s> 2 ({a, b}), UNK 0; total 5, back-off mass
    1.0 + 0.5 + 1.0 = 2.5, so p1(a) = 1/5 + 2.5/5 · 1/4 = 0.325, p1(b) = 0.225, p1(</s>) = 0.325,
    p1(UNK) = 0.125. Bigrams after a: a b, a a, a </s> once each (total 3, mass 1.5).
    """
    lm = KneserNey.train(TINY, tiny_vocab(), order=2, discounts=D[:2])
    assert lm.prob("a", ()) == pytest.approx(0.325)
    assert lm.prob("UNK", ()) == pytest.approx(0.125)
    assert lm.prob("a", ("<s>",)) == pytest.approx(0.5 + 0.5 * 0.325)
    assert lm.prob("b", ("<s>",)) == pytest.approx(0.5 * 0.225)
    assert lm.prob("b", ("a",)) == pytest.approx(0.5 / 3 + 0.5 * 0.225)
    assert lm.prob("UNK", ("a",)) == pytest.approx(0.5 * 0.125)
    assert lm.prob("</s>", ("b",)) == pytest.approx(0.5 + 0.5 * 0.325)
    assert lm.prob("a", ("UNK",)) == pytest.approx(0.325)  # unseen history: the unigram level
    score = lm.score([["a", "b"]])[0]
    assert score.word_logprobs == pytest.approx((math.log(0.6625), math.log(0.5 / 3 + 0.1125)))
    assert score.end_logprob == pytest.approx(math.log(0.6625))
    assert score.total == pytest.approx(sum(score.word_logprobs) + score.end_logprob)


def test_trigram_kn_uses_raw_counts_for_ngrams_starting_with_bos():
    lm = KneserNey.train(TINY, tiny_vocab(), order=3, discounts=D)
    assert lm.counts[1][("<s>", "a")] == 2  # raw: cannot be extended to the left
    assert lm.counts[1][("a", "b")] == 1  # continuation: only "<s> a b"
    assert lm.counts[1][("a", "</s>")] == 1  # continuation: only "a a </s>"
    assert lm.counts[2][("<s>", "a", "b")] == 1
    # p(b | <s> a) = 0.5/2 + (1.0/2) p2(b | a), p2(b | a) as in the bigram model
    assert lm.prob("b", ("<s>", "a")) == pytest.approx(0.25 + 0.5 * (0.5 / 3 + 0.1125))
    assert lm.prob("b", ("x", "<s>", "a")) == lm.prob("b", ("<s>", "a"))  # only the last order-1 tokens


@pytest.fixture(scope="module")
def ptb_models(prepared_data_dir):
    return {order: build_ngram("ptb-sample", "train", order, data_dir=prepared_data_dir) for order in (1, 3)}


def test_distributions_sum_to_one_over_the_vocabulary(ptb_models):
    kn, unigram = ptb_models[3], ptb_models[1]
    predicted = kn.predicted()
    assert predicted[-1] == EOS and len(predicted) == len(kn.vocab) + 1
    histories = [(), ("<s>",), ("<s>", "The"), ("of", "the"), ("the", "company"), ("UNK", "UNK"),
                 ("never-seen", "words")]
    for h in histories:
        assert math.fsum(kn.prob(w, h) for w in predicted) == pytest.approx(1.0, abs=1e-9)
    assert math.fsum(math.exp(unigram.logprob(w)) for w in predicted) == pytest.approx(1.0, abs=1e-9)


def test_scorers_follow_the_protocol_and_save_load_exactly(ptb_models, prepared_data_dir, tmp_path):
    valid = corpus_sentences("ptb-sample", "valid", prepared_data_dir)[:20]
    for model in ptb_models.values():
        assert isinstance(model, Scorer)
        assert model.convention.method == "exact" and not model.convention.bound
        path = tmp_path / f"{model.name}.json"
        save(model, path)
        again = load(path)
        assert [s.total for s in again.score(valid)] == [s.total for s in model.score(valid)]
        scores = model.score(valid)
        assert all(len(s.word_logprobs) == len(w) for s, w in zip(scores, valid))
        assert sum(s.unknown_words for s in scores) > 0
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"format": "synbench.NgramModel", "version": 1, "kind": "kneser-ney",
                               "vocab": ptb_models[3].vocab.to_dict(), "order": 2}))
    with pytest.raises(InputError, match="bad.json"):
        load(bad)
    bad.write_text("{not json")
    with pytest.raises(InputError, match="bad.json:1"):
        load(bad)


def test_validation_perplexity_unigram_above_kneser_ney(ptb_models, prepared_data_dir):
    valid = corpus_sentences("ptb-sample", "valid", prepared_data_dir)
    words = sum(len(s) for s in valid)
    ppl = {order: math.exp(-math.fsum(s.total for s in m.score(valid)) / words) for order, m in ptb_models.items()}
    assert ppl[1] > 1.5 * ppl[3] > 1.5  # (measured: unigram ~705, KN-3 ~161; </s> included, per word)


def test_bad_arguments_are_input_errors():
    with pytest.raises(InputError):
        KneserNey.train(TINY, tiny_vocab(), order=0)
    with pytest.raises(InputError, match="discounts"):
        KneserNey.train(TINY, tiny_vocab(), order=2, discounts=[(1.5, 1.0, 1.5)] * 2)
    with pytest.raises(InputError):
        Unigram.train(TINY, tiny_vocab(), k=0)
