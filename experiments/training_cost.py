"""What a run cost to train, for every family alike: parameters and device (in `DONE`), wall-clock and speed
of the attempt that finished it (in `TIMING`, `runs.write_done`: they differ between attempts of one run).

``synbench reproduce compare`` sets the families side by side at equal data; what each model costs belongs
beside its scores. Measured here, by the harness, from what every family shares (the Lightning module, the
trainer, the data's ``stats``), never per family:

- ``parameters``: trainable parameters, a tensor shared between modules counted once;
- ``train_seconds`` and ``train_steps_timed``: wall-clock and optimizer steps of the attempt that finished
  the run (an attempt that resumes from a checkpoint times only its own steps), and ``train_steps_per_s``;
- ``train_tokens_per_s``: ``train_steps_per_s`` x the sequences a step consumes x the mean sequence length
  of the training data (``stats["train_tokens"] / stats["train_sequences"]``, in the family's own tokens:
  actions for TG, words for TXL (terminals)); absent when the family's data reports no sequence count (it
  streams its own batches);
- ``device``: the accelerator's name (``cpu (N threads)`` on a CPU).
"""

from __future__ import annotations

import time
from typing import Any

import pytorch_lightning as pl
import torch


class TrainingCost(pl.Callback):
    """Times the optimizer steps of one ``fit``; ``metrics`` gives the fields above."""

    def __init__(self) -> None:
        self._start: tuple[float, int] | None = None
        self._end: tuple[float, int] | None = None

    def on_train_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self._start = (time.perf_counter(), trainer.global_step)

    def on_train_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self._end = (time.perf_counter(), trainer.global_step)

    def metrics(self, trainer: pl.Trainer, module: torch.nn.Module, stats: dict[str, Any],
                batch_size: int) -> dict[str, Any]:
        """The cost fields of this run (timing only when ``fit`` trained at least one step)."""
        timed = None
        if self._start is not None and self._end is not None:
            timed = (self._end[0] - self._start[0], self._end[1] - self._start[1])
        per_step = batch_size * trainer.accumulate_grad_batches * trainer.world_size
        return cost_fields(module, trainer.strategy.root_device, timed, stats, per_step)


def cost_fields(module: torch.nn.Module, device: torch.device, timed: tuple[float, int] | None,
                stats: dict[str, Any], sequences_per_step: int) -> dict[str, Any]:
    """The cost fields (module docstring) of a run trained on ``device``; ``timed`` = (seconds, optimizer steps)
    of the attempt that finished it (None, or no step: no timing fields). A seed group, which trains without a
    trainer, gives each seed the group attempt's timing."""
    out: dict[str, Any] = {"parameters": parameter_count(module), "device": device_label(device)}
    if timed is None or timed[1] <= 0:
        return out
    seconds, steps = timed
    out.update(train_seconds=seconds, train_steps_timed=steps, train_steps_per_s=steps / seconds)
    sequences, tokens = stats.get("train_sequences"), stats.get("train_tokens")
    if sequences and tokens:
        out["train_tokens_per_s"] = steps * sequences_per_step * (tokens / sequences) / seconds
    return out


def parameter_count(module: torch.nn.Module) -> int:
    """Trainable parameters; ``parameters()`` yields a shared (tied) tensor once."""
    return sum(p.numel() for p in module.parameters() if p.requires_grad)


def device_label(device: torch.device) -> str:
    """``NVIDIA H100 80GB HBM3`` for a GPU, ``cpu (N threads)`` otherwise."""
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    return f"{device.type} ({torch.get_num_threads()} threads)"
