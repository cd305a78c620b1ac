"""``synbench prepare``: stage the datasets into the data directory, or register a licensed treebank."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

HELP = "stage the datasets (sha256-verified) into the data directory, or register a licensed treebank"

DESCRIPTION = """\
Stage the benchmark's datasets (PTB sample, UD treebanks, SyntaxGym, BLiMP, Marvin & Linzen) into the data
directory, verifying every file against the sha256 pins in synbench's datasets.json. Without --from, files
are downloaded from their public upstream sources (raw GitHub at pinned commits, or a mirror of that layout).
Idempotent: a second run only verifies. A file that fails verification is reported by name and not staged
(exit status 2). DATA_DIR/MANIFEST.json records what was staged from where.

With --treebank NAME=PATH (repeatable) nothing is staged: PATH (a bracketed or CoNLL-U file, or a directory
with train/valid|dev/test files) is parsed, checked and registered as corpus NAME in DATA_DIR/treebanks.json;
the files stay where they are."""


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "prepare", help=HELP, description=DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument(
        "--from", dest="source", metavar="DIR", help="stage from a local copy, e.g. ../shared/data"
    )
    p.add_argument(
        "--data-dir", metavar="DIR", help="data directory (default: $SYNBENCH_DATA or ~/.cache/synbench/data)"
    )
    p.add_argument(
        "--mirror",
        metavar="URL",
        help="base URL replacing https://raw.githubusercontent.com for downloads (default: $SYNBENCH_MIRROR)",
    )
    p.add_argument("--only", metavar="DATASET", action="append", help="stage only this dataset (repeatable)")
    p.add_argument(
        "--treebank", metavar="NAME=PATH", action="append", help="register a licensed treebank (repeatable)"
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.progress import Progress
    from rich.table import Table

    from experiments.prepare import MIRROR_ENV, load_registry, prepare, register_treebank
    from lightning_modules.data.corpora import resolve_data_dir
    from lightning_modules.errors import InputError

    data_dir = resolve_data_dir(args.data_dir)
    console = Console()
    if args.treebank:
        if args.source or args.only or args.mirror:
            raise InputError("--treebank only registers a treebank: leave out --from, --only and --mirror")
        for spec in args.treebank:
            name, entry = register_treebank(data_dir, spec)
            counts = ", ".join(f"{split} {n}" for split, n in entry["sentences"].items())
            kind, path = entry["kind"], entry["path"]
            console.print(f"registered {kind} treebank {name!r} ({counts} sentences) from {path}")
        return 0

    registry = load_registry()
    only = args.only or list(registry["datasets"])
    total = sum(len(registry["datasets"][n]["files"]) for n in only if n in registry["datasets"])
    mirror = args.mirror or os.environ.get(MIRROR_ENV) or None
    source = Path(args.source).expanduser() if args.source else None
    with Progress(console=Console(stderr=True), transient=True, disable=not sys.stderr.isatty()) as progress:
        task = progress.add_task("staging", total=total)
        reports = prepare(
            data_dir,
            source=source,
            mirror=mirror,
            only=args.only,
            registry=registry,
            on_file=lambda _: progress.advance(task),
        )

    table = Table(title=f"datasets in {data_dir}")
    for column in ("dataset", "files", "staged", "already staged", "problems", "licence"):
        table.add_column(column, justify="left" if column in ("dataset", "licence") else "right")
    for r in reports:
        staged = len(r.staged) + len(r.restaged)
        licence = registry["datasets"][r.name]["licence"]
        table.add_row(r.name, str(r.files), str(staged), str(len(r.verified)), str(len(r.problems)), licence)
    console.print(table)
    for r in reports:
        for rel in r.restaged:
            print(
                f"synbench: warning: {data_dir / rel}: staged file did not match its sha256; staged again",
                file=sys.stderr,
            )
    problems = [p for r in reports for p in r.problems]
    for problem in problems:
        print(f"synbench: error: {problem}", file=sys.stderr)
    return 2 if problems else 0
