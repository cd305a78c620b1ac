"""The CAG word-synchronous beam matches the official ``word_sync_beam_search`` of osekilab/CAG
(tests/golden/cag: beam 10, word beam 3, shift size 1 on the official random model): surprisals, final parses
and their scores; a sentence longer than the fixed stack is a located error."""

from __future__ import annotations

import math
from dataclasses import asdict

import pytest
import torch

from experiments.families.rnng.cag_beam import CAGBeamScorer
from experiments.families.rnng.cag_scorers import CAGModel
from lightning_modules.errors import InputError
from lightning_modules.families.rnng.cag_model import build
from lightning_modules.families.rnng.encoding import ActionDict, WordDict, tree_actions
from tests.lightning_modules.families.rnng.cag_official import golden_values, official_module
from tests.tolerances import FLOAT32_RTOL

pytestmark = pytest.mark.usefixtures("one_thread")

golden = golden_values()


@pytest.fixture(scope="module")
def model() -> CAGModel:
    return CAGModel(official_module(golden), WordDict(tuple(golden["i2w"])), ActionDict(tuple(golden["nonterminals"])),
                    "cag")

def test_the_official_beam(model):
    b = golden["beam"]
    scorer = CAGBeamScorer(model, beam=b["beam_size"], word_beam=b["word_beam_size"], fast_track=b["shift_size"])
    searched = [s for s in golden["sentences"] if "beam" in s]
    assert len(searched) == 6
    found = scorer.search([s["tokens"] for s in searched])  # one batch, as the official search ran them
    for s, (score, trees) in zip(searched, found, strict=True):
        official = s["beam"]
        assert [-v for v in score.word_logprobs] == pytest.approx(official["surprisals"], rel=1e-4, abs=1e-4)
        assert [tree_actions(t, pos_tags=False) for t in trees] == [
            model.actions.to_actions(actions) for actions, _ in official["parses"]]
        best = torch.logsumexp(torch.tensor([v for _, v in official["parses"]], dtype=torch.float64), 0)
        assert math.isclose(score.total, float(best), rel_tol=FLOAT32_RTOL)
        assert math.isclose(score.extra["best_logprob"], official["parses"][0][1], rel_tol=FLOAT32_RTOL)
        assert math.isclose(sum(score.word_logprobs) + score.end_logprob, score.total, rel_tol=1e-9)


def test_the_batch_changes_nothing(model):
    sentences = [s["tokens"] for s in golden["sentences"][:7]]
    alone = CAGBeamScorer(model, beam=6, word_beam=2, fast_track=2, batch_size=1).score(sentences)
    together = CAGBeamScorer(model, beam=6, word_beam=2, fast_track=2, batch_size=4).score(sentences)
    for a, b in zip(alone, together, strict=True):
        assert a.best_tree == b.best_tree and a.extra["trees"] == b.extra["trees"]
        assert a.word_logprobs == pytest.approx(b.word_logprobs, rel=1e-5, abs=1e-5)
        assert a.total == pytest.approx(b.total, rel=1e-6)


def test_a_sentence_longer_than_the_fixed_stack_is_located(model):
    scorer = CAGBeamScorer(model, beam=2, word_beam=1, fast_track=1)
    with pytest.raises(InputError, match="fixed stack of 100") as e:
        scorer.score([["the"], ["the"] * 100])
    assert e.value.location == "sentence 1"


def test_pushes_stop_at_the_fixed_stack(model):
    """On a stack of 8 the beam still parses a 6-word sentence, never pushing an element past position 8."""
    small = build({**asdict(model.module.config), "stack_size": 8})
    state = model.module.state_dict()
    state["stack_attention.position.weight"] = state["stack_attention.position.weight"][:9]
    small.load_state_dict(state)
    tight = CAGModel(small.eval(), model.words, model.actions, "cag")
    words = golden["sentences"][1]["tokens"][:6]
    score, trees = CAGBeamScorer(tight, beam=8, word_beam=4, fast_track=1).search([words])[0]
    assert trees and all(t.leaves() == list(words) for t in trees) and math.isfinite(score.total)
