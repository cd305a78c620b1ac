"""``synbench reproduce PAPER [--scale demo|cpu-small|paper] [--seeds N] [--executor local|slurm|submitit]``.

A paper's whole pipeline in one resumable command: train every model over N seeds (and the proposal
parser), draw proposal trees, evaluate (perplexity, SyntaxGym, BLiMP, parse reranking, per-terminal
log-probabilities), analyse (Welch tests, regressions, MDL probing, figures) and write report.md/.html into
RUNS/reproduce-PAPER-SCALE/. Running it again resumes; more --seeds adds seeds. Scales: ``demo`` (about ten
minutes on 2 CPU cores, toy settings), ``cpu-small`` (the PTB sample, under an hour with 3 seeds),
``paper`` (the published protocol, for a GPU cluster). The report states every reduced setting.
"""

from __future__ import annotations

import argparse
from pathlib import Path


def register(sub: argparse._SubParsersAction) -> None:
    from experiments.reproduce import PAPERS, SCALES

    p = sub.add_parser("reproduce", help="a paper's full pipeline: train, evaluate, analyse, report",
                       description=__doc__)
    p.add_argument("paper", choices=PAPERS, help="which paper (tg: Transformer Grammars)")
    p.add_argument("--scale", default="cpu-small", choices=SCALES, help="demo | cpu-small (default) | paper")
    p.add_argument("--seeds", type=int, metavar="N", help="seeds 0..N-1 per model (default: the scale's)")
    p.add_argument("--executor", default="local", choices=("local", "slurm", "submitit"),
                   help="where training, evaluation and analysis run (default local)")
    p.add_argument("--runs-dir", type=Path, help="parent of experiment folders (default: $SYNBENCH_RUNS or ./runs)")
    p.add_argument("--data-dir", help="data directory (default: $SYNBENCH_DATA or ~/.cache/synbench/data)")
    p.add_argument("--poll", type=float, default=5.0, metavar="S", help="seconds between progress checks")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from experiments.reproduce import reproduce
    from experiments.runs import runs_root

    outcome = reproduce(args.paper, args.scale, runs_root(args.runs_dir), args.seeds, args.executor,
                        args.data_dir, args.poll)
    if outcome.report_md is not None:
        from analysis.report import headline_table

        print(headline_table(outcome.report_md.parent / "analysis"))
        print(f"report: {outcome.report_md}\n        {outcome.report_html}")
    return 1 if outcome.failed or outcome.report_md is None else 0
