"""Manifests: one JSON line per run with the exact command that trains it; every executor runs from one.

A line is ``{"index", "run_id", "seed", "run_dir", "argv"}``; line ``i`` has ``index == i`` and is run by
array task ``i``. Commands travel as JSON argv lists, never through a shell, so no value needs quoting.
``python -m experiments.launchers.manifest MANIFEST INDEX`` replaces itself (``exec``) with the command of
line INDEX, so signals sent to the task (SLURM's ``SIGUSR1`` before the time limit) reach the training
process.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass
from pathlib import Path

from experiments.experiment_spec import Run, format_override
from experiments.runs import run_folder
from lightning_modules.data.atomic import atomic_write_text
from lightning_modules.errors import InputError


@dataclass(frozen=True)
class Task:
    """One run to execute: where it lives and the command that trains it."""

    index: int
    run_id: str
    seed: int
    run_dir: str
    argv: tuple[str, ...]


def train_command(run: Run, run_dir: Path, python: str = sys.executable) -> tuple[str, ...]:
    """The argv that trains ``run`` into ``run_dir``:
    ``synbench train FAMILY OVERRIDES [--preset P] --seed N --run-dir DIR``
    (the experiment name goes to ``runtime.experiment``, which W&B uses as the group)."""
    return (
        python,
        "-m",
        "experiments.cli",
        "train",
        run.family,
        *run.overrides,
        format_override("runtime.experiment", run.experiment),
        *(("--preset", run.preset) if run.preset else ()),
        "--seed",
        str(run.seed),
        "--run-dir",
        str(Path(run_dir).resolve()),
    )


def tasks_for_runs(
    runs: Iterable[Run], root: Path, command: Callable[[Run, Path], tuple[str, ...]] = train_command
) -> list[Task]:
    """One task per run, indexed 0..N-1, each training into ``ROOT/EXPERIMENT/RUN_ID``."""
    tasks = []
    for i, run in enumerate(runs):
        folder = run_folder(Path(root), run.experiment, run.run_id).resolve()
        tasks.append(Task(i, run.run_id, run.seed, str(folder), tuple(command(run, folder))))
    return tasks


def write_manifest(path: Path, tasks: Iterable[Task]) -> list[Task]:
    """Write the tasks as JSON lines (atomically); indices must be 0..N-1 in order."""
    tasks = list(tasks)
    for i, task in enumerate(tasks):
        if task.index != i:
            raise ValueError(f"manifest task {i} has index {task.index}")
        if not task.argv or not all(isinstance(a, str) and "\0" not in a for a in task.argv):
            raise InputError("a command must be a non-empty list of strings without NUL bytes", task.run_id)
    lines = [json.dumps({**asdict(t), "argv": list(t.argv)}, sort_keys=True) for t in tasks]
    atomic_write_text(Path(path), "".join(line + "\n" for line in lines))
    return tasks


def _parse_line(line: str, location: str) -> Task:
    try:
        data = json.loads(line)
        task = Task(
            int(data["index"]),
            str(data["run_id"]),
            int(data["seed"]),
            str(data["run_dir"]),
            tuple(data["argv"]),
        )
    except (ValueError, KeyError, TypeError):
        raise InputError(
            "not a manifest line (JSON with index, run_id, seed, run_dir, argv)", location
        ) from None
    if not task.argv or not all(isinstance(a, str) for a in task.argv):
        raise InputError("argv must be a non-empty list of strings", location)
    return task


def read_manifest(path: Path) -> list[Task]:
    """All tasks of a manifest; errors name ``FILE:LINE``."""
    path = Path(path)
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as e:
        raise InputError(f"cannot read manifest: {e.strerror}", str(path)) from None
    tasks = [_parse_line(line, f"{path}:{n}") for n, line in enumerate(lines, 1)]
    for n, task in enumerate(tasks):
        if task.index != n:
            raise InputError(f"line {n + 1} has index {task.index}; expected {n}", f"{path}:{n + 1}")
    return tasks


def read_task(path: Path, index: int) -> Task:
    """Line ``index`` of the manifest (0-based), read without parsing the other lines."""
    path = Path(path)
    count = 0
    try:
        with open(path, encoding="utf-8") as f:
            for count, line in enumerate(f, 1):
                if count == index + 1:
                    task = _parse_line(line, f"{path}:{count}")
                    if task.index != index:
                        raise InputError(f"line has index {task.index}; expected {index}", f"{path}:{count}")
                    return task
    except OSError as e:
        raise InputError(f"cannot read manifest: {e.strerror}", str(path)) from None
    raise InputError(f"manifest has no task {index} (it has {count})", str(path))


def exec_task(path: Path, index: int) -> None:
    """Replace this process with task ``index``'s command (same pid: the scheduler's signals reach it)."""
    task = read_task(path, index)
    Path(task.run_dir).mkdir(parents=True, exist_ok=True)
    os.execvp(task.argv[0], list(task.argv))


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 2 or not args[1].isdigit():
        print("usage: python -m experiments.launchers.manifest MANIFEST INDEX", file=sys.stderr)
        return 2
    try:
        exec_task(Path(args[0]), int(args[1]))
    except InputError as e:
        print(f"synbench: error: {e}", file=sys.stderr)
        return 2
    except OSError as e:  # the command itself cannot be started
        print(f"synbench: error: {args[0]}:{int(args[1]) + 1}: cannot run the command: {e}", file=sys.stderr)
        return 127
    return 0  # not reached: exec does not return


if __name__ == "__main__":
    sys.exit(main())
