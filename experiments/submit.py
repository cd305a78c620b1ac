"""Submitting an experiment: pick the runs that still need training, hand them to an executor, chain the
aggregation.

A run is never sent again once ``DONE``; with ``only_missing`` a run that is queued or running is not sent
either (without it such a run is sent again, e.g. after its job was cancelled behind our back). Executors:

- ``local``: this machine, ``launcher.local.max_parallel`` runs at a time; returns when all have ended, then
  aggregates.

With ``seeds_per_process: S`` (spec, top level or per model; ``submit --seeds-per-process S``) the runs of one
config to send train S seeds per task (``synbench train FAMILY --seeds A,B,...``, a seed group): the seeds of a
model are cut into consecutive groups of S (``experiments.seed_grouping``) and each group's runs still to send
form one task, so a SLURM array has one task per group and a partly finished group trains only its unfinished
seeds. A family that cannot stack seeds (``Family.stacks_seeds``) trains one seed per task (a notice says so).
- ``slurm``: one ``sbatch --array`` job (one task per run) from ``slurm/array.sbatch.tmpl``, and an
  aggregation job chained with ``--dependency=afterany`` so it runs whatever the tasks' outcome.
- ``submitit``: the same tasks through submitit's ``map_array``, with the same chained aggregation job.
"""

from __future__ import annotations

import json
import shlex
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from experiments.experiment_runs import experiment_dir, experiment_runs, folder_of, run_statuses
from experiments.experiment_spec import ExperimentSpec, Run
from experiments.launchers.manifest import Task, tasks_for_groups
from experiments.runs import RunStatus, select_for_submission
from lightning_modules.errors import InputError

EXECUTORS = ("local", "slurm", "submitit")
LOCAL_OPTIONS = ("max_parallel", "threads")


@dataclass
class Plan:
    """What ``submit`` would do: the runs to send (as manifest tasks) and the runs it leaves alone."""

    spec: ExperimentSpec
    root: Path
    runs: list[Run]
    statuses: list[RunStatus]
    tasks: list[Task]
    skipped: dict[str, str]
    seeds: str | None = None
    resent_in_flight: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # one line each, e.g. a family that trains seeds alone

    @property
    def sent_runs(self) -> list[str]:
        """The run ids the tasks train."""
        return [run_id for task in self.tasks for run_id, _, _ in task.runs()]


def plan_submission(spec: ExperimentSpec, root: Path, seeds: str | None, only_missing: bool,
                    seeds_per_process: int | None = None) -> Plan:
    """Expand the spec, read every run's state (asking the scheduler) and select the runs to send, grouped into
    tasks of ``seeds_per_process`` seeds (None: the spec's)."""
    runs = experiment_runs(spec, seeds)
    statuses = run_statuses(runs, root)
    send, skipped = select_for_submission(statuses, only_missing)
    chosen = set(send)
    groups, notes = task_groups(spec, runs, chosen, seeds_per_process)
    in_flight = [s.run_id for s in statuses if s.run_id in chosen and s.state == "RUNNING"]
    return Plan(spec, root, runs, statuses, tasks_for_groups(groups, root), skipped, seeds, in_flight, notes)


