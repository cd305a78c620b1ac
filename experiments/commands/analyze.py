"""``synbench analyze EXPERIMENT``: statistics, regressions, probing and figures into RUNS/EXPERIMENT/analysis.

Reads the run folders (training metrics, ``eval/*`` results); what runs is set by the spec's ``analysis:``
section (analysis/pipeline.py). A section whose inputs are missing is skipped and named in
``analysis/settings.json``; ``synbench report`` turns the folder into report.md and report.html.
"""

from __future__ import annotations

import argparse

from experiments.commands import add_experiment_arguments


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("analyze", help="statistics, regressions, MDL probing and figures of an experiment",
                       description=__doc__)
    add_experiment_arguments(p)
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
