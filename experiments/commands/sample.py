"""``synbench sample CHECKPOINT -n N``: draw trees (or sentences) from a checkpoint whose family samples
(the adapter's ``sampling`` part, capability ``sample``)."""

from __future__ import annotations

import argparse
import json

from experiments.cli_options import natural, positive_float, positive_int


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("sample", help="sample well-formed trees (or sentences) from a checkpoint",
                       description="Ancestral sampling with well-formedness constraints (no closing before an "
                                   "opening, no terminal-free constituent). Prints one bracketed tree per line, "
                                   "or JSON lines with --json.")
    p.add_argument("checkpoint")
    p.add_argument("-n", type=positive_int, default=10, help="number of samples (default 10)")
    p.add_argument("--seed", type=natural, default=0)
    p.add_argument("--temperature", type=positive_float, default=1.0)
    p.add_argument("--max-length", type=positive_int, default=200, help="actions before only closing is allowed")
    p.add_argument("--json", action="store_true", help="JSON lines: tree, words, logprob (nats)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from experiments.families import checkpoint_family
    from lightning_modules.errors import InputError

    adapter, meta = checkpoint_family(args.checkpoint)
    sample = adapter.sampling(meta["config"])
    if sample is None:
        raise InputError(f"a {adapter.name} checkpoint of this config does not sample", str(args.checkpoint))
    for s in sample(args.checkpoint, args.n, args.seed, args.temperature, args.max_length):
        text = str(s.tree) if s.tree is not None else " ".join(s.words)
        if args.json:
            print(json.dumps({"tree": None if s.tree is None else text, "words": s.words, "logprob": s.logprob}))
        else:
            print(text)
    return 0