def task_groups(spec: ExperimentSpec, runs: list[Run], chosen: set[str], per_process: int | None
                ) -> tuple[list[list[Run]], list[str]]:
    """The chosen runs (pretrained sources apart) as the groups that train in one process each, in spec order,
    and the notices (a family that trains one seed per process). ``per_process`` (``--seeds-per-process``)
    replaces the spec's, except where the grouping is part of the run ids (dropout: an error if it differs)."""
    from experiments.experiment_spec import seeds_per_process
    from experiments.families import get_family
    from experiments.seed_grouping import changes_results, seed_groups

    models = {m.name: m for m in spec.models}
    cells: dict[tuple[str, str], list[Run]] = {}
    for run in runs:
        cells.setdefault((run.model, run.data), []).append(run)
    groups: list[list[Run]] = []
    notes: list[str] = []
    for cell in cells.values():
        model, first = models[cell[0].model], cell[0]
        wanted = per_process or model.seeds_per_process or spec.seeds_per_process
        size = seeds_per_process(spec, model, lambda family: get_family(family).stacks_seeds)
        if wanted > 1 and model.source is None and not get_family(model.family).stacks_seeds:
            why = get_family(model.family).seed_stack_refusal or "no stacked form"
            note = f"{model.family} cannot train seeds in groups ({why}): one seed per process"
            notes += [] if note in notes else [note]
        elif per_process is not None and model.source is None:
            if per_process != size and changes_results(first.config) and max(size, per_process) > 1:
                raise InputError(
                    f"model {model.name!r} has dropout, so a seed group's runs are other runs than its solo "
                    f"seeds (their run ids name the group): set seeds_per_process: {per_process} in "
                    f"{spec.path} so status, aggregate and evaluate find them", "--seeds-per-process")
            size = per_process
        for group in seed_groups(cell, size):
            members = [r for r in group if r.run_id in chosen and not r.config.get("source")]
            if members:
                groups.append(members)
    return groups, notes


def aggregate_command(plan: Plan) -> list[str]:
    """The ``synbench aggregate`` argv the chained job runs (absolute paths: it may start anywhere)."""
    argv = [
        sys.executable,
        "-m",
        "experiments.cli",
        "aggregate",
        str(plan.spec.path.resolve()),
        "--runs-dir",
        str(Path(plan.root).resolve()),
    ]
    return argv + (["--seeds", plan.seeds] if plan.seeds else [])


def local_options(spec: ExperimentSpec) -> dict[str, int]:
    """``launcher.local`` of the spec, validated: ``max_parallel`` (default 1) and ``threads`` per run."""
    options = spec.launcher.get("local", {})
    for key, value in options.items():
        if key not in LOCAL_OPTIONS:
            raise InputError(
                f"launcher.local.{key}: unknown option (known: {', '.join(LOCAL_OPTIONS)})",
                spec.where("launcher", "local", key),
            )
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise InputError(
                f"launcher.local.{key}: expected a positive integer, got {value!r}",
                spec.where("launcher", "local", key),
            )
    return {
        "max_parallel": options.get("max_parallel", 1),
        **({"threads": options["threads"]} if "threads" in options else {}),
    }


def slurm_options(spec: ExperimentSpec) -> Any:
    from experiments.launchers.slurm import SlurmOptions

    return SlurmOptions.from_mapping(spec.launcher.get("slurm", {}), spec.where("launcher", "slurm"))


def describe(plan: Plan, executor: str) -> str:
    """The dry-run report: the commands that would run and, for SLURM, the sbatch script."""
    lines = [
        f"experiment {plan.spec.name}: {len(plan.runs)} runs, {len(plan.sent_runs)} to submit ({executor}"
        + (f", {len(plan.tasks)} tasks" if len(plan.tasks) != len(plan.sent_runs) else "")
        + f"), {len(plan.skipped)} left alone"
    ]
    for run_id, state in plan.skipped.items():
        lines.append(f"  skip {run_id} ({state})")
    for task in plan.tasks:
        lines.append(f"  run  {', '.join(run_id for run_id, _, _ in task.runs())}: {shlex.join(task.argv)}")
    if executor == "slurm" and plan.tasks:
        from experiments.launchers.slurm import render_array_script

        exp = experiment_dir(plan.root, plan.spec)
        manifest = exp / "submissions" / "NEW" / "manifest.jsonl"
        script = render_array_script(
            plan.spec.name, len(plan.tasks), manifest, exp / "logs", slurm_options(plan.spec), Path.cwd()
        )
        aggregate = shlex.quote("exec " + shlex.join(aggregate_command(plan)))
        lines += [
            "",
            "# sbatch script (written to RUNS/EXPERIMENT/submissions/<time>/ on submission):",
            script,
            f"# then: sbatch --dependency=afterany:<array job> ... --wrap {aggregate}",
        ]
    return "\n".join(lines)


