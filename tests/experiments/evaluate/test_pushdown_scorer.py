"""Pushdown scorers: the beam equals the exact marginal over every binary tree when nothing is pruned.

References come from the training path (``PushdownLM.gold_logprobs`` on each binary bracketing of the words,
collated as in training), not from the scorer's own step API.
"""

from __future__ import annotations

import itertools
import math

import pytest
import torch

from experiments.evaluate.scorers.pushdown import BeamScorer, ExactScorer, PushdownModel
from lightning_modules.data.pushdown_data import TokenVocab, collate, encode_sentence
from lightning_modules.data.tree import Tree
from lightning_modules.data.vocab import WordVocab
from lightning_modules.errors import InputError
from lightning_modules.models.pushdown import build

WORDS = ["the", "dog", "is", "happy", "barks"]
TINY = dict(d_model=16, n_layers=2, n_heads=2, d_ff=32, attachment_depth_dim=8, dropout=0.0,
            embedding_dropout=0.0, output_dropout=0.0, attachment_dropout=0.0)


def _model(family: str) -> PushdownModel:
    words = WordVocab.build(WORDS * 3, min_count=1)
    tokens = [words.token(i) for i in range(len(words))]
    vocab = TokenVocab(tokens)
    torch.manual_seed(1)
    overrides = {} if family == "pushdown" else {"pushdown_layers": 0, "attachment_loss": False}
    module = build({**TINY, **overrides, "vocab_size": len(vocab)}, family).eval()
    meta = {"family": family, "vocab": {"terminals": "words", "words": words.to_dict(), "tokens": list(vocab.tokens)}}
    return PushdownModel(module, meta)


def _binary_trees(leaves: list[Tree]) -> list[Tree]:
    if len(leaves) == 1:
        return [leaves[0]]
    out = []
    for cut in range(1, len(leaves)):
        for left, right in itertools.product(_binary_trees(leaves[:cut]), _binary_trees(leaves[cut:])):
            out.append(Tree("X", (left, right)))
    return out


def _joint(model: PushdownModel, words: list[str], tree: Tree) -> float:
    vocab = TokenVocab(list(model.ids)[3:])
    batch = collate([encode_sentence(tree, vocab, lambda w: (model.words.unkify(w),))])
    with torch.no_grad():
        lp_words, lp_attach = model.module.gold_logprobs(batch)
    return float(lp_words.sum() + lp_attach.sum())


@pytest.mark.parametrize("words", [["the", "dog"], ["the", "dog", "barks"], ["the", "dog", "is", "happy"]])
def test_unpruned_beam_is_the_marginal_over_all_binary_trees(words):
    model = _model("pushdown")
    leaves = [Tree("T", (w,)) for w in words]
    trees = _binary_trees(leaves) if len(words) > 1 else leaves
    expected = math.log(sum(math.exp(_joint(model, words, t)) for t in trees))
    score = BeamScorer(model, beam=1000).score([words])[0]
    assert score.total == pytest.approx(expected, abs=1e-4)
    assert sum(score.word_logprobs) + score.end_logprob == pytest.approx(score.total, abs=1e-6)
    assert score.extra["beam_final"] == len(trees)


def test_a_narrow_beam_is_a_lower_bound_and_greedy_follows_the_best_path():
    model = _model("pushdown")
    words = ["the", "dog", "is", "happy", "barks"]
    full = BeamScorer(model, beam=1000).score([words])[0].total
    narrow = BeamScorer(model, beam=2).score([words])[0].total
    assert narrow <= full + 1e-9
    greedy = BeamScorer(model, beam=1).score([words])[0]
    assert greedy.extra["beam_final"] == 1 and len(greedy.extra["attachment"]) == len(words) + 1


def test_base_lm_is_exact_and_refuses_the_beam():
    model = _model("base-lm")
    words = ["the", "dog", "barks", "zebra"]
    score = ExactScorer(model).score([words])[0]
    ref = _joint(model, words, Tree("X", tuple(Tree("T", (w,)) for w in words)))  # no head: words only
    assert score.total == pytest.approx(ref, abs=1e-5) and score.unknown_words == 1
    with pytest.raises(InputError, match="needs a pushdown checkpoint"):
        BeamScorer(model)
    with pytest.raises(InputError, match="joint model"):
        ExactScorer(_model("pushdown"))
