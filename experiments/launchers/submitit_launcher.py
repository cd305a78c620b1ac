"""submitit executor: the same manifest tasks as one SLURM array through ``submitit``'s ``map_array``.

For users who want futures (``job.result()``) instead of a plain sbatch script. submitit owns requeueing here:
on its timeout/preemption signal (``USR2``) it checkpoints the callable, which is just the command (training
resumes from the run folder), and requeues the task; Lightning's own ``SIGUSR1`` handler never fires, so there
is exactly one requeue owner. Each task's command runs as a child process of submitit's worker.
"""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path
from typing import Any

from experiments.launchers.manifest import Task
from experiments.launchers.slurm import SlurmOptions
from experiments.runs import prepare_submission, write_queued
from lightning_modules.errors import InputError

EXECUTOR = "submitit"


def _import_submitit() -> Any:
    try:
        import submitit
    except ImportError:
        raise InputError(
            "the submitit executor needs the 'submitit' package (pip install synbench[slurm])"
        ) from None
    return submitit


def _minutes(time_limit: str) -> int:
    """SLURM time ``[D-]HH:MM:SS`` / ``MM:SS`` / ``MM`` -> whole minutes (at least 1)."""
    days, _, rest = time_limit.rpartition("-")
    parts = [int(p) for p in rest.split(":")]
    h, m, s = ([0] * (3 - len(parts)) + parts) if len(parts) > 1 else (0, parts[0], 0)
    return max(1, int(days or 0) * 1440 + h * 60 + m + (1 if s else 0))


class RunCommand:
    """The picklable callable submitit runs per task: run one argv; when submitit checkpoints it (timeout,
    preemption) the same call is requeued and training resumes from the run folder."""

    def __call__(self, argv: list[str], workdir: str) -> int:
        threads = os.environ.get("SLURM_CPUS_PER_TASK", "1")
        env = {**os.environ, "OMP_NUM_THREADS": threads, "MKL_NUM_THREADS": threads}
        code = subprocess.run(argv, cwd=workdir, env=env).returncode
        if code != 0:
            raise RuntimeError(f"command exited with status {code}: {' '.join(argv)}")
        return code

    def checkpoint(self, argv: list[str], workdir: str) -> Any:
        import submitit

        return submitit.helpers.DelayedSubmission(self, argv, workdir)


def submit_submitit(
    tasks: list[Task],
    experiment: str,
    exp_dir: Path,
    options: SlurmOptions,
    workdir: Path | None = None,
    cluster: str | None = "slurm",
) -> list[Any]:
    """Submit the tasks with ``executor.map_array``; returns submitit jobs (``job.result()`` waits) and writes
    each run's ``QUEUED`` marker with the job's SLURM id."""
    if options.runs_per_task > 1:
        raise InputError("launcher.slurm.runs_per_gpu: runs are packed into array tasks by --executor slurm "
                         "only", "--executor")
    if options.mps:
        raise InputError("launcher.slurm.mps: the MPS daemon is started by the sbatch script of --executor slurm "
                         "only", "--executor")
    submitit = _import_submitit()
    folder = Path(exp_dir) / "submitit"
    executor = submitit.AutoExecutor(folder=str(folder / "%j"), cluster=cluster)
    mem_gb = _mem_gb(options.mem)
    executor.update_parameters(
        name=options.job_name or f"synbench-{experiment}",
        timeout_min=_minutes(options.time),
        cpus_per_task=options.cpus_per_task,
        slurm_array_parallelism=options.max_parallel,
        slurm_signal_delay_s=90,
        **({"mem_gb": mem_gb} if mem_gb is not None else {}),
        **({"slurm_partition": options.partition} if options.partition else {}),
        **({"slurm_gres": options.gpu_gres} if options.gpu_gres else {}),
        **({"slurm_cpus_per_gpu": options.cpus_per_gpu} if options.cpus_per_gpu else {}),
        **({"slurm_mem_per_gpu": options.mem_per_gpu} if options.mem_per_gpu else {}),
        **({"slurm_account": options.account} if options.account else {}),
        **({"slurm_qos": options.qos} if options.qos else {}),
        **({"slurm_additional_parameters": dict(options.additional)} if options.additional else {}),
    )
    for task in tasks:
        for folder in task.run_dirs():
            prepare_submission(folder)
    work = str((workdir or Path.cwd()).resolve())
    submitted_at = time.time()
    jobs = executor.map_array(RunCommand(), [list(t.argv) for t in tasks], [work] * len(tasks))
    for task, job in zip(tasks, jobs):
        for folder in task.run_dirs():
            write_queued(folder, EXECUTOR, str(job.job_id), submitted_at)
    return jobs


def _mem_gb(mem: str | None) -> float | None:
    """SLURM memory (``2G``, ``500M``, ``2000`` = MB) -> GB for submitit."""
    if mem is None:
        return None
    units = {"K": 1 / 1024**2, "M": 1 / 1024, "G": 1.0, "T": 1024.0}
    text = mem.strip().upper()
    try:
        if text[-1] in units:
            return float(text[:-1]) * units[text[-1]]
        return float(text) / 1024
    except (ValueError, IndexError):
        raise InputError(f"launcher.slurm.mem: cannot read {mem!r} (e.g. 2G, 500M)") from None
