"""The seed stack's flat buffers (``SeedStack``): the stacked parameters are views of one [S, P] buffer per
parameter group of the module's optimizer, so per-seed clipping is one norm and one multiply per buffer and
equals ``clip_grad_norm_`` on each seed's own parameters; the optimizer steps the buffers (fused where the
device has the kernel) as each seed's solo optimizer steps its parameters; and each seed's optimizer state
comes out, and goes back in, in the solo format."""

from __future__ import annotations

import pytest
import torch

from lightning_modules.families.dtg import model as dtg
from lightning_modules.models import txl_lm as tg
from lightning_modules.models.seed_stack import CPU_SLICE, SeedStack
from tests.lightning_modules.models.test_txl_lm import TINY, random_chunks
from tests.tolerances import FLOAT32

SEEDS = 3


def modules(kind: str) -> list[tg.TransformerGrammarLM]:
    """Seeds of a TG (one optimizer group) or a DTG (two: the embedding at its own rate)."""
    out = []
    for seed in range(SEEDS):
        torch.manual_seed(seed)
        out.append(tg.build(TINY) if kind == "tg" else dtg.build({**TINY, "output_head": "split"}))
    return [m.train() for m in out]


def solo_step(module: tg.TransformerGrammarLM, chunks: list[dict], clip: float) -> torch.optim.Optimizer:
    """One solo training step: loss, ``clip_grad_norm_``, the module's own optimizer."""
    optimizer = module.configure_optimizers()["optimizer"]
    total, count = module.nll(chunks)
    (total / count).backward()
    torch.nn.utils.clip_grad_norm_(module.parameters(), clip)
    optimizer.step()
    return optimizer


@pytest.mark.parametrize("kind", ["tg", "dtg"])
def test_flat_clipping_is_clip_grad_norm_per_seed(kind):
    group = modules(kind)
    stack = SeedStack(group)
    assert len(stack._flats) == (1 if kind == "tg" else 2)  # one flat buffer per optimizer group
    batches = [random_chunks(batch=2, seed=s) for s in range(SEEDS)]
    for module, chunks in zip(group, batches, strict=True):
        total, count = module.nll(chunks)
        (total / count).backward()
    stacked = {name: torch.stack([dict(m.named_parameters())[name].grad for m in group])
               for name, _ in group[0].named_parameters()}
    with torch.no_grad():
        for flat in stack._flats:  # the seeds' own gradients, laid out as the stack's
            flat.grad = torch.zeros_like(flat)
        for name, grad in stack.grads().items():
            grad.copy_(stacked[name])
    clip = 0.05  # below every seed's norm: all are scaled
    norms = stack.clip_per_seed(clip)
    for i, module in enumerate(group):
        norm = torch.nn.utils.clip_grad_norm_(module.parameters(), clip)
        torch.testing.assert_close(norms[i], norm, **FLOAT32)
        for name, param in module.named_parameters():
            torch.testing.assert_close(stack.grads()[name][i], param.grad, **FLOAT32, msg=name)


@pytest.mark.parametrize("kind", ["tg", "dtg"])
def test_the_flat_optimizer_steps_each_seed_as_its_solo_optimizer(kind):
    group = modules(kind)
    stack = SeedStack(group)
    if "fused" in stack.optimizer.defaults:  # torch's CPU has fused Adam: the stack uses it
        assert all(g["fused"] for g in stack.optimizer.param_groups)
    batches = [random_chunks(batch=2, seed=s) for s in range(SEEDS)]
    clip = 0.05
    loss, _, _ = stack.losses(stack.batch(batches))
    loss.sum().backward()
    stack.clip_per_seed(clip)
    stack.optimizer.step()
    for i, (module, chunks) in enumerate(zip(group, batches, strict=True)):
        solo = solo_step(module, chunks, clip)
        theirs, ours = solo.state_dict(), stack.optimizer_state(i)
        assert ours["param_groups"] == theirs["param_groups"]  # the solo format, flat settings left out
        assert ours["state"].keys() == theirs["state"].keys()
        for k, state in theirs["state"].items():
            for key, value in state.items():
                assert ours["state"][k][key].shape == value.shape and ours["state"][k][key].dtype == value.dtype
                torch.testing.assert_close(ours["state"][k][key], value, **FLOAT32)
        for name, value in module.state_dict().items():
            torch.testing.assert_close(stack.state_dict(i)[name], value, **FLOAT32, msg=name)


