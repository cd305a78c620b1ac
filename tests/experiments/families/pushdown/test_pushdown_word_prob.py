"""Base-LM on SentencePiece pieces with ``word_prob="corrected"`` (Pimentel & Meister 2024): each word's summed
pieces times P(a word begins or the sentence ends) after it over the same before it, computed here from the
network's own next-piece distributions; ``total`` stays log p(x); a word-level vocabulary refuses the
convention, and the family declares the option only where its terminals are pieces."""

from __future__ import annotations

import math

import pytest
import torch

from experiments.families import get_family
from experiments.families.pushdown.scorers import ExactScorer
from lightning_modules.data import sentencepiece
from lightning_modules.errors import InputError
from tests.experiments.families.pushdown.test_pushdown_scorers import _model, _piece_model
from tests.tolerances import close32


def test_corrected_words_are_the_pieces_times_the_boundary_after_over_before():
    model, sp = _piece_model("base-lm")
    sentences = [["the", "dog", "barks"], ["a", "cat", "is", "happy"]]
    plain = ExactScorer(model).score(sentences)
    scorer = ExactScorer(model, word_prob="corrected")
    corrected = scorer.score(sentences)
    assert scorer.convention.word_prob == "corrected"
    begins = torch.tensor([t.startswith(sentencepiece.BOUNDARY) or t == "<eos>" for t in model.tokens])
    for words, summed, ours in zip(sentences, plain, corrected, strict=True):
        enc = model.encode(words)
        n = len(enc.ids) - 1
        with torch.no_grad():
            h = model.module.hidden_states(torch.tensor([enc.ids[:-1]]), torch.zeros(1, n, n, dtype=torch.long),
                                           torch.tensor([n]))
            probs = model.module.word_logits(h[0]).double().softmax(-1)
        boundary = probs[:, begins].sum(-1).log().tolist()  # before piece j + 1, j = 0 .. the last piece
        for i in range(len(words)):
            first = enc.word_of.index(i)
            last = len(enc.word_of) - 1 - enc.word_of[::-1].index(i)
            want = summed.word_logprobs[i] + boundary[last + 1] - boundary[first]
            assert ours.word_logprobs[i] == close32(want), (words, i)
        assert ours.total == close32(summed.total) and ours.end_logprob == close32(summed.end_logprob)
        assert max(abs(a - b) for a, b in zip(ours.word_logprobs, summed.word_logprobs)) > 1e-3
        assert math.fsum(ours.word_logprobs) == close32(
            math.fsum(summed.word_logprobs) + boundary[-1] - boundary[0])


def test_word_vocabularies_refuse_it_and_the_method_declares_it_only_for_pieces():
    with pytest.raises(InputError, match="one token per word: --word-prob corrected needs SentencePiece"):
        ExactScorer(_model("base-lm"), word_prob="corrected")
    family = get_family("base-lm")
    [exact] = family.methods({"data": {"terminals": "sentencepiece"}})
    assert exact.options == {"word_prob": "sum-pieces"}
    assert family.methods({"data": {"terminals": "words"}})[0].options == {}
