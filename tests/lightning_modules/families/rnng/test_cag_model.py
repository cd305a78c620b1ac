"""The batched fixed-stack CAG: the official random model's state_dict (tests/golden/cag) loaded into ours gives
the official per-action log-probs; our encoding gives the official actions and word ids; batching changes
nothing; training lowers the loss; bad configs, foreign state_dicts and stack overflows are located errors."""

from __future__ import annotations

import pytest
import torch

from lightning_modules.data.tree import parse_tree
from lightning_modules.errors import InputError
from lightning_modules.families.rnng.cag_model import build, config_from_dict, official_state_dict
from lightning_modules.families.rnng.encoding import ActionDict, Example, WordDict, encode, tree_actions
from lightning_modules.families.rnng.model import collate
from tests.lightning_modules.families.rnng.cag_official import golden_values, official_module
from tests.tolerances import FLOAT32_RTOL

pytestmark = pytest.mark.usefixtures("one_thread")

golden = golden_values()

def examples() -> list[Example]:
    return [Example(tuple(s["token_ids"]), tuple(s["action_ids"]), s["top_down_max_stack_size"])
            for s in golden["sentences"]]


def test_our_encoding_is_the_official_preprocessing():
    trees = [parse_tree(s["tree"]) for s in golden["sentences"]]
    words = WordDict.build([w for t in trees for w in t.leaves()], min_count=2)
    n_special = 1 + len(golden["specials"])
    assert set(words.i2w[:n_special]) == set(golden["i2w"][:n_special])
    assert words.i2w[n_special:] == tuple(golden["i2w"][n_special:])
    actions = ActionDict(tuple(golden["nonterminals"]))
    for tree, s in zip(trees, golden["sentences"], strict=True):
        example = encode(tree, words, actions, pos_tags=True)
        assert tree_actions(tree, pos_tags=True) == s["top_down"]
        assert example.action_ids == tuple(s["action_ids"])
        assert example.stack_size == s["top_down_max_stack_size"]
        assert [words.i2w[i] for i in example.token_ids] == [golden["i2w"][i] for i in s["token_ids"]]


def test_official_logprobs():
    model = official_module(golden)
    with torch.no_grad():
        ours = model.action_logprobs(collate(examples()))
    for b, s in enumerate(golden["sentences"]):
        expected = torch.tensor(s["logprobs"], dtype=torch.float64)
        got = ours[b, : len(expected)].double()
        assert torch.allclose(got, expected, rtol=1e-5, atol=1e-6), (b, (got - expected).abs().max())
        assert (ours[b, len(expected):] == 0).all()
    total = -sum(sum(s["logprobs"]) for s in golden["sentences"])
    assert abs(total - golden["loss"]) <= 1e-5 * abs(golden["loss"])


def test_one_sentence_at_a_time_equals_the_batch():
    model = official_module(golden)
    rows = examples()[:5]
    with torch.no_grad():
        batched = model.action_logprobs(collate(rows))
        for b, row in enumerate(rows):
            alone = model.action_logprobs(collate([row]))[0]
            assert torch.allclose(alone, batched[b, : len(row)], rtol=FLOAT32_RTOL, atol=1e-5)


def test_training_steps_lower_the_loss():
    """Adam on the official random model over 8 golden trees: the official loss falls (gradients flow through
    the cached keys and values, the composition and the tied word layer)."""
    model = official_module(golden).train()
    batch = collate(examples()[:8])
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
    losses = []
    for _ in range(12):
        loss = model.loss(model.loss_terms(batch))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(float(loss.detach()))
    assert losses[-1] < 0.8 * losses[0]


def test_a_push_past_the_fixed_stack_is_an_input_error():
    model = build({"vocab_size": 10, "num_nts": 2, "w_dim": 8, "h_dim": 8, "num_layers": 1, "num_heads": 1,
                   "stack_size": 4, "dropout": 0.0, "embd_dropout": 0.0})
    deep = Example((4, 5, 6, 7), (3, 1, 1, 1, 1, 2), 5)  # (X w w w w): five elements on a stack of four
    with pytest.raises(InputError, match="fixed stack of 4") as e:
        model.action_logprobs(collate([deep]))
    assert e.value.location == "model.stack_size"


def test_bad_configs_and_foreign_state_dicts_are_input_errors():
    for values, key in (({"h_dim": 32, "w_dim": 16}, "model.h_dim"), ({"num_heads": 3}, "model.num_heads"),
                        ({"embd_dropout": 1.0}, "model.embd_dropout"), ({"strategy": "in_order"}, "model.strategy"),
                        ({"stack_size": 2}, "model.stack_size")):
        with pytest.raises(InputError) as e:
            config_from_dict(values)
        assert e.value.location == key, values
    with pytest.raises(InputError, match="not a parameter") as e:
        official_state_dict({"rnng.stack_rnn.lstm.0.weight_ih": torch.zeros(1)}, "x.pt")
    assert e.value.location == "x.pt"
