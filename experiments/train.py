"""Train one run: (resolved config, seed) -> run folder with checkpoints, logs and final metrics.

The run folder is the source of truth: ``config.json``, ``checkpoints/{best,last}.ckpt`` (and with
``train.keep_every N`` a ``checkpoints/step-NNNNNN.ckpt`` every N steps), ``csv/version_K/metrics.csv``
(one version per resumed segment),
(with ``train.max_steps`` 0, where the family allows it, the untrained model is ``best.ckpt``),
``wandb/`` (offline by default), ``HEARTBEAT`` while training, and ``DONE`` (final metrics) written last and
atomically. Calling ``train`` again on the same folder resumes from ``last.ckpt`` and ends where an
uninterrupted run would (same batches, same dropout masks, same optimizer and scheduler state); a folder with
``DONE`` is never trained twice. On ``SIGUSR1`` (SLURM's time-limit warning) or ``SIGTERM`` (preemption)
training finishes its step, saves ``last.ckpt`` and stops; on ``SIGUSR1`` it also requeues its SLURM task
(``training_callbacks.LastCheckpoint``, the only requeue owner).
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from experiments.runs import DONE, FAILED, read_done, write_done, write_failed
from lightning_modules.data.atomic import atomic_write_text, remove_temporaries
from lightning_modules.errors import InputError


def train(cfg: dict[str, Any], seed: int, run_dir: Path, callbacks: Sequence[Any] = ()) -> dict[str, Any]:
    """Train (or resume) the run in ``run_dir``; returns the final metrics (also written to ``DONE``).

    Any error is also recorded in ``FAILED`` (one line) so ``synbench status`` can say why a run stopped;
    a preempted run (``Preempted``, a ``SystemExit``) is not a failure. ``callbacks`` are extra Lightning
    callbacks (e.g. Optuna's pruning).
    """
    try:
        return _train(cfg, seed, Path(run_dir), list(callbacks))
    except BaseException as e:
        if Path(run_dir).is_dir() and not isinstance(e, KeyboardInterrupt | SystemExit):
            write_failed(Path(run_dir), str(e) or type(e).__name__)
        raise


def _train(cfg: dict[str, Any], seed: int, run_dir: Path, callbacks: list[Any]) -> dict[str, Any]:
    import pytorch_lightning as pl
    import torch
    from pytorch_lightning.callbacks import ModelCheckpoint
    from pytorch_lightning.loggers import CSVLogger

    from experiments.batching import StepBatches
    from experiments.checkpoints import AtomicCheckpointIO, Metadata, read_checkpoint
    from experiments.families import get_family
    from experiments.training_callbacks import Heartbeat, KeptCheckpoints, LastCheckpoint, NaNGuard, StepSeeding
    from experiments.training_cost import TrainingCost
    from lightning_modules.models.compiled import compile_mode, compile_module

    finished = start_run(cfg, seed, run_dir)
    if finished is not None:
        return finished

    rt, tc = cfg["runtime"], cfg["train"]
    hardware = trainer_hardware(rt)
    compiling = compile_mode(rt)
    set_threads(rt)
    pl.seed_everything(seed, workers=True, verbose=False)
    torch.use_deterministic_algorithms(bool(tc.get("deterministic", True)), warn_only=True)

    family = get_family(cfg["family"])
    data = family.build_data(cfg)
    pl.seed_everything(seed, workers=True, verbose=False)  # initialisation independent of data-building RNG use
    module = compile_module(family.build_module(cfg, data), compiling)

    ckpt_dir = run_dir / "checkpoints"
    best = ModelCheckpoint(dirpath=ckpt_dir, filename="best", monitor="val/loss", mode="min", save_top_k=1,
                           save_last=False, enable_version_counter=False)
    last = LastCheckpoint(ckpt_dir / "last.ckpt", int(tc["ckpt_every"]))  # also owns preemption (SIGUSR1/TERM)
    # checkpoints kept over training: before ``best`` and ``last`` (see ``KeptCheckpoints``)
    kept = [KeptCheckpoints(ckpt_dir, int(tc["keep_every"]))] if tc.get("keep_every") else []
    cost = TrainingCost()
    loggers: list[Any] = [CSVLogger(save_dir=str(run_dir), name="csv")]
    if rt.get("wandb", "offline") != "disabled":
        loggers.append(wandb_logger(cfg, seed, run_dir))
    max_steps, schedule = trainer_schedule(tc, data.epochs)
    trainer = pl.Trainer(
        max_steps=max_steps,
        **schedule,
        limit_val_batches=tc.get("limit_val_batches") or 1.0,
        num_sanity_val_steps=0,
        accumulate_grad_batches=int(tc.get("accumulate", 1)),
        deterministic=bool(tc.get("deterministic", True)),
        **hardware,
        logger=loggers,
        log_every_n_steps=int(tc.get("log_every", 10)),
        enable_progress_bar=_progress(rt),
        enable_model_summary=False,
        default_root_dir=str(run_dir),
        # LastCheckpoint owns SIGUSR1/SIGTERM: Lightning's auto-requeue (mid-step hpc checkpoints) stays off.
        plugins=[AtomicCheckpointIO(),
                 *_cluster_environment(hardware["devices"])],
        callbacks=[
            StepSeeding(seed), NaNGuard(), Heartbeat(run_dir),
            Metadata(cfg["family"], cfg, seed, data.vocab), cost, *callbacks, *kept, best, last,
        ],
    )
    def consumed() -> int:
        return trainer.global_step * trainer.accumulate_grad_batches

    train_batches = data.train_batches(int(tc["batch_size"]), seed, consumed)
    if train_batches is None:  # data parallel: each process takes its slice of the same global batch
        train_batches = StepBatches(data.train, int(tc["batch_size"]), seed, data.collate, consumed=consumed,
                                    rank=trainer.global_rank, world=trainer.world_size)
    elif trainer.world_size > 1:
        raise InputError(f"{cfg['family']} streams its own training batches, which are not split across "
                         "processes: train it on one device", "runtime.devices")
    val_batches = data.valid_batches(int(tc.get("eval_batch_size", tc["batch_size"])))
    resume = ckpt_dir / "last.ckpt"
    for folder in (run_dir, ckpt_dir):  # what an attempt killed mid-write left beside DONE or a checkpoint
        remove_temporaries(folder)
    if resume.exists():  # a damaged or foreign checkpoint is one error line, not a traceback inside Lightning
        read_checkpoint(resume, cfg["family"])
    trainer.fit(module, train_dataloaders=train_batches, val_dataloaders=val_batches,
                ckpt_path=str(resume) if resume.exists() else None, weights_only=True)
    if trainer.interrupted:
        raise InputError("training was interrupted; run the same command again to resume", str(run_dir))
    if not trainer.is_global_zero:  # data parallel: the first process writes the run's results
        return {"global_step": trainer.global_step, "family": cfg["family"], "seed": seed}

    best_path = best.best_model_path
    if max_steps == 0 and not best_path:  # an untrained model (a random-initialisation baseline)
        best_path = str(ckpt_dir / "best.ckpt")
        trainer.save_checkpoint(best_path)
    metrics = {
        "best_val_loss": float(best.best_model_score) if best.best_model_score is not None else None,
        "global_step": trainer.global_step,
        "family": cfg["family"],
        "seed": seed,
        **cost.metrics(trainer, module, data.stats, int(tc["batch_size"])),
    }
    metrics.update(family.final_metrics(module, data, best_path))
    return write_done(run_dir, metrics)


def start_run(cfg: dict[str, Any], seed: int, run_dir: Path) -> dict[str, Any] | None:
    """The final metrics of a finished run; else prepare ``run_dir`` for an attempt (folder, no ``FAILED``,
    ``config.json``) and return None. A damaged ``DONE`` is a warning and the run is finished again."""
    try:
        finished = read_done(run_dir)
    except InputError as damaged:  # e.g. a copy cut short: resume from the last checkpoint and write it again
        print(f"synbench: warning: {damaged}; finishing the run again", file=sys.stderr)
        (run_dir / DONE).unlink()
        finished = None
    if finished is not None:
        return finished
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / FAILED).unlink(missing_ok=True)  # a new attempt: an earlier failure no longer applies
    atomic_write_text(run_dir / "config.json", json.dumps({"seed": seed, **cfg}, indent=2, sort_keys=True))
    return None


def trainer_schedule(tc: dict[str, Any], epochs: int) -> tuple[int, dict[str, Any]]:
    """``pl.Trainer``'s step limit (-1: none) and validation schedule. In steps: ``train.max_steps`` steps,
    validation every ``train.val_every``. In epochs (``epochs`` > 0, the family's data says so): at most that
    many passes, validation at the end of each, and ``train.max_steps`` only a cap (null: none)."""
    max_steps = tc.get("max_steps")
    if epochs:
        return (-1 if max_steps is None else int(max_steps),
                {"max_epochs": epochs, "val_check_interval": 1.0, "check_val_every_n_epoch": 1})
    for key in ("max_steps", "val_every"):
        if tc.get(key) is None:
            raise InputError("needed by a schedule counted in steps (this run's model is not counted in epochs)",
                             f"train.{key}")
    return int(max_steps), {"val_check_interval": int(tc["val_every"]), "check_val_every_n_epoch": None}


def set_threads(rt: dict[str, Any]) -> None:
    """torch's threads: ``runtime.threads``, else ``$SLURM_CPUS_PER_TASK``, else torch's choice."""
    import torch

    if rt.get("threads"):
        torch.set_num_threads(int(rt["threads"]))
    elif os.environ.get("SLURM_CPUS_PER_TASK"):
        torch.set_num_threads(int(os.environ["SLURM_CPUS_PER_TASK"]))


PRECISIONS = ("32-true", "bf16-mixed", "16-mixed")


def trainer_hardware(rt: dict[str, Any]) -> dict[str, Any]:
    """The ``pl.Trainer`` arguments of ``runtime``: ``accelerator`` (auto | cpu | cuda | gpu), ``devices``
    (processes, one per device: ``devices > 1`` trains data-parallel, each process on ``train.batch_size``
    examples of every step's global batch), ``strategy`` (auto | ddp | ...; Lightning's; DDP on CPU uses gloo)
    and ``precision`` (``PRECISIONS``; ``bf16-mixed`` is bf16 autocast with fp32 weights). A CUDA accelerator
    where CUDA is absent is one error line, not a traceback inside Lightning."""
    import torch

    accelerator = str(rt.get("accelerator", "auto"))
    if accelerator in ("cuda", "gpu") and not torch.cuda.is_available():
        raise InputError(f"accelerator {accelerator!r} asked for, but CUDA is not available on this machine",
                         "runtime.accelerator")
    precision = str(rt.get("precision", "32-true"))
    if precision not in PRECISIONS:
        raise InputError(f"unknown precision {precision!r} (known: {', '.join(PRECISIONS)})", "runtime.precision")
    devices = rt.get("devices", 1)
    if isinstance(devices, bool) or not isinstance(devices, int) or devices < 1:
        raise InputError(f"expected a positive number of devices, got {devices!r}", "runtime.devices")
    return {"accelerator": accelerator, "devices": devices, "strategy": str(rt.get("strategy", "auto")),
            "precision": precision}


def _cluster_environment(devices: int) -> list[Any]:
    """Lightning's view of the cluster. In a SLURM task with one device: SLURM's (auto-requeue off). With
    several, this one process starts the others (one SLURM task per run, as the array scripts ask), so
    Lightning's own environment, not SLURM's, which would expect one SLURM task per device."""
    from lightning_fabric.plugins.environments import LightningEnvironment, SLURMEnvironment

    if devices > 1:
        return [LightningEnvironment()]
    return [SLURMEnvironment(auto_requeue=False)] if SLURMEnvironment.detect() else []


def _progress(rt: dict[str, Any]) -> bool:
    mode = rt.get("progress")
    if mode is None:  # quiet in SLURM logs and pipes, bars on a terminal
        import sys

        return sys.stderr.isatty() and "SLURM_JOB_ID" not in os.environ
    return bool(mode)


def wandb_logger(cfg: dict[str, Any], seed: int, run_dir: Path, **options: Any) -> Any:
    """The run's W&B logger (offline by default); ``options`` go to ``wandb.init`` (a seed group opens one run
    per seed in one process: ``reinit="create_new"``)."""
    from pytorch_lightning.loggers import WandbLogger

    from experiments.config import run_id

    rt = cfg["runtime"]
    os.environ.setdefault("WANDB_X_DISABLE_STATS", "true")
    # A run process owns its W&B service. A service token inherited from the process that submitted the run
    # (one that had a W&B run open, e.g. `synbench analyze` in-process or a notebook) would attach this run to
    # that process's service, which still holds the first attempt of a requeued run and refuses its id.
    os.environ.pop("WANDB_SERVICE", None)
    return WandbLogger(
        project=rt.get("wandb_project", "synbench"),
        group=rt.get("experiment") or cfg["family"],
        job_type="train",
        id=run_id(cfg, seed),
        name=run_id(cfg, seed),
        tags=[cfg["family"], f"seed={seed}"],
        save_dir=str(run_dir),
        offline=rt.get("wandb", "offline") == "offline",
        resume="allow",
        config={"seed": seed, **cfg},
        **options,
    )
