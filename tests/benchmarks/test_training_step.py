"""The model FLOPs behind the MFU of benchmarks/training_step.py: with every pair attended and no padding,
exactly what torch's FLOP counter counts for a training step (forward + backward) of the dense path."""

from __future__ import annotations

import types

import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode

from benchmarks.training_step import step_flops
from lightning_modules.models import txl_lm as tg

B, L, V, D = 3, 8, 50, 16


def chunk(mask: torch.Tensor, reset: bool) -> types.SimpleNamespace:
    g = torch.Generator().manual_seed(0)
    return types.SimpleNamespace(
        inputs=torch.randint(1, V, (B, L), generator=g), labels=torch.randint(1, V, (B, L), generator=g),
        attn_mask=mask, relpos=torch.randint(-3, 5, (B, L, 2 * L), generator=g),
        mem_src=torch.arange(L, 2 * L).expand(B, L), reset=torch.full((B,), reset),
        compose=torch.zeros(B, L, dtype=torch.bool).index_fill(1, torch.tensor([2, 5]), True))


@pytest.mark.parametrize("reset, fns", [(True, False), (False, True)])
def test_flops_equal_the_counted_flops_of_a_dense_step(reset, fns):
    torch.manual_seed(0)
    module = tg.build(dict(vocab_size=V, d_model=D, n_layers=2, n_heads=2, d_ff=32, segment_length=L,
                           memory_length=L, embedding_dropout=0.0, core_dropout=0.0, core_output_dropout=0.0,
                           attention_dropout=0.0, attention="dense", use_different_attn_fns=fns))
    full = chunk(torch.ones(B, L, 2 * L, dtype=torch.bool), reset)
    memory = None if reset else torch.randn(2, B, L, D)
    with FlopCounterMode(display=False) as counter:
        logits, _ = module([full], memory)
        labels = full.labels.flatten()
        torch.nn.functional.cross_entropy(logits[0].flatten(0, 1), labels, reduction="sum").backward()
    assert step_flops(module, [full]) == counter.get_total_flops()
    # a sparse mask counts only the attended pairs: 3 x 4·d per pair, layer and attention function
    sparse = chunk(torch.rand(B, L, 2 * L, generator=torch.Generator().manual_seed(1)) < 0.5, reset)
    keys = L if reset else 2 * L
    dropped = B * L * keys - int(sparse.attn_mask[..., 2 * L - keys:].sum())
    assert step_flops(module, [full]) - step_flops(module, [sparse]) == 3 * dropped * 2 * (1 + fns) * 4 * D
