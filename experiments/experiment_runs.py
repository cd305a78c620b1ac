"""The runs of an experiment as they are on disk: spec expansion, run folders and their states.

``submit``, ``status``, ``sync`` and ``aggregate`` all start here, so they agree on which runs an experiment
has (the spec's models x data x seeds, or ``--seeds`` instead of the spec's seeds) and where each one lives
(``RUNS/EXPERIMENT/RUN_ID``). Nothing here imports torch or Lightning.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from experiments.config import resolve_train_config
from experiments.experiment_spec import ExperimentSpec, Run, expand, parse_seeds
from experiments.runs import JobStatus, RunStatus, queued_job_ids, run_folder, run_status
from lightning_modules.errors import InputError

DEFAULT_PRESET = "cpu-small"  # `synbench train`'s default preset


def resolve(family: str, preset: str | None, overrides: list[str]) -> dict[str, Any]:
    """The resolver of ``experiment_spec.expand``: exactly what ``synbench train`` resolves."""
    return resolve_train_config(family, preset or DEFAULT_PRESET, overrides)


def experiment_runs(spec: ExperimentSpec, seeds: str | None = None) -> list[Run]:
    """All runs of ``spec``; ``seeds`` (``"0-99"``, from ``--seeds``) replaces the spec's seeds."""
    from experiments.families import get_family

    return expand(spec, resolve, parse_seeds(seeds, "--seeds") if seeds is not None else None,
                  lambda family: get_family(family).stacks_seeds)


def experiment_dir(root: Path, spec: ExperimentSpec) -> Path:
    """``RUNS/EXPERIMENT``: the run folders, plus ``logs/``, ``submissions/`` and ``aggregate/``."""
    return Path(root) / spec.name


def folder_of(root: Path, run: Run) -> Path:
    """``RUNS/EXPERIMENT/RUN_ID``."""
    return run_folder(Path(root), run.experiment, run.run_id)


def analysis_run_id(experiment: str) -> str:
    """The W&B run id of an experiment's analysis (``synbench sync`` finds its offline run by it)."""
    return f"analysis-{experiment}"


def scheduler_view(folders: Iterable[Path]) -> tuple[dict[str, JobStatus], list[str]]:
    """What the executors say about the jobs named in the ``QUEUED`` markers: {job id: active|ended}.

    An executor that cannot be asked (no SLURM on this machine) is left out with a warning; ``run_status``
    then judges those runs by their heartbeats alone."""
    from experiments.launchers import local, slurm

    jobs: dict[str, JobStatus] = {}
    warnings: list[str] = []
    for executor, ids in queued_job_ids(folders).items():
        try:
            if executor == local.EXECUTOR:
                jobs.update(local.job_status(ids))
            else:  # slurm and submitit jobs are both SLURM jobs
                jobs.update(slurm.job_status(ids, poll_s=2.0))
        except (InputError, OSError, subprocess.SubprocessError) as e:
            warnings.append(f"cannot ask {executor} about {len(ids)} job(s) ({e}); judging by heartbeats")
    return jobs, warnings


def run_statuses(
    runs: list[Run], root: Path, ask_scheduler: bool = True, quiet: bool = False
) -> list[RunStatus]:
    """The state of every run (in spec order); with ``ask_scheduler`` queued runs are checked against their
    executors, so a requeued task reads PENDING and a job that ended without ``DONE`` reads FAILED."""
    folders = [folder_of(root, run) for run in runs]
    jobs: dict[str, JobStatus] | None = None
    if ask_scheduler:
        jobs, warnings = scheduler_view(folders)
        if not quiet:
            for warning in warnings:
                print(f"synbench: warning: {warning}", file=sys.stderr)
    return [run_status(folder, run.run_id, run.seed, jobs=jobs) for run, folder in zip(runs, folders)]
