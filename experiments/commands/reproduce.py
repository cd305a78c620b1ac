"""``synbench reproduce PAPER [--scale S] [--seeds N] [--executor local|slurm|submitit] [--protocol]``.

A paper's whole pipeline in one resumable command: train every model over N seeds (and the proposal parser,
where the protocol has one), draw proposal trees, evaluate (perplexity, SyntaxGym, BLiMP, parsing,
per-terminal log-probabilities), analyse (Welch tests, regressions, MDL probing, figures) and write
report.md/.html into the reproduction's experiment folder. Running it again resumes; more --seeds adds seeds.
Each registered paper names its scales, typically ``demo`` (minutes on 2 CPU cores, toy settings),
``cpu-small`` (the PTB sample, 3 seeds: one to a few hours on 2 CPU cores, as its spec states) and ``paper``
(the published protocol, for a GPU cluster). The report states every reduced setting. ``--protocol`` prints
the paper's protocol card (``experiments/protocol_cards.py``) with the scale's values and runs nothing.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from experiments.cli_options import add_device_argument, checked_device, positive_float, positive_int
from experiments.evaluate import inference_dtype


def register(sub: argparse._SubParsersAction) -> None:
    from experiments.papers import papers

    scales = "; ".join(f"{p.key}: {', '.join(p.reproductions)}" for p in papers())
    p = sub.add_parser("reproduce", help="a paper's full pipeline: train, evaluate, analyse, report",
                       description=__doc__)
    # PAPER and --scale are checked against the registry by `reproduce` (one error line, exit 2), not argparse
    p.add_argument("paper", metavar="PAPER",
                   help="which paper: " + "; ".join(f"{p.key} ({p.citation})" for p in papers()))
    p.add_argument("--scale", default="cpu-small", metavar="S", help=f"the paper's scale (default cpu-small): {scales}")
    p.add_argument("--seeds", type=positive_int, metavar="N", help="seeds 0..N-1 per model (default: the scale's)")
    p.add_argument("--executor", default="local", choices=("local", "slurm", "submitit"),
                   help="where training, evaluation and analysis run (default local)")
    p.add_argument("--runs-dir", type=Path, help="parent of experiment folders (default: $SYNBENCH_RUNS or ./runs)")
    p.add_argument("--data-dir", help="data directory (default: $SYNBENCH_DATA or ~/.cache/synbench/data)")
    add_device_argument(p)
    inference_dtype.add_plan_argument(p)
    p.add_argument("--poll", type=positive_float, default=5.0, metavar="S", help="seconds between progress checks")
    p.add_argument("--protocol", action="store_true",
                   help="print the paper's protocol card instead of running: one line per model and setting, "
                        "MODEL SETTING VALUE (paper: VALUE, SOURCE), VALUE as the scale's spec resolves it "
                        "(with --scale paper: the published protocol); nothing is trained")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from analysis.report import headline_table, write_report
    from experiments.reproduce import reproduce
    from experiments.runs import runs_root

    if args.protocol:
        from experiments.protocol_cards import protocol_card
        from experiments.reproduce import spec_for

        print(protocol_card(args.paper, spec_for(args.paper, args.scale)), end="")
        return 0
    checked_device(args.device)  # before any stage: every eval would fail on it
    outcome = reproduce(args.paper, args.scale, runs_root(args.runs_dir), args.seeds, args.executor,
                        args.data_dir, args.poll, write_report=write_report, device=args.device,
                        inference_dtype=args.inference_dtype)
    if outcome.report_md is not None:
        print(headline_table(outcome.report_md.parent / "analysis"))
        print(f"report: {outcome.report_md}\n        {outcome.report_html}")
    return 1 if outcome.failed or outcome.report_md is None else 0
