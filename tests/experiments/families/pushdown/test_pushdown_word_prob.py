"""Base-LM and the Pushdown-LM beam on SentencePiece pieces with ``word_prob="corrected"`` (Pimentel & Meister
2024): each word's summed pieces times P(a word begins or the sentence ends) after it over the same before it,
computed here from the network's own next-piece distributions (for the beam: marginals over every attachment
history, from the training forward); ``total`` stays log p(x); a word-level vocabulary refuses the convention,
and the family declares the option only where its terminals are pieces."""

from __future__ import annotations

import math

import pytest
import torch

from experiments.families import get_family
from experiments.families.pushdown.scorers import BeamScorer, ExactScorer
from lightning_modules.data import sentencepiece
from lightning_modules.data.tree import Tree
from lightning_modules.data.vocab import TokenVocab
from lightning_modules.errors import InputError
from lightning_modules.families.pushdown.batch import collate
from lightning_modules.families.pushdown.data import encode_sentence, with_unknown
from tests.experiments.families.pushdown.test_pushdown_scorers import _binary_trees, _model, _piece_model
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


def _prefix_boundary_masses(model, sp, trees, begins: torch.Tensor, starts: list[int]) -> list[float]:
    """log Σ over the distinct attachment histories of tokens 1..k-1 of p(x_<k, history) P(B | x_<k, history),
    at every k in ``starts``, from the training forward on every complete tree (a position's tape depends on
    the attachments before it only, so any tree with the history gives its values)."""
    vocab = TokenVocab(list(model.ids)[3:])
    histories: dict[tuple[int, ...], list[float]] = {}
    for tree in trees:
        batch = collate([encode_sentence(tree, vocab, with_unknown(lambda w: sp.encode_words([w])[0], vocab,
                                                                   "<unk>"))])
        with torch.no_grad():
            word_logits, attach_logits = model.module(batch)
            lp_words, lp_attach = model.module.gold_logprobs(batch)
        mass = word_logits[0].double().log_softmax(-1)[:, begins].logsumexp(-1)
        path = (lp_words[0] + lp_attach[0]).double().cumsum(0)
        labels = tuple(batch.attachment[0].tolist())
        for k in starts:
            histories.setdefault((k, labels[: k - 1]), [float((path[k - 2] if k > 1 else 0.0) + mass[k - 1])])
    return [math.log(sum(math.exp(v[0]) for (k2, _), v in histories.items() if k2 == k)) for k in starts]


def test_pushdown_beam_corrected_words_are_differences_of_boundary_marginals_at_word_starts():
    model, sp = _piece_model("pushdown")
    words = ["the", "dog", "barks"]
    trees = _binary_trees([Tree("T", (w,)) for w in words])
    plain = BeamScorer(model, beam=1000).score([words])[0]
    scorer = BeamScorer(model, beam=1000, word_prob="corrected")
    corrected = scorer.score([words])[0]
    assert scorer.convention.word_prob == "corrected" and "P(B | prefix, y)" in scorer.convention.incremental
    enc = model.encode(words)
    starts = [k for k in range(1, len(enc.ids) - 1) if enc.first[k] == k] + [len(enc.ids) - 1]  # and <eos>
    begins = torch.tensor([t.startswith(sentencepiece.BOUNDARY) or t == "<eos>" for t in model.tokens])
    masses = _prefix_boundary_masses(model, sp, trees, begins, starts)
    want = [b - a for a, b in zip(masses, masses[1:])]
    assert corrected.word_logprobs == pytest.approx(want, abs=1e-4)
    assert max(abs(a - b) for a, b in zip(corrected.word_logprobs, plain.word_logprobs)) > 1e-3
    # the search, its bound and its tree do not depend on the convention
    assert (corrected.total, corrected.best_tree, corrected.extra) == (plain.total, plain.best_tree, plain.extra)


def test_pushdown_beam_declares_the_convention_for_pieces_and_word_vocabularies_refuse_it():
    family = get_family("pushdown")
    beam, gold = family.methods({"data": {"terminals": "sentencepiece"}})
    assert beam.options == {"beam": 300, "word_prob": "sum-pieces"} and gold.options == {}
    assert family.methods({"data": {"terminals": "words"}})[0].options == {"beam": 300}
    with pytest.raises(InputError, match="one token per word: --word-prob corrected needs SentencePiece"):
        BeamScorer(_model("pushdown"), beam=4, word_prob="corrected")
