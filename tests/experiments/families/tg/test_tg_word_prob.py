"""TXL (terminals) on SentencePiece pieces with ``word_prob="corrected"`` (Pimentel & Meister 2024): each word's
summed pieces times P(a word begins or the sentence ends) after it over the same before it, computed here from
the network's own distributions; ``total`` stays log p(x); a word-level vocabulary refuses the convention.
For TG (joint), the proposal marginal's values are differences of boundary marginals over the distinct
prefixes (brute force here), and the unpruned beam's equal the proposal marginal over its own final trees."""

from __future__ import annotations

import math

import pytest
import torch

from experiments.evaluate.scorers.tree_marginal import TreeScorer
from experiments.families import get_family
from experiments.families.tg.beam import BeamScorer
from experiments.families.tg.scorers import ExactScorer
from lightning_modules.data import sentencepiece
from lightning_modules.data.tree import parse_tree, read_bracketed
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


# -- joint models: proposal marginals and the beam ------------------------------------------------------------
def _boundary_marginals(model, trees, words) -> list[float]:
    """D_-1 .. D_n-1 by brute force: log Σ over the distinct token prefixes of the trees that end with word i's
    last piece of p(prefix) P(B | prefix), from each tree's full forward pass (B: every token but a piece that
    continues a word)."""
    begins = torch.tensor(model.word_boundary_ids())
    prefixes: dict[tuple[int, tuple[int, ...]], float] = {}
    for tree in trees:
        example = model.encode_tree(model.model_tree(tree, False, "test"))
        with torch.no_grad():
            logits, _ = model.module(model.chunks([example]))
        lp = torch.cat([chunk[0] for chunk in logits])[: len(example)].double().log_softmax(-1)
        tokens = example.tokens.tolist()
        path = [0.0] + lp[torch.arange(len(tokens) - 1), torch.tensor(tokens[1:])].cumsum(0).tolist()
        ends = [0] + [max(j for j, w in enumerate(example.word_index.tolist()) if w == i) for i in range(len(words))]
        for i, end in enumerate(ends):
            prefixes[(i, tuple(tokens[: end + 1]))] = path[end] + float(lp[end, begins].logsumexp(-1))
    return [math.log(sum(math.exp(v) for (j, _), v in prefixes.items() if j == i)) for i in range(len(words) + 1)]


@pytest.fixture(scope="module")
def piece_tg(shared_data):
    trees = [t for _, t in read_bracketed(shared_data / "ptb_nltk_sample" / "combined" / "wsj_0003.mrg")]
    return make_model("tg", trees, terminals="sentencepiece", segment_length=64)


def test_proposal_marginal_corrected_is_the_difference_of_boundary_marginals(piece_tg):
    words = ["A", "form", "of", "asbestos"]
    trees = [parse_tree(t) for t in ("(S (NP A form) (PP of (NP asbestos)))", "(S (NP (NP A form) (PP of asbestos)))",
                                     "(S A (VP form (PP of asbestos)))", "(S (NP A form) (PP of (NP asbestos)))")]
    plain = TreeScorer(piece_tg, None, method="proposals").score_trees([words], [trees])[0]
    scorer = TreeScorer(piece_tg, None, method="proposals", word_prob="corrected")
    ours = scorer.score_trees([words], [trees])[0]
    assert scorer.convention.word_prob == "corrected"
    masses = _boundary_marginals(piece_tg, trees[:3], words)
    assert ours.word_logprobs == pytest.approx([b - a for a, b in zip(masses, masses[1:])], abs=1e-4)
    assert (ours.total, ours.end_logprob, ours.best_tree) == (plain.total, plain.end_logprob, plain.best_tree)
    assert max(abs(a - b) for a, b in zip(ours.word_logprobs, plain.word_logprobs)) > 1e-3


def test_unpruned_beam_corrected_equals_the_proposal_marginal_over_its_trees():
    trees = [parse_tree(t) for t in ("(S (NP the cats) (VP sat))", "(S (NP a dog) (VP ran (PP to it)))")] * 3
    model = make_model("tg", trees, terminals="sentencepiece", segment_length=64, sp_vocab_size=18)
    words = ["the", "cats", "sat"]
    assert [len(model.terminals(w)) for w in words] == [4, 4, 3]
    beam = BeamScorer(model, 10_000, 10_000, 1, word_prob="corrected")
    [ours] = beam.score([words])
    [plain] = BeamScorer(model, 10_000, 10_000, 1).score([words])
    trees = beam.final_trees([words])
    [pooled] = TreeScorer(model, None, method="proposals", word_prob="corrected").score_trees([words], trees)
    assert ours.word_logprobs == pytest.approx(pooled.word_logprobs, abs=1e-4)
    assert ours.total == close32(plain.total) and ours.best_tree == plain.best_tree
    assert ours.end_logprob == close32(plain.end_logprob)


def test_joint_methods_declare_the_convention_for_pieces_and_word_vocabularies_refuse_it():
    family = get_family("tg")
    beam, proposals, gold = family.methods({"data": {"terminals": "sentencepiece"}})
    assert beam.options["word_prob"] == proposals.options["word_prob"] == "sum-pieces" and gold.options == {}
    assert all("word_prob" not in m.options for m in family.methods({"data": {"terminals": "words"}}))
    words_model = make_model("tg", [parse_tree("(S (NP a b) c)")])
    with pytest.raises(InputError, match="one token per word: --word-prob corrected needs SentencePiece"):
        BeamScorer(words_model, 4, 2, 2, word_prob="corrected")
    with pytest.raises(InputError, match="one token per word: --word-prob corrected needs SentencePiece"):
        TreeScorer(words_model, None, word_prob="corrected")
