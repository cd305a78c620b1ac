"""Lightning callbacks that make training deterministic, resumable and loud about divergence."""

from __future__ import annotations

import math
import time
from pathlib import Path
from typing import Any

import pytorch_lightning as pl
import torch

from experiments.runs import write_heartbeat
from lightning_modules.errors import InputError


def step_seed(seed: int, step: int) -> int:
    """The RNG seed of optimizer step ``step``: dropout noise depends on (seed, step) only."""
    return (seed * 0x9E3779B97F4A7C15 + step * 0xBF58476D1CE4E5B9) % (2**63 - 1)


class StepSeeding(pl.Callback):
    """Reseed torch at every training batch so a resumed run draws the same dropout masks.

    Saving RNG states in checkpoints would also work but breaks as soon as validation or a logger consumes
    random numbers between the save and the next step; a per-step seed cannot drift.
    """

    def __init__(self, seed: int):
        self.seed = seed

    def on_train_batch_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule, batch: Any,
                             batch_idx: int) -> None:
        accumulate = trainer.accumulate_grad_batches
        torch.manual_seed(step_seed(self.seed, trainer.global_step * accumulate + batch_idx % accumulate))


class NaNGuard(pl.Callback):
    """Stop with ``step N: loss is NaN`` instead of silently training on garbage."""

    def on_train_batch_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule, outputs: Any, batch: Any,
                           batch_idx: int) -> None:
        loss = outputs["loss"] if isinstance(outputs, dict) else outputs
        if loss is not None and not math.isfinite(float(loss)):
            raise InputError(f"training loss is {float(loss)} (diverged); lower train.lr or check the data",
                             f"training step {trainer.global_step}")


class Heartbeat(pl.Callback):
    """Rewrite ``HEARTBEAT`` in the run folder so ``synbench status`` can tell running from dead runs."""

    def __init__(self, folder: Path, every_s: float = 10.0):
        self.folder = Path(folder)
        self.every_s = every_s
        self._last = 0.0

    def _beat(self, trainer: pl.Trainer) -> None:
        now = time.time()
        if now - self._last >= self.every_s:
            self._last = now
            write_heartbeat(self.folder, trainer.global_step, now)

    def on_train_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self._last = 0.0
        self._beat(trainer)

    def on_train_batch_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule, *args: Any) -> None:
        self._beat(trainer)

    def on_validation_batch_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule, *args: Any) -> None:
        self._beat(trainer)
