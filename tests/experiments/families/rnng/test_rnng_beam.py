"""The RNNG word-synchronous beam matches the official ``word_sync_beam_search`` (tests/golden/rnng: beam 10,
word beam 3, shift size 1 on the official random model): surprisals, final parses and their scores."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch

from experiments.families.rnng.beam import RNNGBeamScorer
from experiments.families.rnng.scorers import RNNGModel
from lightning_modules.errors import InputError
from lightning_modules.families.rnng.encoding import ActionDict, WordDict, tree_actions
from lightning_modules.families.rnng.model import build, official_state_dict

pytestmark = pytest.mark.usefixtures("one_thread")

GOLDEN = Path(__file__).resolve().parents[3] / "golden" / "rnng"


@pytest.fixture(scope="module")
def golden():
    return json.loads((GOLDEN / "golden.json").read_text())


def official(golden, strategy: str = "top_down") -> RNNGModel:
    m = golden["model"]
    module = build({"vocab_size": len(golden["i2w"]), "num_nts": len(golden["nonterminals"]), "w_dim": m["w_dim"],
                    "h_dim": m["h_dim"], "num_layers": m["num_layers"], "dropout": 0.0, "strategy": strategy,
                    "max_cons_nts": 8 if strategy == "top_down" else 3})  # the official defaults
    file = "model.pt" if strategy == "top_down" else "model_in_order.pt"
    module.load_state_dict(official_state_dict(torch.load(GOLDEN / file, weights_only=True),
                                               num_nts=len(golden["nonterminals"])))
    return RNNGModel(module, WordDict(tuple(golden["i2w"])), ActionDict(tuple(golden["nonterminals"]), strategy))


@pytest.fixture(scope="module")
def model(golden) -> RNNGModel:
    return official(golden)


@pytest.mark.parametrize("strategy", ["top_down", "in_order"])
def test_the_official_beam(golden, strategy):
    model = official(golden, strategy)
    b, key = golden["beam"], "beam" if strategy == "top_down" else "in_order_beam"
    scorer = RNNGBeamScorer(model, beam=b["beam_size"], word_beam=b["word_beam_size"], fast_track=b["shift_size"])
    searched = [s for s in golden["sentences"] if key in s]
    assert len(searched) == 6
    found = scorer.search([s["tokens"] for s in searched])  # one batch, as the official search ran them
    for s, (score, trees) in zip(searched, found, strict=True):
        official_beam = s[key]
        assert [-v for v in score.word_logprobs] == pytest.approx(official_beam["surprisals"], rel=1e-4, abs=1e-4)
        assert [tree_actions(t, strategy, pos_tags=False) for t in trees] == [
            model.actions.to_actions(actions) for actions, _ in official_beam["parses"]]
        found = torch.logsumexp(torch.tensor([v for _, v in official_beam["parses"]], dtype=torch.float64), 0)
        assert math.isclose(score.total, float(found), rel_tol=1e-5)
        assert math.isclose(score.extra["best_logprob"], official_beam["parses"][0][1], rel_tol=1e-5)
        assert math.isclose(sum(score.word_logprobs) + score.end_logprob, score.total, rel_tol=1e-9)


def test_the_word_beam_bounds_the_finished_parses(golden, model):
    words = golden["sentences"][1]["tokens"]
    narrow, narrow_trees = RNNGBeamScorer(model, beam=4, word_beam=2, fast_track=1).search([words])[0]
    wide, wide_trees = RNNGBeamScorer(model, beam=16, word_beam=8, fast_track=2).search([words])[0]
    assert (narrow.extra["trees"], wide.extra["trees"]) == (2, 8)
    assert all(t.leaves() == words for t in narrow_trees + wide_trees)


@pytest.mark.parametrize("strategy", ["top_down", "in_order"])
def test_the_batch_changes_nothing(golden, strategy):
    model = official(golden, strategy)
    sentences = [s["tokens"] for s in golden["sentences"][:7]]
    alone = RNNGBeamScorer(model, beam=6, word_beam=2, fast_track=2, batch_size=1).score(sentences)
    together = RNNGBeamScorer(model, beam=6, word_beam=2, fast_track=2, batch_size=4).score(sentences)
    for a, b in zip(alone, together, strict=True):
        assert a.best_tree == b.best_tree and a.extra["trees"] == b.extra["trees"]
        assert a.word_logprobs == pytest.approx(b.word_logprobs, rel=1e-5, abs=1e-5)
        assert a.total == pytest.approx(b.total, rel=1e-6)


def test_bad_settings_name_the_setting(model):
    with pytest.raises(InputError) as e:
        RNNGBeamScorer(model, beam=0)
    assert e.value.location == "beam"
    with pytest.raises(InputError) as e:
        RNNGBeamScorer(model, fast_track=-1)
    assert e.value.location == "fast_track"
