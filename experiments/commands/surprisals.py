"""``synbench surprisals MODEL TEXT [--out FILE.tsv]``: per-word surprisals of a text file (one sentence per line,
words separated by whitespace) as a TSV: ``#`` lines with the model, method and conventions, a header row, one
row per word (``experiments.surprisals``). MODEL and the scorer options are ``eval sg``'s. Without ``--out``
the TSV goes to stdout; either way nothing is written until every sentence is scored (``--out`` atomically).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def register(subparsers: argparse._SubParsersAction) -> None:
    from experiments.surprisals import add_model_options

    p = subparsers.add_parser("surprisals", help="per-word surprisals of a text file (TSV), from any model",
                              description=__doc__)
    add_model_options(p)
    p.add_argument("text", type=Path, metavar="TEXT", help="one sentence per line, words separated by whitespace")
    p.add_argument("--out", type=Path, metavar="FILE.tsv", help="write the TSV there (default: stdout)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from experiments.evaluate.scorer_choice import choose
    from experiments.surprisals import SurprisalModel, at_line, read_sentences
    from lightning_modules.data.atomic import atomic_write_text
    from lightning_modules.errors import InputError

    sentences = read_sentences(args.text)
    model = SurprisalModel(choose(args), args.checkpoint)
    try:
        tsv = model.to_tsv(model.surprisals(sentences))
    except InputError as e:
        raise at_line(e, args.text) from None
    if args.out is None:
        sys.stdout.write(tsv)
    else:
        atomic_write_text(args.out, tsv)
        words = sum(len(s) for s in sentences)
        print(f"synbench: {len(sentences)} sentences, {words} words -> {args.out}", file=sys.stderr)
    return 0
