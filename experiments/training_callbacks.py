"""Lightning callbacks that make training deterministic, resumable and loud about divergence."""

from __future__ import annotations

import math
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytorch_lightning as pl
import torch
from pytorch_lightning.callbacks import Checkpoint

from experiments.runs import kept_checkpoint, write_heartbeat
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
            raise InputError(f"training loss is {float(loss)} (diverged); lower model.peak_lr or check the data",
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


class Preempted(SystemExit):
    """Training stopped on a signal after saving ``last.ckpt``; the next attempt resumes from it.

    A ``SystemExit`` so that nothing records the run as FAILED: exit status 0 when the task was requeued
    (the next attempt is already queued), else ``128 + signal`` like a process killed by that signal."""

    def __init__(self, signum: int, step: int, requeued: str | None):
        self.signum, self.step, self.requeued = signum, step, requeued
        name = signal.Signals(signum).name
        then = f"requeued SLURM job {requeued}" if requeued else "not requeued"
        print(f"synbench: {name} at step {step}: saved last.ckpt, {then}", file=sys.stderr, flush=True)
        super().__init__(0 if requeued else 128 + signum)


class LastCheckpoint(Checkpoint):
    """``last.ckpt``, the point a killed or preempted run resumes from exactly: written every ``every_n_steps``
    steps (0: never) and when a preemption signal arrives, always at a step boundary (``StepSeeding`` and the
    step-indexed batch stream make any step boundary an exact resume point).

    When the step also validates, the checkpoint is written after that validation: Lightning does not repeat
    the validation of a step whose checkpoint it resumes from, so a checkpoint taken before it would lose that
    validation (and its best-checkpoint update). Being a ``Checkpoint``, this callback runs after the ``best``
    ``ModelCheckpoint``, so the saved state includes the step's best-model bookkeeping.

    Preemption, the one owner of requeueing: ``SIGUSR1`` is the warning SLURM sends before the time limit
    (``--signal=B:SIGUSR1@90``): after saving, the task requeues itself with ``scontrol requeue JOB``
    (``JOBID_TASK`` for array tasks). ``SIGTERM`` (preemption, ``scontrol requeue``, ``scancel``; a requeue
    is then already SLURM's doing) only saves. Both then stop with ``Preempted``. Lightning's own
    auto-requeue, which writes mid-step ``hpc_ckpt_*.ckpt`` files that take precedence on restart, is off
    (``SLURMEnvironment(auto_requeue=False)`` in ``train``): there is exactly one checkpoint to resume from.
    The handlers are installed when training starts, after Lightning's; Lightning restores the previous ones
    when ``fit`` ends.
    """

    SIGNALS = (signal.SIGUSR1, signal.SIGTERM)

    def __init__(self, path: Path, every_n_steps: int):
        self.path, self.every_n_steps = Path(path), int(every_n_steps)
        self.received: int | None = None
        self._after_validation = False

    def _handler(self, signum: int, frame: Any) -> None:
        self.received = self.received or signum

    def on_train_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if threading.current_thread() is threading.main_thread():
            for signum in self.SIGNALS:
                signal.signal(signum, self._handler)

    def on_train_batch_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule, *args: Any) -> None:
        periodic = self.every_n_steps > 0 and trainer.global_step % self.every_n_steps == 0
        if self.received is None and not periodic:
            return
        if _validation_due(trainer):
            self._after_validation = True
        else:
            self._save(trainer)

    def on_validation_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if self._after_validation and not trainer.sanity_checking:
            self._after_validation = False
            self._save(trainer)

    def _save(self, trainer: pl.Trainer) -> None:
        trainer.save_checkpoint(str(self.path))
        if self.received is not None:
            requeued = None
            if self.received == signal.SIGUSR1:
                _close_wandb(trainer)
                requeued = requeue_slurm_task()
            raise Preempted(self.received, trainer.global_step, requeued)


class KeptCheckpoints(Checkpoint):
    """``checkpoints/step-NNNNNN.ckpt`` every ``every_n_steps`` steps (``train.keep_every``), kept for evaluation
    over training (``synbench evaluate EXPERIMENT --checkpoints all``), whole (weights and optimizer state, so
    they load as ``best.ckpt`` does) and atomically, like every checkpoint (``AtomicCheckpointIO``).

    Written once per step, at its boundary (after the step's last accumulated batch; never step 0, nor again the
    step a resumed run starts from), and before ``last.ckpt`` of the same step (this callback comes first): a run
    killed between the two resumes from an earlier step and writes it again, so no kept step is ever missing.
    """

    def __init__(self, folder: Path, every_n_steps: int):
        self.folder, self.every_n_steps = Path(folder), int(every_n_steps)
        self._written: int | None = None  # the last step written, or the one training started from

    def on_train_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self._written = trainer.global_step

    def on_train_batch_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule, *args: Any) -> None:
        step = trainer.global_step
        if step != self._written and step % self.every_n_steps == 0:
            trainer.save_checkpoint(str(self.folder / kept_checkpoint(step)))
            self._written = step


def _close_wandb(trainer: pl.Trainer) -> None:
    """Finish the W&B run before the task requeues itself: ``scontrol requeue`` sends SIGTERM to every process
    of the task, W&B's service (wandb-core) too, which exits without writing what it still holds — the
    segment's offline records would be lost. The run is W&B's current one (``wandb.run``), which the
    WandbLogger opened; a run never opened is not opened here."""
    from pytorch_lightning.loggers import WandbLogger

    wandb = sys.modules.get("wandb")
    if any(isinstance(logger, WandbLogger) for logger in trainer.loggers) and wandb and wandb.run is not None:
        wandb.run.finish()


def _validation_due(trainer: pl.Trainer) -> bool:
    """Whether Lightning validates after the current training batch (its own decision, a private API)."""
    loop = trainer.fit_loop
    return bool(loop.epoch_loop._should_check_val_fx(loop._data_fetcher))


def requeue_slurm_task() -> str | None:
    """``scontrol requeue`` this SLURM task (``ARRAYJOB_TASK`` for array tasks); returns the id, or None when
    not under SLURM or when the requeue failed (reported on stderr)."""
    array, task = os.environ.get("SLURM_ARRAY_JOB_ID"), os.environ.get("SLURM_ARRAY_TASK_ID")
    job = f"{array}_{task}" if array and task else os.environ.get("SLURM_JOB_ID")
    if not job:
        return None
    try:
        done = subprocess.run(["scontrol", "requeue", job], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as e:
        print(f"synbench: cannot requeue SLURM job {job}: {e}", file=sys.stderr)
        return None
    if done.returncode != 0:
        print(f"synbench: scontrol requeue {job} failed: {done.stderr.strip()}", file=sys.stderr)
        return None
    return job


class OptunaPruning(pl.Callback):
    """Report ``val/loss`` to an Optuna trial at every validation, keyed by ``global_step`` (LM training is
    step-based: Optuna's own Lightning callback reports per epoch, so step-based validations would collide),
    and stop a trial the pruner gives up on with ``optuna.TrialPruned`` (the run folder records why)."""

    def __init__(self, trial: Any, monitor: str = "val/loss"):
        self.trial, self.monitor = trial, monitor

    def on_validation_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if trainer.sanity_checking or self.monitor not in trainer.callback_metrics:
            return
        import optuna

        value, step = float(trainer.callback_metrics[self.monitor]), trainer.global_step
        self.trial.report(value, step)
        if self.trial.should_prune():
            raise optuna.TrialPruned(
                f"pruned by Optuna (trial {self.trial.number}) at step {step}: {self.monitor} {value:.4f}"
            )
