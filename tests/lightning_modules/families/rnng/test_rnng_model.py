"""The batched fixed-stack RNNG: the official random model's state_dict (tests/golden/rnng) loaded into ours
gives the official per-action log-probs; batching changes nothing; training lowers the loss."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from lightning_modules.errors import InputError
from lightning_modules.families.rnng.encoding import ActionDict, Example, WordDict, encode
from lightning_modules.families.rnng.model import RNNG, build, collate, config_from_dict, official_state_dict

pytestmark = pytest.mark.usefixtures("one_thread")

GOLDEN = Path(__file__).resolve().parents[3] / "golden" / "rnng"


@pytest.fixture(scope="module")
def golden():
    return json.loads((GOLDEN / "golden.json").read_text())


def official_model(golden, strategy: str = "top_down") -> RNNG:
    m = golden["model"]
    model = build({"vocab_size": len(golden["i2w"]), "num_nts": len(golden["nonterminals"]), "w_dim": m["w_dim"],
                   "h_dim": m["h_dim"], "num_layers": m["num_layers"], "dropout": 0.0, "strategy": strategy,
                   "max_cons_nts": 8 if strategy == "top_down" else 3})
    file = "model.pt" if strategy == "top_down" else "model_in_order.pt"
    state = torch.load(GOLDEN / file, map_location="cpu", weights_only=True)
    model.load_state_dict(official_state_dict(state, num_nts=len(golden["nonterminals"])), strict=True)
    return model.eval()


def examples(golden, strategy: str = "top_down") -> list[Example]:
    prefix = "" if strategy == "top_down" else "in_order_"
    return [Example(tuple(s["token_ids"]), tuple(s[f"{prefix}action_ids"]), s[f"{strategy}_max_stack_size"])
            for s in golden["sentences"]]


@pytest.mark.parametrize("strategy", ["top_down", "in_order"])
def test_official_logprobs(golden, strategy):
    prefix = "" if strategy == "top_down" else "in_order_"
    model = official_model(golden, strategy)
    rows = examples(golden, strategy)
    with torch.no_grad():
        ours = model.action_logprobs(collate(rows))
    for b, s in enumerate(golden["sentences"]):
        expected = torch.tensor(s[f"{prefix}logprobs"], dtype=torch.float64)
        got = ours[b, : len(expected)].double()
        assert torch.allclose(got, expected, rtol=1e-5, atol=1e-6), (b, (got - expected).abs().max())
        assert (ours[b, len(expected):] == 0).all()
    total = -sum(sum(s[f"{prefix}logprobs"]) for s in golden["sentences"])
    assert abs(total - golden[f"{prefix}loss"]) <= 1e-5 * abs(golden[f"{prefix}loss"])


@pytest.mark.parametrize("strategy", ["top_down", "in_order"])
def test_one_sentence_at_a_time_equals_the_batch(golden, strategy):
    model = official_model(golden, strategy)
    rows = examples(golden, strategy)[:5]
    with torch.no_grad():
        batched = model.action_logprobs(collate(rows))
        for b, row in enumerate(rows):
            alone = model.action_logprobs(collate([row]))[0]
            assert torch.allclose(alone, batched[b, : len(row)], atol=1e-5)


def test_training_steps_lower_the_loss(golden):
    torch.manual_seed(0)
    words = WordDict.build([w for s in golden["sentences"] for w in s["tokens"]], min_count=1)
    actions = ActionDict(tuple(golden["nonterminals"]))
    from lightning_modules.data.tree import parse_tree

    batch = collate([encode(parse_tree(s["tree"]), words, actions, pos_tags=True) for s in golden["sentences"][:8]])
    model = build({"vocab_size": len(words), "num_nts": len(actions.nonterminals), "w_dim": 16, "h_dim": 16,
                   "num_layers": 1, "dropout": 0.0, "lr": 0.01})
    optimizer = model.configure_optimizers()
    first = None
    for _ in range(15):
        loss = model.loss(model.loss_terms(batch))
        first = first if first is not None else float(loss.detach())
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    assert float(loss.detach()) < 0.8 * first


def test_bad_configs_and_foreign_state_dicts_are_input_errors():
    with pytest.raises(InputError) as e:
        config_from_dict({"strategy": "bottom_up"})
    assert e.value.location == "model.strategy"
    with pytest.raises(InputError) as e:
        config_from_dict({"composition": "attention"})
    assert e.value.location == "model.composition"
    with pytest.raises(InputError) as e:
        config_from_dict({"strategy": "bottom_up"})
    assert e.value.location == "model.strategy"
    with pytest.raises(InputError) as e:
        config_from_dict({"w_dim": 0})
    assert e.value.location == "model.w_dim"
    with pytest.raises(InputError, match="not a parameter") as e:
        official_state_dict({"encoder.layers.0.weight": torch.zeros(1)}, "x.pt")
    assert e.value.location == "x.pt"
