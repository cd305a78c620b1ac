"""``synbench leaderboard RUN_DIR...``: finished experiments merged into one table (Markdown, or ``--json``).

Each RUN_DIR is an experiment folder (``RUNS/EXPERIMENT``) with its ``aggregate/`` tables. The experiments
merge only when the protocols their runs recorded match (the items of every evaluation they share, by
sha256; the training data); otherwise one error line names the first difference (``analysis.leaderboard``).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("leaderboard", help="merge finished experiments with matching protocols into one table",
                       description=__doc__)
    p.add_argument("run_dirs", nargs="+", type=Path, metavar="RUN_DIR",
                   help="experiment folders (RUNS/EXPERIMENT) with aggregate/ tables")
    p.add_argument("--json", action="store_true", help="print the merged table as JSON")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from analysis.leaderboard import markdown, merge, read_experiment

    merged = merge([read_experiment(folder) for folder in args.run_dirs])
    if args.json:
        print(json.dumps(merged, indent=1, sort_keys=True))
    else:
        print(markdown(merged), end="")
    return 0
