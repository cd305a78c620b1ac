"""``synbench analyze EXPERIMENT``: statistics, regressions, probing and figures into RUNS/EXPERIMENT/analysis.

Reads the run folders (training metrics, ``eval/*`` results); what runs is set by the spec's ``analysis:``
section (analysis/pipeline.py). A section whose inputs are missing is skipped and named in
``analysis/settings.json``; ``synbench report`` turns the folder into report.md and report.html.
"""

from __future__ import annotations

import argparse
from pathlib import Path


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("analyze", help="statistics, regressions, MDL probing and figures of an experiment",
                       description=__doc__)
    p.add_argument("experiment", help="a shipped experiment (reproduce-tg-demo) or the path of a spec YAML")
    p.add_argument("--seeds", help="these seeds instead of the spec's (as given to submit --seeds)")
    p.add_argument("--runs-dir", type=Path, help="parent of experiment folders (default: $SYNBENCH_RUNS or ./runs)")
    p.add_argument("--data-dir", help="data directory (default: $SYNBENCH_DATA or ~/.cache/synbench/data)")
    p.add_argument("--wandb", default="offline", choices=("offline", "online", "disabled"),
                   help="also log the tables and figures as a W&B run (job_type analysis; default offline)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from analysis.pipeline import analyze
    from experiments.experiment_spec import load_spec
    from experiments.runs import runs_root

    spec = load_spec(args.experiment)
    result = analyze(spec, runs_root(args.runs_dir), args.seeds, args.data_dir, args.wandb)
    print(f"{spec.name}: wrote {', '.join(result.written)} to {result.out_dir}")
    for section, reason in result.skipped.items():
        print(f"  skipped {section}: {reason}")
    return 0
