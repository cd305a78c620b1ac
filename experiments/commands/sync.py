"""``synbench sync EXPERIMENT``: upload the experiment's offline W&B runs (requeued segments included).

Runs ``wandb sync --id RUN_ID SEGMENT...`` once per run with all of its not-yet-uploaded offline segments,
oldest first, so the attempts of a preempted run become one W&B run (id = run id, group = experiment). Needs
network access and a W&B login (``wandb login`` or ``WANDB_API_KEY``); run it from a login node.
"""

from __future__ import annotations

import argparse
import shlex
from pathlib import Path


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("sync", help="upload an experiment's offline W&B runs", description=__doc__)
    p.add_argument("experiment", help="a shipped experiment (smoke) or the path of a spec YAML")
    p.add_argument("--seeds", help="these seeds instead of the spec's (as given to submit --seeds)")
    p.add_argument(
        "--runs-dir", type=Path, help="parent of experiment folders (default: $SYNBENCH_RUNS or ./runs)"
    )
    p.add_argument(
        "--project", help="W&B project to upload to (default: the one recorded, runtime.wandb_project)"
    )
    p.add_argument("--entity", help="W&B entity (user or team) to upload to")
    p.add_argument("--dry-run", action="store_true", help="print the wandb sync commands, run nothing")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from experiments.experiment_runs import experiment_runs
    from experiments.experiment_spec import load_spec
    from experiments.runs import runs_root
    from experiments.sync import plan_sync, run_sync

    spec = load_spec(args.experiment)
    jobs, skipped = plan_sync(
        experiment_runs(spec, args.seeds), runs_root(args.runs_dir), args.project, args.entity
    )
    for run_id, why in skipped.items():
        print(f"synbench: skipping {run_id}: {why}")
    if args.dry_run or not jobs:
        for job in jobs:
            print(shlex.join(job.argv))
        print(
            f"synbench: {spec.name}: {len(jobs)} run(s), {sum(len(j.segments) for j in jobs)} segment(s) "
            f"to upload{' (dry run)' if args.dry_run else ''}"
        )
        return 0
    codes = run_sync(jobs)
    failed = [run_id for run_id, code in codes.items() if code != 0]
    print(
        f"synbench: {spec.name}: uploaded {len(codes) - len(failed)} of {len(codes)} run(s)"
        + (f"; wandb sync failed for {', '.join(failed)}" if failed else "")
    )
    return 1 if failed else 0
