"""``synbench aggregate EXPERIMENT``: one tidy table of all runs x final metrics (Parquet and CSV).

Reads the run folders only (``DONE`` markers), so it is what the SLURM aggregation job runs after an array
(``--dependency=afterany``) and takes about a second for hundreds of runs. Reports missing and failed runs.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "aggregate", help="tidy table of all runs x metrics (Parquet + CSV)", description=__doc__
    )
    p.add_argument("experiment", help="a shipped experiment (smoke) or the path of a spec YAML")
    p.add_argument("--seeds", help="these seeds instead of the spec's (as given to submit --seeds)")
    p.add_argument(
        "--runs-dir", type=Path, help="parent of experiment folders (default: $SYNBENCH_RUNS or ./runs)"
    )
    p.add_argument("--out", type=Path, help="output folder (default: RUNS/EXPERIMENT/aggregate)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from analysis.aggregate import aggregate_experiment
    from experiments.experiment_spec import load_spec
    from experiments.runs import runs_root

    spec = load_spec(args.experiment)
    result = aggregate_experiment(spec, runs_root(args.runs_dir), args.seeds, args.out)
    s = result.summary
    print(
        f"{spec.name}: {s['done']} of {s['runs']} runs done, {len(result.long)} metric rows -> "
        f"{result.out_dir}/metrics_{{long,wide}}.{{parquet,csv}}"
    )
    for row in s["failed"]:
        print(f"  FAILED  {row['run_id']}: {row['error']}", file=sys.stderr)
    for run_id in s["running"]:
        print(f"  RUNNING {run_id} (not in the table yet)", file=sys.stderr)
    if s["missing"]:
        shown = ", ".join(s["missing"][:10]) + (" ..." if len(s["missing"]) > 10 else "")
        print(f"  missing {len(s['missing'])} run(s): {shown}", file=sys.stderr)
    return 0
