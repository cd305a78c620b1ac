"""Evaluating S seeds of one config in one process: ``synbench evaluate EXPERIMENT --seeds-per-process S``.

The evals of one spec entry on the runs of one (model, data) cell still to do are cut into groups of S seeds
(in seed order); each group is one stage task, ``python -m experiments.eval_group GROUP.json``, that runs each
member's own ``synbench eval`` command one after another in this one process. Each member writes what its
solo task writes (``RUN/eval/NAME/results.json``, its item cache and the record of its command), so results
are those of solo evaluation, a finished member is not run again and the stage resumes member by member.

What the group shares: the process start and the imports (torch, Lightning, the family's code: seconds per
seed on a loaded machine), and whatever the eval code keeps in memory between calls. The seeds' checkpoints
are still scored one after another, not stacked: stacked scoring (the S models under one ``vmap``, as training
does) is not done here.
"""

from __future__ import annotations

import hashlib
import json
import sys
from collections.abc import Sequence
from pathlib import Path

from experiments.evaluation_plan import Planner, StageTask
from lightning_modules.data.atomic import atomic_write_text

GROUPS = "eval-groups"  # EXPERIMENT/eval-groups/<group>/: the group's member list and its DONE marker


def eval_cells(planner: Planner) -> list[list[StageTask]]:
    """The planner's ready eval tasks by (spec entry, model, data): each cell one config's seeds, in order."""
    cells: dict[tuple[int, str, str], list[StageTask]] = {}
    pairs = [(i, run) for i, entry in enumerate(planner.entries) for run in planner.runs if entry.applies_to(run)]
    for (i, run), task in zip(pairs, planner.eval_tasks(), strict=True):
        if task.ready():
            cells.setdefault((i, run.model, run.data), []).append(task)
    return list(cells.values())


def group_tasks(cells: Sequence[Sequence[StageTask]], per_process: int, exp_dir: Path, python: str
                ) -> list[StageTask]:
    """Each cell's tasks (one entry, one config, seeds in order) not done yet, as groups of ``per_process``
    (a group of one stays the member's own task); the done ones as they are (the stage counts them done)."""
    out: list[StageTask] = []
    for cell in cells:
        todo = [t for t in cell if not t.is_done()]
        out += [t for t in cell if t not in todo]
        for start in range(0, len(todo), per_process):
            members = todo[start:start + per_process]
            out.append(members[0] if len(members) == 1 else _group(members, Path(exp_dir), python))
    return out


def _group(members: Sequence[StageTask], exp_dir: Path, python: str) -> StageTask:
    """The stage task of a group: its member list written under ``EXPERIMENT/eval-groups/``."""
    key = hashlib.sha256("\0".join(m.command for m in members).encode()).hexdigest()[:12]
    folder = exp_dir / GROUPS / f"{members[0].key}+{len(members) - 1}-{key}"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "DONE").unlink(missing_ok=True)  # its members are not all done
    listing = folder / "group.json"
    atomic_write_text(listing, json.dumps([{"argv": list(m.argv), "done": str(m.done), "command": m.command,
                                            "label": m.label} for m in members], indent=2))
    return StageTask(folder.name, members[0].folder, (python, "-m", "experiments.eval_group", str(listing)),
                     folder / "DONE", f"{members[0].label} +{len(members) - 1} seeds",
                     tuple(p for m in members for p in m.needs))


def run_group(listing: Path) -> int:
    """Run every member not done (each as its solo ``synbench eval``); DONE beside the listing once all are."""
    from experiments.cli import main

    members = json.loads(Path(listing).read_text())
    codes = []
    for member in members:
        task = StageTask(member["label"], Path(member["done"]).parent, tuple(member["argv"]), Path(member["done"]),
                         member["label"])
        if task.is_done():
            continue
        if task.argv[1:3] != ("-m", "experiments.cli"):
            raise ValueError(f"{listing}: not a synbench command: {task.argv}")
        task.done.unlink(missing_ok=True)
        task.done.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(task.command_file, task.command)
        print(f"synbench: eval group: {task.label}", flush=True)
        codes.append(main(list(task.argv[3:])))
    if all(StageTask("", Path(), tuple(m["argv"]), Path(m["done"]), "").is_done() for m in members):
        atomic_write_text(Path(listing).with_name("DONE"), "")
        return 0
    return next((c for c in codes if c), 1)


if __name__ == "__main__":
    sys.exit(run_group(Path(sys.argv[1])))
