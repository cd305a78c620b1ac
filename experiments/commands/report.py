"""``synbench report EXPERIMENT``: report.md and report.html from the experiment's analysis folder.

Runs ``synbench analyze`` first when the analysis folder is missing (or with ``--analyze``). The report's
headline states the scale and every setting reduced from the full protocol; the paper's published numbers
stand beside ours, marked as a different scale.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from experiments.commands import add_experiment_arguments


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("report", help="report.md + report.html of an experiment (tables, figures, paper numbers)",
                       description=__doc__)
    add_experiment_arguments(p)
    p.add_argument("--analyze", action="store_true", help="run the analyses again first")
    p.add_argument("--out", type=Path, help="output folder (default: RUNS/EXPERIMENT)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from analysis.report import write_report
    from experiments.experiment_runs import experiment_dir
    from experiments.experiment_spec import load_spec
    from experiments.runs import runs_root

    spec = load_spec(args.experiment)
    root = runs_root(args.runs_dir)
    folder = experiment_dir(root, spec) / "analysis"
    if args.analyze or not (folder / "settings.json").is_file():
        from analysis.pipeline import analyze

        analyze(spec, root, args.seeds, args.data_dir)
    md, html = write_report(folder, args.out or experiment_dir(root, spec))
    print(f"{spec.name}: {md}\n{' ' * len(spec.name)}  {html}")
    return 0
