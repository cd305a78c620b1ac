"""The ``synbench`` command line: a registry of subcommands and the one error convention.

Bad input anywhere (files, configs, checkpoints) raises ``InputError``; it is printed as a single line
``synbench: error: LOCATION: message`` and the process exits with status 2.
"""

from __future__ import annotations

import argparse
import importlib
import sys

from experiments.commands.arguments import Parser
from lightning_modules.errors import InputError

# Subcommand modules, in the order ``synbench --help`` lists them.
COMMANDS = [
    "experiments.commands.prepare",
    "experiments.commands.data",
    "experiments.commands.train",
    "experiments.commands.sample",
    "experiments.commands.propose",
    "experiments.commands.evalb",
    "experiments.commands.eval",
    "experiments.commands.surprisals",
    "experiments.commands.inspect",
    "experiments.commands.model_info",
    "experiments.commands.import_run",
    "experiments.commands.submit",
    "experiments.commands.status",
    "experiments.commands.aggregate",
    "experiments.commands.sync",
    "experiments.commands.tune",
    "experiments.commands.evaluate",
    "experiments.commands.analyze",
    "experiments.commands.report",
    "experiments.commands.leaderboard",
    "experiments.commands.reproduce",
]


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog="synbench",
        description="Benchmark harness for syntactic language models: train, evaluate, tune, report.",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in COMMANDS:
        importlib.import_module(name).register(sub)
    return parser


def parse(parser: argparse.ArgumentParser, argv: list[str] | None) -> argparse.Namespace:
    """Arguments as users type them: ``KEY=VALUE`` config overrides may follow options
    (``synbench train FAMILY --preset cpu-small train.max_steps=5``)."""
    args, extra = parser.parse_known_args(argv)
    overrides = [item for item in extra if "=" in item and not item.startswith("-")]
    if extra and (not hasattr(args, "overrides") or len(overrides) != len(extra)):
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    if extra:
        args.overrides = [*args.overrides, *overrides]
    return args


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    try:
        args = parse(parser, argv)
    except SystemExit as done:  # --help, or a usage error already printed as one line
        return int(done.code or 0)
    try:
        return int(args.func(args) or 0)
    except InputError as e:
        print(f"synbench: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("synbench: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
