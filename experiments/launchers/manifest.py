"""Manifests: one JSON line per run with the exact command that trains it; every executor runs from one.

A line is ``{"index", "run_id", "seed", "run_dir", "argv"}``; line ``i`` has ``index == i`` and is run by
array task ``i``. A seed group (``seeds_per_process``) is one line whose command trains several runs: it
also has ``"members"``, the ``[run_id, seed, run_dir]`` of each (the first is the line's own). Commands
travel as JSON argv lists, never through a shell, so no value needs quoting.
``python -m experiments.launchers.manifest MANIFEST INDEX`` replaces itself (``exec``) with the command of
line INDEX, so signals sent to the task (SLURM's ``SIGUSR1`` before the time limit) reach the training
process.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from experiments.experiment_spec import Run, format_override
from experiments.runs import run_folder
from lightning_modules.data.atomic import atomic_write_text
from lightning_modules.errors import InputError


@dataclass(frozen=True)
class Task:
    """One command to execute and the run it trains (a seed group's first run; ``members``: all of its runs)."""

    index: int
    run_id: str
    seed: int
    run_dir: str
    argv: tuple[str, ...]
    members: tuple[tuple[str, int, str], ...] = ()  # (run_id, seed, run_dir) of each run of a seed group

    def runs(self) -> tuple[tuple[str, int, str], ...]:
        """(run_id, seed, run_dir) of every run the command trains."""
        return self.members or ((self.run_id, self.seed, self.run_dir),)

    def run_dirs(self) -> list[Path]:
        """The run folders the command writes."""
        return [Path(run_dir) for _, _, run_dir in self.runs()]


def train_command(run: Run, run_dir: Path, python: str = sys.executable) -> tuple[str, ...]:
    """The argv that trains ``run`` into ``run_dir``:
    ``synbench train FAMILY OVERRIDES [--preset P] --seed N --run-dir DIR``
    (the experiment name goes to ``runtime.experiment``, which W&B uses as the group)."""
    return _train_argv(run, python, "--seed", str(run.seed), "--run-dir", str(Path(run_dir).resolve()))


def group_command(runs: Sequence[Run], exp_dir: Path, python: str = sys.executable) -> tuple[str, ...]:
    """The argv that trains the runs of one seed group (one config) in one process:
    ``synbench train FAMILY OVERRIDES [--preset P] --seeds A,B,... --group-dir EXP``."""
    seeds = ",".join(str(r.seed) for r in runs)
    return _train_argv(runs[0], python, "--seeds", seeds, "--group-dir", str(Path(exp_dir).resolve()))


def _train_argv(run: Run, python: str, *where: str) -> tuple[str, ...]:
    """``synbench train`` of ``run``'s family, overrides and preset, then ``where`` (its seeds and folder)."""
    return (
        python, "-m", "experiments.cli", "train", run.family, *run.overrides,
        format_override("runtime.experiment", run.experiment),
        *(("--preset", run.preset) if run.preset else ()),
        *where,
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


def tasks_for_groups(groups: Iterable[Sequence[Run]], root: Path) -> list[Task]:
    """One task per group of runs (the runs of one config that train in one process; a group of one is a
    solo run's task), indexed 0..N-1, each run training into ``ROOT/EXPERIMENT/RUN_ID``."""
    tasks = []
    for i, group in enumerate(groups):
        folders = [run_folder(Path(root), r.experiment, r.run_id).resolve() for r in group]
        first = group[0]
        if len(group) == 1:
            tasks.append(Task(i, first.run_id, first.seed, str(folders[0]), train_command(first, folders[0])))
            continue
        members = tuple((r.run_id, r.seed, str(f)) for r, f in zip(group, folders, strict=True))
        tasks.append(Task(i, first.run_id, first.seed, str(folders[0]),
                          group_command(group, folders[0].parent), members))
    return tasks


def write_manifest(path: Path, tasks: Iterable[Task]) -> list[Task]:
    """Write the tasks as JSON lines (atomically); indices must be 0..N-1 in order."""
    tasks = list(tasks)
    for i, task in enumerate(tasks):
        if task.index != i:
            raise ValueError(f"manifest task {i} has index {task.index}")
        if not task.argv or not all(isinstance(a, str) and "\0" not in a for a in task.argv):
            raise InputError("a command must be a non-empty list of strings without NUL bytes", task.run_id)
    lines = [json.dumps(_line(t), sort_keys=True) for t in tasks]
    atomic_write_text(Path(path), "".join(line + "\n" for line in lines))
    return tasks


def _line(task: Task) -> dict:
    """A task's manifest line (``members`` only for a seed group)."""
    line = {**asdict(task), "argv": list(task.argv), "members": [list(m) for m in task.members]}
    if not task.members:
        del line["members"]
    return line


def _parse_line(line: str, location: str) -> Task:
    try:
        data = json.loads(line)
        task = Task(
            int(data["index"]),
            str(data["run_id"]),
            int(data["seed"]),
            str(data["run_dir"]),
            tuple(data["argv"]),
            tuple((str(r), int(s), str(d)) for r, s, d in data.get("members", ())),
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
    for folder in task.run_dirs():
        folder.mkdir(parents=True, exist_ok=True)
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