def test_optimizer_and_parameters_go_back_in_per_seed():
    group = modules("dtg")
    stack = SeedStack(group)
    batches = [random_chunks(batch=2, seed=s) for s in range(SEEDS)]
    loss, _, _ = stack.losses(stack.batch(batches))
    loss.sum().backward()
    stack.optimizer.step()
    saved = [(stack.state_dict(i), stack.optimizer_state(i)) for i in range(SEEDS)]
    other = SeedStack(modules("dtg"))
    for i, (params, _) in enumerate(saved):
        other.load_state_dict(i, params)
    other.load_optimizer_states([opt for _, opt in saved])
    assert all(g.get("fused") == h.get("fused") for g, h in zip(other.optimizer.param_groups,
                                                                 stack.optimizer.param_groups, strict=True))
    for ours, theirs in zip(other._flats, stack._flats, strict=True):  # parameters are views of the buffers
        assert torch.equal(ours, theirs)
    for i in range(SEEDS):
        again = other.optimizer_state(i)
        for k, state in saved[i][1]["state"].items():
            for key, value in state.items():
                assert torch.equal(again["state"][k][key], value)


def test_a_step_in_slices_of_seeds_is_the_step_of_all_at_once():
    """``SeedStack.backward`` runs ``slice_size`` seeds at a time (a CPU: ``CPU_SLICE``), each slice packed among
    its own seeds: the losses and every seed's gradients are those of all seeds in one pass; a seed of weight 0
    (one that failed) gets no gradient."""
    batches = [random_chunks(batch=2 + s, seed=s) for s in range(SEEDS)]
    weights = torch.tensor([1.0, 0.0, 0.5])
    results = []
    for size in (SEEDS, 2, 1):
        stack = SeedStack(modules("tg"))  # dropout off in TINY: the same function whatever the slices
        stack.slice_size = size
        loss = stack.backward(stack.step_batches(batches), weights)
        results.append((loss, {name: grad.clone() for name, grad in stack.grads().items()}))
    (whole, whole_grads), *sliced = results
    assert SeedStack(modules("tg")).slice_size == min(CPU_SLICE, SEEDS)
    for loss, grads in sliced:
        torch.testing.assert_close(loss, whole, **FLOAT32)
        for name, grad in whole_grads.items():
            torch.testing.assert_close(grads[name], grad, **FLOAT32, msg=name)
            assert not grad[1].any(), name  # the failed seed's


def test_a_compiled_stack_keeps_its_rate_tensors_and_writes_the_solo_format():
    """A compiled group's learning rates are device tensors the scheduler fills in place (a new rate is no new
    graph); a seed's optimizer state and scheduler state still hold floats, as a solo run writes, and loading
    a state fills the same tensors."""
    from lightning_modules.models.seed_stack import plain_state

    stack = SeedStack(modules("dtg")).compile("default", backend="aot_eager")  # compiled lazily: never run here
    rates = [group["lr"] for group in stack.optimizer.param_groups]
    assert all(isinstance(rate, torch.Tensor) and rate.dim() == 0 for rate in rates)
    scheduler = stack.configured["lr_scheduler"]["scheduler"]
    scheduler.step()
    assert [group["lr"] for group in stack.optimizer.param_groups] == rates  # the same tensors, filled
    saved = stack.optimizer_state(0)
    assert all(type(group["lr"]) is float for group in saved["param_groups"])
    def scalars(state):
        return [x for v in state.values() for x in (v if isinstance(v, list) else [v])
                if isinstance(x, torch.Tensor) and x.dim() == 0]

    assert scalars(scheduler.state_dict()) and not scalars(plain_state(scheduler.state_dict()))
    for group in saved["param_groups"]:
        group["lr"] = 0.125
    stack.load_optimizer_states([saved] * SEEDS)
    for rate, group in zip(rates, stack.optimizer.param_groups, strict=True):
        assert group["lr"] is rate and float(rate) == 0.125
