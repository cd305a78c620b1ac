"""TXL (terminals) on SentencePiece pieces with ``word_prob="corrected"`` (Pimentel & Meister 2024): each word's
summed pieces times P(a word begins or the sentence ends) after it over the same before it, computed here from
the network's own distributions; ``total`` stays log p(x); a word-level vocabulary refuses the convention."""

from __future__ import annotations

import math

import pytest
import torch

from experiments.families.tg.scorers import ExactScorer
from lightning_modules.data import sentencepiece
from lightning_modules.data.tree import read_bracketed
from lightning_modules.errors import InputError
from tests.experiments.families.tg.test_tg_scorers import make_model
from tests.tolerances import close32


def test_corrected_words_are_the_pieces_times_the_boundary_after_over_before(shared_data):
    trees = [t for _, t in read_bracketed(shared_data / "ptb_nltk_sample" / "combined" / "wsj_0003.mrg")]
    model = make_model("txl-terminals", trees, terminals="sentencepiece", segment_length=16)
    sentences = [["A", "form", "of", "asbestos", "once", "used", "."], ["Lorillard", "said", "it", "stopped"]]
    summed = ExactScorer(model).score(sentences)
    scorer = ExactScorer(model, batch_size=1, word_prob="corrected")
    corrected = scorer.score(sentences)
    assert scorer.convention.word_prob == "corrected"
    begins = torch.tensor([t.startswith(sentencepiece.BOUNDARY) or t == "</s>" for t in model.vocab.tokens])
    for words, plain, ours in zip(sentences, summed, corrected, strict=True):
        actions = scorer.actions(words)
        example = model.encode(actions)
        with torch.no_grad():
            logits, _ = model.module(model.chunks([example]))
        probs = torch.cat([chunk[0] for chunk in logits])[: len(actions.tokens) - 1].double().softmax(-1)
        boundary = probs[:, begins].sum(-1).log().tolist()  # before token j+1, j = 0 .. the last piece
        index = actions.word_index
        for i in range(len(words)):
            first = index.index(i)
            last = len(index) - 1 - index[::-1].index(i)
            want = plain.word_logprobs[i] + boundary[last] - boundary[first - 1]
            assert ours.word_logprobs[i] == close32(want), (words, i)
        assert ours.total == close32(plain.total) and ours.end_logprob == close32(plain.end_logprob)
        assert max(abs(a - b) for a, b in zip(ours.word_logprobs, plain.word_logprobs)) > 1e-3
        assert math.fsum(ours.word_logprobs) == close32(math.fsum(plain.word_logprobs) + boundary[-1] - boundary[0])
    with pytest.raises(InputError, match="one token per word: --word-prob corrected needs SentencePiece"):
        ExactScorer(make_model("txl-terminals", trees), word_prob="corrected")