def launch(tasks: list[Task], executor: str, spec: ExperimentSpec, exp: Path, name: str | None = None
           ) -> dict[str, Any]:
    """Hand manifest tasks to an executor: ``local`` runs them and returns ``{"exit_codes"}``; ``slurm`` and
    ``submitit`` submit arrays named ``name`` (default: the experiment) and return ``{"job_id"}`` (the
    array job ids joined by ``:``, as ``--dependency`` reads them)."""
    if executor == "local":
        from experiments.launchers.local import run_local

        return {"exit_codes": run_local(tasks, exp / "logs", **local_options(spec))}
    if executor not in EXECUTORS:
        raise InputError(f"unknown executor {executor!r} (known: {', '.join(EXECUTORS)})", "--executor")
    options = slurm_options(spec)
    if executor == "slurm":
        from experiments.launchers.slurm import submit_arrays

        # more runs than the cluster's MaxArraySize: several array jobs, all waited for and aggregated
        return {"job_id": ":".join(submit_arrays(tasks, name or spec.name, exp, options))}
    from experiments.launchers.submitit_launcher import submit_submitit

    jobs = submit_submitit(tasks, name or spec.name, exp, options)
    return {"job_id": str(jobs[0].job_id).split("_")[0]}


def register_sources(plan: Plan) -> None:
    """Pretrained models (spec entries with a ``source``) have nothing to train: each is a finished run at
    once, its ``config.json`` and ``DONE`` naming the source the evaluations score."""
    from experiments.runs import write_done
    from lightning_modules.data.atomic import atomic_write_text

    for run in plan.runs:
        folder = folder_of(plan.root, run)
        if run.config.get("source") and not (folder / "DONE").is_file():
            folder.mkdir(parents=True, exist_ok=True)
            atomic_write_text(folder / "config.json", json.dumps({"seed": run.seed, **run.config}, indent=2,
                                                                 sort_keys=True))
            write_done(folder, {"family": run.family, "seed": run.seed, "source": run.config["source"]})


def execute(plan: Plan, executor: str) -> dict[str, Any]:
    """Send the planned runs; returns what was submitted ({"executor", "job_id", "aggregate_job", ...})."""
    exp = experiment_dir(plan.root, plan.spec)
    register_sources(plan)
    if not plan.tasks:
        return {"executor": executor, "submitted": 0}
    launched = launch(longest_first(plan) if executor == "local" else plan.tasks, executor, plan.spec, exp)
    if executor == "local":
        return {"executor": executor, "submitted": len(plan.sent_runs), **launched}
    from experiments.launchers.slurm import submit_after

    aggregate_job = submit_after(aggregate_command(plan), launched["job_id"], plan.spec.name, exp,
                                 slurm_options(plan.spec))
    return {"executor": executor, "submitted": len(plan.sent_runs), "job_id": launched["job_id"],
            "aggregate_job": aggregate_job}


def longest_first(plan: Plan) -> list[Task]:
    """The planned tasks in the order a local pool starts them: most training steps first (ties in spec order),
    so that a long run (a proposal parser's 500 steps beside 150-step models) does not start last and then run
    alone while the other cores idle. A run bounded by epochs (no ``train.max_steps``) counts 0 and starts last.
    A scheduler keeps the manifest order (array task i = task i)."""
    steps = {run.run_id: (run.config.get("train") or {}).get("max_steps") or 0 for run in plan.runs}
    return sorted(plan.tasks, key=lambda task: -sum(steps.get(run_id, 0) for run_id, _, _ in task.runs()))


def wait_for(plan: Plan, poll_s: float = 5.0) -> list[RunStatus]:
    """Poll until no submitted run is PENDING or RUNNING; returns the states of all runs."""
    sent = set(plan.sent_runs)
    while True:
        statuses = run_statuses(plan.runs, plan.root, quiet=True)
        if not any(s.run_id in sent and s.state in ("PENDING", "RUNNING") for s in statuses):
            return statuses
        time.sleep(poll_s)
