"""``synbench evalb GOLD TEST [--param collins|unlabeled] [--json]``: bracket scoring as EVALB does it."""

from __future__ import annotations

import argparse
import json
import sys


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "evalb",
        help="score parses against gold trees with EVALB semantics (one tree per line)",
        description=(
            "Bracket recall/precision/F1, complete match and tagging accuracy with the semantics of EVALB. "
            "--param collins is EVALB/COLLINS.prm (labeled; punctuation ', : `` \\'\\' .', -NONE- and TOP "
            "deleted; ADVP = PRT; len<=40 section counting punctuation but not -NONE-). --param unlabeled "
            "is the same file with LABELED 0. Error sentences (different words or length) and skip "
            "sentences (empty test line) are counted as EVALB counts them, without ever aborting."
        ),
    )
    p.add_argument("gold", help="gold trees, one per line")
    p.add_argument("test", help="parser output, one per line (an empty line is a skipped sentence)")
    p.add_argument("--param", choices=["collins", "unlabeled"], default="collins", help="parameter set")
    p.add_argument("--json", action="store_true", help="print {all, len40, per_sentence} as JSON")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from experiments.evaluate.evalb import PARAMS, evaluate_files, format_report

    result = evaluate_files(args.gold, args.test, PARAMS[args.param])
    n_gold, n_test = result.line_counts
    if n_gold != n_test:
        print(
            f"synbench: warning: {args.gold} has {n_gold} lines and {args.test} has {n_test}; "
            f"scored the first {min(n_gold, n_test)} pairs, as EVALB does",
            file=sys.stderr,
        )
    if args.json:
        json.dump(result.as_dict(), sys.stdout)
        sys.stdout.write("\n")
    else:
        sys.stdout.write(format_report(result))
    return 0
