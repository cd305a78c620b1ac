"""Running a stage of commands (proposals, evaluations, the analysis) with an executor, and waiting for it.

A stage is a list of ``StageTask``s, each a command with a file that exists once it succeeded. Tasks whose
file exists and was made by the same command are skipped, so an interrupted stage resumes where it stopped;
an output of another command (the spec changed: another proposal parser, beam or N) is removed and made again
(the evaluations' item caches keep what did not change). The executors are those of
training runs: ``local`` (``launcher.local.max_parallel`` at a time on this machine), ``slurm`` (one
``sbatch --array`` job) and ``submitit``; the call returns when every task has ended, with the tasks that
did not produce their file. ``Progress`` prints one line whenever a count changes (quiet, log-friendly).
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from experiments.evaluation_plan import StageTask
from experiments.experiment_spec import ExperimentSpec
from experiments.launchers.manifest import Task
from lightning_modules.data.atomic import atomic_write_text


class Progress:
    """Prints ``[stage] k/n done (running r, failed f)`` lines to stderr when the numbers change."""

    def __init__(self, stage: str, total: int, stream=None):
        self.stage, self.total, self.stream = stage, total, stream or sys.stderr
        self.last: tuple[int, ...] | None = None
        self.started = time.monotonic()

    def update(self, done: int, running: int = 0, failed: int = 0) -> None:
        state = (done, running, failed)
        if state == self.last:
            return
        self.last = state
        extra = "".join([f", {running} running" if running else "", f", {failed} failed" if failed else ""])
        elapsed = time.monotonic() - self.started
        print(f"[{self.stage}] {done}/{self.total} done{extra} ({elapsed:.0f} s)", file=self.stream, flush=True)


def watch(check: Callable[[], tuple[int, int, int]], progress: Progress, stop: threading.Event,
          poll_s: float) -> threading.Thread:
    """A daemon thread that reports ``check()`` to ``progress`` every ``poll_s`` seconds until ``stop``."""

    def loop() -> None:
        while not stop.wait(poll_s):
            progress.update(*check())

    thread = threading.Thread(target=loop, daemon=True)
    thread.start()
    return thread


def run_stage(name: str, tasks: Sequence[StageTask], executor: str, spec: ExperimentSpec, exp_dir: Path,
              poll_s: float = 5.0) -> list[StageTask]:
    """Run the tasks not done by their current command; returns those still not done afterwards (failed)."""
    todo = [t for t in tasks if not t.is_done()]
    progress = Progress(name, len(tasks))
    progress.update(len(tasks) - len(todo))
    if not todo:
        return []
    for t in todo:  # a stale output goes before its command runs again; the record says which command runs
        t.done.unlink(missing_ok=True)
        t.done.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(t.command_file, t.command)
    manifest = [Task(i, t.key, 0, str(t.folder), t.argv) for i, t in enumerate(todo)]

    def check() -> tuple[int, int, int]:
        done = sum(t.is_done() for t in tasks)
        failed = sum((Path(t.folder) / "FAILED").exists() and not t.done.exists() for t in todo)
        return done, 0, failed

    stop = threading.Event()
    watcher = watch(check, progress, stop, poll_s)
    try:
        from experiments.submit import launch

        launched = launch(manifest, executor, spec, Path(exp_dir), f"{spec.name}-{name}")
        if "job_id" in launched:  # a scheduler's array: wait until every task has ended
            from experiments.launchers.slurm import ENDED_STATES, job_states

            ids = [f"{launched['job_id']}_{t.index}" for t in manifest]
            while True:
                states = job_states(ids)
                if len(states) == len(ids) and all(s in ENDED_STATES for s in states.values()):
                    break
                time.sleep(poll_s)
    finally:
        stop.set()
        watcher.join()
    progress.update(*check())
    failed = [t for t in todo if not t.is_done()]
    for t in failed:
        print(f"[{name}] failed: {t.label} (log: {Path(exp_dir) / 'logs'})", file=progress.stream, flush=True)
    return failed

