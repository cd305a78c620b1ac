"""One module per ``synbench`` subcommand; each exposes ``register(subparsers)``.

Command modules stay thin (argument parsing and printing) and import heavy libraries (torch, pandas)
inside their handlers, so ``synbench --help`` is instant.
"""

from __future__ import annotations

import argparse
from pathlib import Path


def add_experiment_arguments(p: argparse.ArgumentParser) -> None:
    """EXPERIMENT, --seeds, --runs-dir and --data-dir: what evaluate, analyze and report share."""
    p.add_argument("experiment", help="a shipped experiment (e.g. smoke) or the path of a spec YAML")
    p.add_argument("--seeds", help="these seeds instead of the spec's (as given to submit --seeds)")
    p.add_argument("--runs-dir", type=Path, help="parent of experiment folders (default: $SYNBENCH_RUNS or ./runs)")
    p.add_argument("--data-dir", help="data directory (default: $SYNBENCH_DATA or ~/.cache/synbench/data)")
