"""Evaluating S seeds of one config in one process: ``synbench evaluate EXPERIMENT --seeds-per-process S``
(default: the spec's ``seeds_per_process``, 1 unless set: each run's evals in one process).

The evals still to do on the runs of one (model, data) cell are cut into groups of S seeds (in seed order); a
group holds every evaluation of its seeds (seed by seed, each in the spec's entry order) and is one stage
task, ``python -m experiments.eval_group GROUP.json``, that runs each member's own ``synbench eval`` command one
after another in this one process. Each member writes what its solo task writes (``RUN/eval/NAME/results.json``,
its item cache and the record of its command), so results are those of solo evaluation, a finished member is
not run again and the stage resumes member by member.

What the group shares: the process start and the imports (torch, Lightning, the family's code: 5-10 CPU-seconds
per process, more than a small model's whole evaluation), and whatever the eval code keeps in memory between
calls. With stacked scoring (``--stacked-scoring``, default ``auto``: on where the evals run on CUDA), the
members of one spec entry that score given inputs (exact, gold trees, proposal trees) share their forwards: the
first member's batch runs all the entry's seeds' checkpoints under one ``vmap`` and the later members take
their results from memory (``experiments.evaluate.scorers.stacked``; beam searches stay solo).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import traceback
from collections.abc import Sequence
from pathlib import Path

from experiments.evaluate import tasks as eval_tasks
from experiments.evaluate.scorers import stacked
from experiments.evaluation_plan import Planner, StageTask
from lightning_modules.data.atomic import atomic_write_text

GROUPS = "eval-groups"  # EXPERIMENT/eval-groups/<group>/: the group's member list and its DONE marker


def eval_cells(planner: Planner) -> list[list[list[StageTask]]]:
    """The planner's ready eval tasks by (model, data): each cell one config's seeds in seed order, each seed
    its tasks in the spec's entry order (an entry's kept checkpoints after its best one)."""
    cells: dict[tuple[str, str], dict[int, list[StageTask]]] = {}
    for run, task in planner.run_tasks():
        if task.ready():
            cells.setdefault((run.model, run.data), {}).setdefault(run.seed, []).append(task)
    return [[seeds[s] for s in sorted(seeds)] for seeds in cells.values()]


def group_tasks(cells: Sequence[Sequence[Sequence[StageTask]]], per_process: int, exp_dir: Path, python: str,
                stacked_scoring: str = "auto") -> list[StageTask]:
    """Each cell's tasks not done yet (one config; per seed, in order) as groups of ``per_process`` seeds with
    all their tasks (a group of one task stays that task; ``stacked_scoring``: the groups' mode, ``stacked.MODES``);
    the done ones as they are (the stage counts them)."""
    out: list[StageTask] = []
    for cell in cells:
        for start in range(0, len(cell), per_process):
            tasks = [t for seed in cell[start:start + per_process] for t in seed]
            todo = [t for t in tasks if not t.is_done()]
            out += [t for t in tasks if t not in todo]
            if todo:
                out.append(todo[0] if len(todo) == 1 else _group(todo, Path(exp_dir), python, stacked_scoring))
    return out



def group_by_checkpoint(tasks: Sequence[StageTask], exp_dir: Path, python: str) -> list[StageTask]:
    """Tasks not done yet that read the same checkpoint (a proposal parser's sentence sets) as one group each;
    the done ones as they are."""
    out = [t for t in tasks if t.is_done()]
    by_checkpoint: dict[Path | None, list[StageTask]] = {}
    for task in tasks:
        if not task.is_done():
            by_checkpoint.setdefault(task.needs[0] if task.needs else None, []).append(task)
    for members in by_checkpoint.values():
        out.append(members[0] if len(members) == 1 else _group(members, Path(exp_dir), python, "off"))
    return out

def _group(members: Sequence[StageTask], exp_dir: Path, python: str, stacked_scoring: str) -> StageTask:
    """The stage task of a group: its member list written under ``EXPERIMENT/eval-groups/``."""
    key = hashlib.sha256("\0".join(m.command for m in members).encode()).hexdigest()[:12]
    folder = exp_dir / GROUPS / f"{members[0].key}+{len(members) - 1}-{key}"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "DONE").unlink(missing_ok=True)  # its members are not all done
    listing = folder / "group.json"
    atomic_write_text(listing, json.dumps([{"argv": list(m.argv), "done": str(m.done), "command": m.command,
                                            "label": m.label} for m in members], indent=2))
    return StageTask(folder.name, members[0].folder,
                     (python, "-m", "experiments.eval_group", str(listing), "--stacked-scoring", stacked_scoring),
                     folder / "DONE", f"{members[0].label} +{len(members) - 1} more",
                     tuple(p for m in members for p in m.needs))


def run_group(listing: Path, stacked_scoring: str = "auto") -> int:
    """Run every member not done (each as its solo ``synbench eval``, the members of one entry seed-stacked as
    ``stacked_scoring`` says); DONE beside the listing once all are."""
    from experiments.cli import main

    members = json.loads(Path(listing).read_text())
    stage_tasks = [StageTask(m["label"], Path(m["done"]).parent, tuple(m["argv"]), Path(m["done"]), m["label"])
             for m in members]
    todo = [task for task in stage_tasks if not task.is_done()]
    for task in todo:
        if task.argv[1:3] != ("-m", "experiments.cli"):
            raise ValueError(f"{listing}: not a synbench command: {task.argv}")
    stacks = stacked.GroupStacks(member_stacks([task.argv[3:] for task in todo]), stacked_scoring)
    codes = []
    for i, task in enumerate(todo):
        task.done.unlink(missing_ok=True)
        task.done.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(task.command_file, task.command)
        print(f"synbench: eval group: {task.label}", flush=True)
        try:
            with stacks.member(i):
                codes.append(main(list(task.argv[3:])))
        except Exception:  # a crash of one member, as its solo process would: logged, the others still run
            traceback.print_exc()
            codes.append(1)
    if all(task.is_done() for task in stage_tasks):
        atomic_write_text(Path(listing).with_name("DONE"), "")
        return 0
    return next((c for c in codes if c), 1)


def scoring_method(args: Sequence[str]) -> str | None:
    """The method a ``synbench eval TASK ...`` argv scores with: its ``--method``, else the one method of a task
    that takes none (``rerank``: proposals); None for a task its family evaluates itself (``scored=False``: its
    results do not go through the scorer choice that records ``stacked_scoring``) or without one method."""
    if "--method" in args[:-1]:
        return args[args.index("--method") + 1]
    task = eval_tasks.get(args[1])
    return task.methods[0] if task.scored and not task.takes_method and len(task.methods) == 1 else None


def member_stacks(argvs: Sequence[Sequence[str]]) -> list[tuple[str, ...] | None]:
    """Each member's stack: the checkpoints of the members whose ``synbench eval`` argv (without the interpreter)
    is the same but for the checkpoint and ``--out``, when there are at least two and their method is one of
    ``stacked.STACKED_METHODS``; None for a member scored solo. Members at ``--inference-dtype bfloat16`` score
    solo: autocast does not reach the attention kernel under ``vmap`` (its dtype check sees a float32 query
    beside bf16 keys), so each seed runs its own bf16 forward."""
    keys: list[tuple[str, ...] | None] = []
    checkpoints: list[str] = []
    for argv in argvs:
        args = list(argv)
        if (len(args) < 3 or args[0] != "eval" or "--out" not in args[:-1]
                or scoring_method(args) not in stacked.STACKED_METHODS or _bf16(args)):
            keys.append(None)
            checkpoints.append("")
            continue
        checkpoints.append(stacked.checkpoint_key(args[2]))
        out = args.index("--out")
        keys.append(tuple(args[:2] + args[3:out] + args[out + 2:]))
    by_key: dict[tuple[str, ...], list[str]] = {}
    for key, checkpoint in zip(keys, checkpoints, strict=True):
        if key is not None:
            by_key.setdefault(key, []).append(checkpoint)
    return [tuple(by_key[k]) if k is not None and len(set(by_key[k])) > 1 else None for k in keys]


def _bf16(args: Sequence[str]) -> bool:
    """Whether an eval argv asks for an inference dtype other than float32."""
    flag = "--inference-dtype"
    return flag in args[:-1] and args[args.index(flag) + 1] != "float32"


def cli(argv: Sequence[str]) -> int:
    """``python -m experiments.eval_group GROUP.json [--stacked-scoring MODE]`` (the group task's command)."""
    parser = argparse.ArgumentParser(prog="python -m experiments.eval_group", description=__doc__)
    parser.add_argument("listing", type=Path, help="the group's member list (group.json)")
    parser.add_argument("--stacked-scoring", choices=stacked.MODES, default="auto")
    options = parser.parse_args(list(argv))
    return run_group(options.listing, options.stacked_scoring)


if __name__ == "__main__":
    sys.exit(cli(sys.argv[1:]))
