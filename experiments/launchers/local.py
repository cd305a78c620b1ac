"""Local executor: run a manifest's tasks on this machine, one after another or a few at a time.

Each task runs as a child process (the same argv a SLURM task would ``exec``; a ``synbench`` command is forked
warm, see ``warm_start``) with its output appended to ``EXP/logs/local-RUN_ID.out`` and ``OMP_NUM_THREADS`` set
so parallel tasks do not oversubscribe the cores.
Runs are marked ``QUEUED`` under job id ``local-<pid>-<index>``: while this process lives they are PENDING or
RUNNING, and if it dies they show FAILED (see ``runs.run_status``). A task that exits non-zero without
writing ``FAILED`` itself gets a ``FAILED`` marker naming its exit status and log.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from experiments.launchers import warm_start
from experiments.launchers.manifest import Task
from experiments.runs import DONE, FAILED, JobStatus, prepare_submission, write_failed, write_queued

EXECUTOR = "local"


def default_threads(max_parallel: int) -> int:
    """Cores per task when ``max_parallel`` tasks share this machine."""
    return max(1, (os.cpu_count() or 1) // max_parallel)


def run_local(
    tasks: list[Task],
    log_dir: Path,
    max_parallel: int = 1,
    threads: int | None = None,
    workdir: Path | None = None,
) -> dict[str, int]:
    """Run the tasks (at most ``max_parallel`` at once) and wait; returns {run_id: exit status}.

    Ctrl-C stops the running tasks (they resume from their last checkpoint when submitted again)."""
    log_dir = Path(log_dir)
    log_dir.mkdir(parents=True, exist_ok=True)
    threads = threads or default_threads(max_parallel)
    env = {**os.environ, "OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads)}
    submitted_at = time.time()
    for task in tasks:
        for folder in task.run_dirs():  # every run of a seed group is queued under its task
            prepare_submission(folder)
            write_queued(folder, EXECUTOR, f"local-{os.getpid()}-{task.index}", submitted_at)

    children: set[warm_start.Child] = set()
    lock = threading.Lock()
    stopping = threading.Event()

    def run(task: Task) -> int:
        if stopping.is_set():
            return -1
        log = log_dir / f"local-{task.run_id}.out"
        with open(log, "ab") as out:
            out.write(f"synbench: local task {task.index} ({task.run_id}) at {time.ctime()}\n".encode())
        child = warm_start.start(task.argv, str(log), env, str(workdir) if workdir else None, threads)
        with lock:
            children.add(child)
        code = child.wait()
        with lock:
            children.discard(child)
        for folder in task.run_dirs():
            if code != 0 and not (folder / DONE).exists() and not (folder / FAILED).exists():
                write_failed(folder, f"exit status {code} (log: {log})")
        return code

    with ThreadPoolExecutor(max_workers=max_parallel) as pool:
        futures = {task.run_id: pool.submit(run, task) for task in tasks}
        try:
            return {run_id: future.result() for run_id, future in futures.items()}
        except KeyboardInterrupt:
            stopping.set()
            with lock:
                for child in children:
                    child.terminate()
            raise


def job_status(job_ids: Iterable[str]) -> dict[str, JobStatus]:
    """``active`` while the submitting process (the pid in ``local-<pid>-<index>``) lives, else ``ended``."""
    out: dict[str, JobStatus] = {}
    for job_id in job_ids:
        parts = job_id.split("-")
        if len(parts) != 3 or not parts[1].isdigit():
            continue
        try:
            os.kill(int(parts[1]), 0)
            out[job_id] = "active"
        except ProcessLookupError:
            out[job_id] = "ended"
        except PermissionError:  # alive, owned by someone else
            out[job_id] = "active"
    return out
