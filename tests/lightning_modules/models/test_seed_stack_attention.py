"""``SeedStack``'s attention: each layer's attention of a packed part is one SDPA call over all its seeds' rows
(``folded_attention``), with the kernel SDPA picks for such a solo batch, not a math kernel forced on the group."""

from __future__ import annotations

import pytorch_lightning as pl
import torch
from torch.profiler import profile

from experiments.batching import StepBatches
from experiments.config import resolve_train_config
from experiments.families import get_family
from lightning_modules.layers.relative_attention import RelativeMultiHeadAttention
from lightning_modules.models.seed_stack import SeedStack

TINY = ["model.d_model=32", "model.n_layers=2", "model.n_heads=2", "model.d_ff=64"]


def sdpa_calls(run) -> dict[str, int]:
    """Calls of each SDPA kernel operator while ``run()`` runs (forward and backward)."""
    with profile() as prof:
        run()
    return {e.key.removeprefix("aten::"): e.count for e in prof.key_averages()
            if e.key.startswith("aten::_scaled_dot_product")}


def test_a_groups_attention_is_one_sdpa_call_per_layer_and_chunk_on_the_solo_kernel():
    cfg = resolve_train_config("tg", "cpu-small", TINY)
    family = get_family("tg")
    data = family.build_data(cfg)
    modules = []
    for seed in range(3):
        pl.seed_everything(seed, verbose=False)
        modules.append(family.build_module(cfg, data))
    stack = SeedStack(modules)
    batch = stack.batch([next(iter(StepBatches(data.train, 2, seed, data.collate))) for seed in range(3)])
    attentions = sum(isinstance(m, RelativeMultiHeadAttention) for m in stack.template.modules())
    calls = attentions * sum(len(part.chunks) for part in batch)  # independent of the number of seeds

    stack.train(False)
    with torch.no_grad():  # no bias gradient: the CPU flash kernel, which the group's old math context excluded
        evaluation = sdpa_calls(lambda: stack.losses(batch))
    assert evaluation == {"_scaled_dot_product_flash_attention_for_cpu": calls}

    stack.train(True)  # the position bias needs a gradient: SDPA's math kernel on the CPU, as the solo run's
    training = sdpa_calls(lambda: stack.losses(batch)[0].sum().backward())
    assert training == {"_scaled_dot_product_attention_math": calls}
    solo = stack.solo_module(0).train()
    alone = sdpa_calls(lambda: solo.nll(next(iter(StepBatches(data.train, 2, 0, data.collate))))[0].backward())
    assert set(alone) == set(training)
