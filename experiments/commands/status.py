"""``synbench status EXPERIMENT [--json]``: the state of every run of an experiment, from its run folders.

PENDING (not started, queued, or requeued), RUNNING (heartbeat fresh), DONE (with the final metrics), FAILED
(an error, or a process that died: its heartbeat went stale or its job ended without ``DONE``). Exit status 1
when any run failed.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

# Metrics shown in the table (all of them are in --json).
TABLE_METRICS = ("best_val_loss", "val_token_ppl", "val_word_ppl")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("status", help="state and metrics of each run of an experiment", description=__doc__)
    p.add_argument("experiment", help="a shipped experiment (smoke) or the path of a spec YAML")
    p.add_argument(
        "--seeds", help="these seeds instead of the spec's (as given to submit --seeds), e.g. 0-99"
    )
    p.add_argument(
        "--runs-dir", type=Path, help="parent of experiment folders (default: $SYNBENCH_RUNS or ./runs)"
    )
    p.add_argument(
        "--json", action="store_true", help='print {"runs": [{"run_id", "seed", "state", "metrics"}]}'
    )
    p.add_argument(
        "--no-scheduler",
        action="store_true",
        help="judge runs by their folders alone (do not ask SLURM / the local launcher)",
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from experiments.experiment_runs import experiment_runs, run_statuses
    from experiments.experiment_spec import load_spec
    from experiments.runs import runs_root, status_report

    spec = load_spec(args.experiment)
    runs = experiment_runs(spec, args.seeds)
    statuses = run_statuses(runs, runs_root(args.runs_dir), ask_scheduler=not args.no_scheduler)
    report = status_report(statuses)
    for row, run_ in zip(report["runs"], runs):
        row["model"], row["family"] = run_.model, run_.family
    if args.json:
        json.dump(report, sys.stdout)
        sys.stdout.write("\n")
    else:
        print_table(spec.name, report["runs"])
    return 1 if any(s.state == "FAILED" for s in statuses) else 0


def print_table(experiment: str, rows: list[dict]) -> None:
    from rich.console import Console
    from rich.table import Table

    colours = {"DONE": "green", "RUNNING": "cyan", "PENDING": "yellow", "FAILED": "red"}
    table = Table(title=f"{experiment}: {len(rows)} runs")
    for name in ("run id", "model", "seed", "state", "step", *TABLE_METRICS, "job / error"):
        table.add_column(name, justify="right" if name in (*TABLE_METRICS, "seed", "step") else "left")
    for row in rows:
        metrics = row["metrics"] or {}
        values = [
            f"{metrics[k]:.4g}" if isinstance(metrics.get(k), int | float) else "" for k in TABLE_METRICS
        ]
        step = metrics.get("global_step", row.get("global_step"))
        table.add_row(
            row["run_id"],
            row["model"],
            str(row["seed"]),
            f"[{colours[row['state']]}]{row['state']}[/]",
            "" if step is None else str(step),
            *values,
            row.get("error") or (row.get("job_id") if row["state"] != "DONE" else None) or "",
        )
    console = Console(width=None if sys.stdout.isatty() else 220)  # never truncate ids in logs and pipes
    console.print(table)
    counts = {state: sum(r["state"] == state for r in rows) for state in colours}
    console.print("  ".join(f"{state} {n}" for state, n in counts.items()))
