"""``synbench submit EXPERIMENT``: train every run of an experiment that is not DONE, locally or on SLURM.

Runs live in ``RUNS/EXPERIMENT/RUN_ID`` (RUNS = ``--runs-dir``, ``$SYNBENCH_RUNS`` or ``./runs``); a run id is
the config hash plus the seed, so submitting again sends only what is missing and a killed run resumes from
its last checkpoint. Each sent run gets a ``QUEUED`` marker naming its job.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path

from experiments.cli_options import positive_int
from lightning_modules.errors import InputError


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "submit", help="train an experiment's runs (local, SLURM array or submitit)", description=__doc__
    )
    p.add_argument("experiment", help="a shipped experiment (smoke) or the path of a spec YAML")
    p.add_argument(
        "--executor",
        choices=("local", "slurm", "submitit"),
        default="local",
        help="local: this machine (waits); slurm: one sbatch array job plus an aggregation job "
        "(--dependency=afterany); submitit: the same through submitit (default: local)",
    )
    p.add_argument("--seeds", help="these seeds instead of the spec's, e.g. 0-99 or 0-9,20-29")
    p.add_argument(
        "--only-missing",
        action="store_true",
        help="also leave out runs that are queued or running (DONE runs are never sent again)",
    )
    p.add_argument(
        "--dry-run",
        action="store_true",
        help="print what would run (and the sbatch script for slurm); submit nothing, write nothing",
    )
    p.add_argument(
        "--runs-per-gpu", type=positive_int, metavar="K",
        help="slurm: pack K runs per GPU into each array task, each its own process and run folder "
        "(launcher.slurm.runs_per_gpu; default 1)",
    )
    p.add_argument(
        "--mps", action="store_true",
        help="slurm: run each array task's packed runs under the task's own NVIDIA MPS control daemon, started "
        "and stopped by the sbatch script (launcher.slurm.mps; default off)",
    )
    p.add_argument(
        "--seeds-per-process", type=positive_int, metavar="S",
        help="train S seeds of a model per process, their parameters stacked (a seed group; the spec's "
        "seeds_per_process, default 1); a SLURM array task then carries S seeds",
    )
    p.add_argument(
        "--wait", action="store_true", help="wait until the submitted runs end, then print the status"
    )
    p.add_argument(
        "--runs-dir", type=Path, help="parent of experiment folders (default: $SYNBENCH_RUNS or ./runs)"
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from experiments.experiment_spec import load_spec
    from experiments.runs import runs_root, status_report
    from experiments.submit import describe, execute, plan_submission, wait_for

    spec = load_spec(args.experiment)
    if args.runs_per_gpu is not None:
        if args.executor != "slurm":
            raise InputError("--runs-per-gpu packs SLURM array tasks (--executor slurm); locally, "
                             "launcher.local.max_parallel runs side by side", "--runs-per-gpu")
        spec.launcher.setdefault("slurm", {})["runs_per_gpu"] = args.runs_per_gpu
    if args.mps:
        if args.executor != "slurm":
            raise InputError("--mps starts an MPS daemon in each SLURM array task (--executor slurm)", "--mps")
        spec.launcher.setdefault("slurm", {})["mps"] = True
    plan = plan_submission(spec, runs_root(args.runs_dir), args.seeds, args.only_missing, args.seeds_per_process)
    for note in plan.notes:
        print(f"synbench: note: {note}", file=sys.stderr)
    if args.dry_run:
        print(describe(plan, args.executor))
        return 0
    for run_id in plan.resent_in_flight:
        print(
            f"synbench: warning: {run_id} is RUNNING and is sent again (use --only-missing to leave it alone)"
        )
    result = execute(plan, args.executor)
    skipped = ", ".join(f"{n} {state}" for state, n in Counter(plan.skipped.values()).items())
    print(
        f"synbench: {spec.name}: submitted {result['submitted']} of {len(plan.runs)} runs"
        + (
            f" ({args.executor} job {result['job_id']}, aggregation job {result['aggregate_job']})"
            if "job_id" in result
            else ""
        )
        + (f"; left alone: {skipped}" if skipped else "")
    )
    if args.executor == "local" and plan.tasks:
        _aggregate(args, spec)
    if not (args.wait or args.executor == "local"):
        return 0
    statuses = wait_for(plan)
    from experiments.commands.status import print_table

    report = status_report(statuses)
    for row, run_ in zip(report["runs"], plan.runs):
        row["model"], row["family"] = run_.model, run_.family
    if args.wait:
        print_table(spec.name, report["runs"])
    failed = [s.run_id for s in statuses if s.state == "FAILED"]
    if failed:
        print(f"synbench: {len(failed)} run(s) failed: {json.dumps(failed)}")
    return 1 if failed else 0


def _aggregate(args: argparse.Namespace, spec) -> None:
    """After a local submission: the same aggregation a SLURM submission chains as a job."""
    from analysis.aggregate import aggregate_experiment
    from experiments.runs import runs_root

    result = aggregate_experiment(spec, runs_root(args.runs_dir), seeds=args.seeds)
    print(f"synbench: aggregated {result.summary['done']} runs into {result.out_dir}")
