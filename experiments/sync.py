"""Uploading an experiment's offline W&B runs: one ``wandb sync --id RUN_ID SEGMENT...`` per run.

Training logs to W&B offline (no account, no network on compute nodes) under ``RUN_DIR/wandb/``. A run that
was preempted and resumed has one ``offline-run-<time>-RUN_ID`` folder per attempt (offline runs cannot be
resumed in place), all with W&B id = run id; handing all of a run's unsynced segments to one
``wandb sync --id`` call uploads them in order of start time into that single W&B run. ``wandb sync`` marks
each uploaded segment with ``run-RUN_ID.wandb.synced``, so syncing again uploads only new segments. Runs still
RUNNING are left for later (a live offline run cannot be synced).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from experiments.experiment_runs import analysis_run_id, folder_of, run_statuses
from experiments.experiment_spec import Run
from lightning_modules.errors import InputError


@dataclass(frozen=True)
class SyncJob:
    """One run's unsynced offline segments (oldest first) and the command that uploads them."""

    run_id: str
    segments: tuple[Path, ...]
    argv: tuple[str, ...]


def unsynced_segments(run_dir: Path, run_id: str) -> list[Path]:
    """``RUN_DIR/wandb/offline-run-*-RUN_ID`` folders not yet uploaded, oldest first (names start with the
    start time, ``YYYYMMDD_HHMMSS``)."""
    segments = []
    for folder in sorted(Path(run_dir).glob(f"wandb/offline-run-*-{run_id}")):
        data = folder / f"run-{run_id}.wandb"
        if data.is_file() and not Path(f"{data}.synced").exists():
            segments.append(folder)
    return segments


def wandb_executable() -> str:
    """``wandb`` on PATH, else the one installed beside this Python."""
    found = shutil.which("wandb") or shutil.which("wandb", path=str(Path(sys.executable).parent))
    if found is None:
        raise InputError("the wandb command is not installed (pip install wandb)")
    return found


def plan_sync(
    runs: list[Run], root: Path, project: str | None = None, entity: str | None = None
) -> tuple[list[SyncJob], dict[str, str]]:
    """(sync jobs, {run id: why it is left out}) for the runs' offline segments."""
    exe = wandb_executable()
    jobs: list[SyncJob] = []
    skipped: dict[str, str] = {}
    for run, status in zip(runs, run_statuses(runs, root, ask_scheduler=False)):
        segments = unsynced_segments(folder_of(root, run), run.run_id)
        if not segments:
            continue
        if status.state == "RUNNING":
            skipped[run.run_id] = "still running"
            continue
        argv = [exe, "sync", "--id", run.run_id]
        argv += ["--project", project] if project else []
        argv += ["--entity", entity] if entity else []
        jobs.append(SyncJob(run.run_id, tuple(segments), (*argv, *map(str, segments))))
    if runs:  # the experiment's analysis run (synbench analyze), logged offline beside its tables
        spec_name = runs[0].experiment
        analysis_id = analysis_run_id(spec_name)
        exp = Path(root) / spec_name / "analysis"
        segments = unsynced_segments(exp, analysis_id)
        if segments:
            argv = [exe, "sync", "--id", analysis_id]
            argv += ["--project", project] if project else []
            argv += ["--entity", entity] if entity else []
            jobs.append(SyncJob(analysis_id, tuple(segments), (*argv, *map(str, segments))))
    return jobs, skipped


def run_sync(jobs: list[SyncJob]) -> dict[str, int]:
    """Run each job's ``wandb sync`` (output passes through); returns {run id: exit status}."""
    env = {**os.environ, "WANDB_MODE": "online"}  # the offline default of training must not reach sync
    return {job.run_id: subprocess.run(list(job.argv), env=env).returncode for job in jobs}
