"""``synbench import FAMILY CHECKPOINT [--vocab FILE] [--tokenizer DIR] --out RUN_DIR``: a published checkpoint
of a family's official implementation as a synbench run folder (``experiments.imports``).

The family's adapter reads the files without running code from them; the run folder it gives is evaluated
like a trained one (``synbench eval ppl RUN_DIR/checkpoints/best.ckpt ...``).
"""

from __future__ import annotations

import argparse
from pathlib import Path


def register(subparsers: argparse._SubParsersAction) -> None:
    from experiments.families import names

    parser = subparsers.add_parser(
        "import", help="convert an official implementation's checkpoint into a run folder",
        description="Convert a checkpoint of a family's official implementation (e.g. a released model.pt) into "
                    "a synbench run folder: config.json, checkpoints/best.ckpt and DONE (marked imported, with "
                    "the source files' sha256). Nothing from the files runs (weights_only loading, a restricted "
                    "unpickler for pickled vocabularies); nothing is written unless the whole import succeeds.",
    )
    parser.add_argument("family", choices=names(), metavar="FAMILY",
                        help="a family whose adapter imports its official checkpoints; "
                             "the others say so")
    parser.add_argument("checkpoint", type=Path, metavar="OFFICIAL_CHECKPOINT",
                        help="the official checkpoint file (e.g. model.pt)")
    parser.add_argument("--vocab", type=Path, metavar="FILE", help="the official vocabulary file (e.g. vocab.pkl)")
    parser.add_argument("--tokenizer", type=Path, metavar="DIR",
                        help="the tokenizer directory the official model reads (e.g. GPT-2's vocab.json and "
                             "merges.txt); default: every word is one token")
    parser.add_argument("--out", type=Path, required=True, metavar="RUN_DIR", help="the new run folder")
    parser.set_defaults(func=handle)


def handle(args: argparse.Namespace) -> int:
    from experiments.imports import import_run

    out = import_run(args.family, args.checkpoint, args.vocab, args.tokenizer, args.out)
    print(f"imported {args.family} {args.checkpoint} -> {out} (checkpoint {out / 'checkpoints' / 'best.ckpt'})")
    return 0
