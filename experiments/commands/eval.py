"""``synbench eval TASK ...``: the evaluation protocol, one sub-command per task.

``sg`` scores SyntaxGym from a file of region surprisals; tasks that need a checkpoint (``ppl``,
``blimp``, SyntaxGym from a model) register here as further sub-commands.
"""

from __future__ import annotations

import argparse
import json
import sys


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("eval", help="evaluate: SyntaxGym (and more tasks)", description=__doc__)
    tasks = p.add_subparsers(dest="task", required=True, metavar="TASK")
    _register_sg(tasks)


def _register_sg(tasks: argparse._SubParsersAction) -> None:
    p = tasks.add_parser(
        "sg",
        help="SyntaxGym accuracy per suite, per circuit and overall from region surprisals",
        description=(
            "Score the SyntaxGym suites of Hu et al. (2020). FILE has one JSON object per line: "
            '{"suite", "item", "condition", "region", "surprisal"} with region surprisals in bits (sums over '
            "the region's words; empty regions may be omitted). An item passes when the suite's first "
            "prediction holds; the overall score is the mean over the paper's 31 suites."
        ),
    )
    p.add_argument("--surprisals", required=True, metavar="FILE", help="region surprisals, JSON lines")
    p.add_argument("--suites-dir", metavar="DIR", help="suite JSON files (default: staged in $SYNBENCH_DATA)")
    p.add_argument("--json", action="store_true", help="print {suites, circuits, score} as JSON")
    p.set_defaults(func=run_sg)


def run_sg(args: argparse.Namespace) -> int:
    from experiments.evaluate.sg import default_suites_dir, load_suites, read_surprisals, score

    suites = load_suites(args.suites_dir or default_suites_dir())
    result = score(suites, read_surprisals(args.surprisals, suites))
    if args.json:
        json.dump(result, sys.stdout)
        sys.stdout.write("\n")
        return 0
    print(f"{'suite':28} {'accuracy':>8} {'all preds':>9}")
    for name, r in result["suites"].items():
        print(f"{name:28} {r['accuracy']:8.4f} {r['accuracy_all_predictions']:9.4f}")
    print()
    for name, acc in result["circuits"].items():
        print(f"{name:28} {'-' if acc is None else format(acc, '8.4f'):>8}")
    overall = result["score"]
    print(f"{'SyntaxGym score (31 suites)':28} {'-' if overall is None else format(overall, '8.4f'):>8}")
    return 0
