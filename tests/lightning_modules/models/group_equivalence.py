"""Shared by the seed-group packing tests: fresh seeded modules, one batch packed alone with its first-fit
layout (families with whole-sentence batches), and the check that each seed of a packed ``SeedStack`` trains as
its solo run."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch

from tests.tolerances import FLOAT32


def fresh(family: str, cfg: dict, data: Any, seeds: list[int]) -> list[torch.nn.Module]:
    """One module of ``family`` per seed, each initialised from its seed, in training mode."""
    import pytorch_lightning as pl

    from experiments.families import get_family

    modules = []
    for seed in seeds:
        pl.seed_everything(seed, verbose=False)
        modules.append(get_family(family).build_module(cfg, data).train())
    return modules


def packed_alone(family: str, cfg: dict, data: Any, pack: Callable[..., list[dict[str, torch.Tensor]]],
                 length: Callable[[Any], int]) -> tuple[torch.nn.Module, list[Any], Any, dict[str, torch.Tensor],
                                                        list[list[int]]]:
    """A seed-0 module in eval mode, the first 12 training sentences, their collated batch, that batch packed as
    a group of one seed (the seed axis dropped; checked to hold several sentences to a row) and the packer's
    first-fit layout (each row's sentences, in order) of the sentences' ``length``s."""
    from lightning_modules.models.packing import first_fit, row_length

    [module] = fresh(family, cfg, data, [0])
    sentences = list(data.train[:12])
    batch = data.collate(sentences)
    lengths = [length(sentence) for sentence in sentences]
    [packed] = pack([batch], None)
    packed = {k: v[0] for k, v in packed.items()}
    assert packed["inputs"].shape[0] < len(lengths) and int(packed["segments"].amax()) > 1
    return module.eval(), sentences, batch, packed, first_fit(lengths, row_length(max(lengths), 2 * max(lengths)))


def offsets(layout: list[list[int]], lengths: Sequence[int]) -> dict[int, tuple[int, int]]:
    """Sentence -> (row, offset in the row) of a packed ``layout`` of sentences of ``lengths``."""
    where = {}
    for r, members in enumerate(layout):
        offset = 0
        for k in members:
            where[k] = (r, offset)
            offset += lengths[k]
    return where


def trains_as_solo(family: str, cfg: dict, data: Any, seeds: list[int], batches: Sequence[Sequence[Any]],
                   loss_of: Callable[[torch.nn.Module, Any], torch.Tensor], clip: float,
                   static: bool = False) -> list[Any]:
    """Train ``seeds`` stacked on their own ``batches`` (per seed, per step) and check every seed against its solo
    run (``loss_of``: its training loss of a batch; gradients clipped to ``clip``, optimizer and scheduler its
    own): the gradients of the first and last steps within ``FLOAT32``, the losses within max(1e-5 rel, twice what
    the solo run's 1- vs 2-thread rounding moves them: training amplifies rounding, and on some seeds two solo
    runs differing only in their thread count part by 1e-4 within 36 steps). The group steps as the trainer does
    (``SeedStack.backward``, ``update``), with no host sync inside a step (``no_host_sync``); ``static``: the
    bucketed layouts of a compiled group, run eagerly. Returns the group's batches, for the caller's checks of
    their form."""
    from lightning_modules.models.host_sync import no_host_sync
    from lightning_modules.models.seed_stack import SeedStack

    steps = len(batches[0])

    def solo_losses(threads: int) -> list[list[float]]:
        torch.set_num_threads(threads)
        out = []
        for module, own in zip(fresh(family, cfg, data, seeds), batches, strict=True):
            configured = module.configure_optimizers()
            optimizer, scheduler = configured["optimizer"], configured["lr_scheduler"]["scheduler"]
            losses = []
            for batch in own:
                loss = loss_of(module, batch)
                loss.backward()
                torch.nn.utils.clip_grad_norm_(module.parameters(), clip)
                optimizer.step()
                optimizer.zero_grad(set_to_none=True)
                scheduler.step()
                losses.append(float(loss.detach()))
            out.append(losses)
        torch.set_num_threads(1)
        return out

    alone, rounded = solo_losses(1), solo_losses(2)
    stack = SeedStack(fresh(family, cfg, data, seeds))
    stack.static = static
    optimizer, scheduler = stack.optimizer, stack.configured["lr_scheduler"]["scheduler"]
    weights, host = torch.ones(len(seeds)), torch.device("cpu")
    group_losses, group_batches = [], []
    for step in range(steps):
        group_batches.append(stack.batch([own[step] for own in batches]))
        slices = stack.step_batches([own[step] for own in batches])
        with no_host_sync(host):
            loss = stack.backward(slices, weights)
        if step in (0, steps - 1):
            for i, own in enumerate(batches):
                solo = stack.solo_module(i).train()
                loss_of(solo, own[step]).backward()
                for name, param in solo.named_parameters():
                    torch.testing.assert_close(stack.grads()[name][i], param.grad, **FLOAT32)
        with no_host_sync(host):
            stack.update(clip)
            optimizer.zero_grad(set_to_none=True)
            scheduler.step()
        group_losses.append(loss.tolist())
    for i, losses in enumerate(alone):
        for step, expected in enumerate(losses):
            margin = max(1e-5 * abs(expected), 2 * abs(rounded[i][step] - expected))
            assert abs(group_losses[step][i] - expected) <= margin, (i, step)
    return group_batches
