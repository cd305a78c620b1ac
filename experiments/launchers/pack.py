"""Several runs in one array task: ``python -m experiments.launchers.pack MANIFEST TASK K``.

A 12M-parameter PTB model leaves most of an H100 idle; ``launcher.slurm.runs_per_gpu: K`` (``synbench submit
--runs-per-gpu K``) gives each array task K runs per GPU. Task i runs manifest lines ``i·K .. i·K + K - 1``
(fewer in the last task), each as its own process training into its own run folder, so each run resumes,
finishes (``DONE``) and fails on its own exactly as when it has a task to itself. With K = 1 this process
becomes the run's command (``manifest.exec_task``), as before.

The runs share the task's resources: the task's CPUs split evenly (``SLURM_CPUS_PER_TASK``, ``OMP_NUM_THREADS``
of each run), and run j sees GPU ``j mod G`` of the task's G visible GPUs (``CUDA_VISIBLE_DEVICES``). Under an
MPS daemon (``CUDA_MPS_PIPE_DIRECTORY`` set: ``launcher.slurm.mps``, ``slurm/with-mps.sh``) a client's
``CUDA_VISIBLE_DEVICES`` counts the devices the daemon sees, so run j gets the index ``j mod G`` instead of the
device's name.

Preemption and time limits, requeue-safe: on ``SIGTERM`` (preemption, ``scancel``, ``scontrol requeue``) every
run gets ``SIGTERM``, saves ``last.ckpt`` and stops. On ``SIGUSR1`` (the time-limit warning) the runs get
``SIGTERM`` too, not ``SIGUSR1``: each run would requeue the task itself, and the first requeue would kill the
others mid-save; instead, once all have stopped, this process requeues the task once
(``training_callbacks.requeue_slurm_task``) if a run is not finished. The requeued task starts all K again:
finished runs return at once, the others resume from their checkpoints.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from experiments.launchers.manifest import Task, exec_task, read_task
from experiments.runs import DONE
from lightning_modules.errors import InputError


def packed_tasks(manifest: Path, task: int, per_task: int) -> list[Task]:
    """The manifest lines array task ``task`` runs: ``task·per_task`` .. up to ``per_task`` lines."""
    tasks = []
    for index in range(task * per_task, (task + 1) * per_task):
        try:
            tasks.append(read_task(manifest, index))
        except InputError:
            if not tasks:  # the first line of the task must exist; later ones end the last, shorter task
                raise
            break
    return tasks


def child_environment(slot: int, n_runs: int, environ: dict[str, str] | None = None) -> dict[str, str]:
    """The environment of run ``slot`` of ``n_runs``: its share of the task's CPUs and one of its GPUs (by its
    index among the visible ones under MPS, whose clients count the daemon's devices)."""
    env = dict(os.environ if environ is None else environ)
    cpus = int(env.get("SLURM_CPUS_PER_TASK") or os.cpu_count() or 1)
    share = str(max(cpus // n_runs, 1))
    env.update(SLURM_CPUS_PER_TASK=share, OMP_NUM_THREADS=share, MKL_NUM_THREADS=share)
    gpus = [g for g in env.get("CUDA_VISIBLE_DEVICES", "").split(",") if g.strip()]
    if gpus:
        under_mps = bool(env.get("CUDA_MPS_PIPE_DIRECTORY"))
        env["CUDA_VISIBLE_DEVICES"] = str(slot % len(gpus)) if under_mps else gpus[slot % len(gpus)]
    return env


def run_packed(tasks: list[Task]) -> int:
    """Run the tasks' commands side by side until all end; returns the task's exit status (0 when all runs
    ended well or the task was requeued; else the first failing run's status)."""
    received: list[int] = []
    children: list[subprocess.Popen] = []

    def stop_runs(signum: int, frame: object) -> None:
        received.append(signum)
        for child in children:
            if child.poll() is None:
                child.send_signal(signal.SIGTERM)  # save and stop; this process owns the requeue

    for signum in (signal.SIGUSR1, signal.SIGTERM):
        signal.signal(signum, stop_runs)
    for slot, task in enumerate(tasks):
        for folder in task.run_dirs():
            folder.mkdir(parents=True, exist_ok=True)
        print(f"synbench: pack slot {slot}: run {task.run_id} (manifest line {task.index})", flush=True)
        children.append(subprocess.Popen(list(task.argv), env=child_environment(slot, len(tasks))))
        if received:  # a signal arrived while starting the runs: stop this one too
            stop_runs(received[0], None)
    codes = [child.wait() for child in children]
    if received:
        unfinished = [d for t in tasks for d in t.run_dirs() if not (d / DONE).is_file()]
        if signal.SIGUSR1 in received and unfinished:
            from experiments.training_callbacks import requeue_slurm_task

            requeued = requeue_slurm_task()
            print(f"synbench: SIGUSR1: {len(unfinished)} run(s) saved; "
                  + (f"requeued SLURM job {requeued}" if requeued else "not requeued"), flush=True)
            return 0 if requeued else 128 + signal.SIGUSR1
        return 0 if not unfinished else 128 + received[0]
    return next((code for code in codes if code != 0), 0)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 3 or not args[1].isdigit() or not args[2].isdigit() or int(args[2]) < 1:
        print("usage: python -m experiments.launchers.pack MANIFEST TASK RUNS_PER_TASK", file=sys.stderr)
        return 2
    manifest, task, per_task = Path(args[0]), int(args[1]), int(args[2])
    try:
        if per_task == 1:
            exec_task(manifest, task)  # the run's command replaces this process: signals reach it directly
        return run_packed(packed_tasks(manifest, task, per_task))
    except InputError as e:
        print(f"synbench: error: {e}", file=sys.stderr)
        return 2
    except OSError as e:  # a command cannot be started
        print(f"synbench: error: {manifest}: task {task}: cannot run a command: {e}", file=sys.stderr)
        return 127


if __name__ == "__main__":
    sys.exit(main())
