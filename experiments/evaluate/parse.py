"""Parse F1 of a model's own parses (``eval parse``): EVALB against the gold trees in the family's view.

A model whose family has the ``parse`` capability gives, per sentence, the best tree its scorer found
(``SentenceScore.best_tree``). The family's ``ParseView`` says how that tree and the gold tree become EVALB
lines (e.g. Pushdown Layers: binarized, unlabelled gold trees and the unlabeled parameter set), which trivial
baseline is scored beside, and which sentences are left out for unknown words (``--unknown``: ``default``,
``exclude``, ``keep``; the paper's own rule by default). Where the view has them, the ceiling of the family's
parser against this gold (``oracle``: its best possible parses, e.g. binary trees against n-ary gold) is scored
beside, and the accuracies of the parser's structural decisions against the gold tree's labels
(``decisions``, pooled over sentences: e.g. SOM's p and p'). ``--method`` picks the family's scoring method
(its default otherwise); ``gold`` feeds the --gold trees' decisions to a family that has that method (SOM:
the accuracies of its predictions under the gold history, Table 2's upper-bound row).

Items are sentences (the parse and its log p(x, y), and the scorer's log p(x) bound), cached in
``items.jsonl``; the parses and the gold lines are also written one per line (``parsed.txt``, ``gold.txt``),
ready for ``synbench evalb``.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from experiments.evaluate.cache import ItemCache, Record, default_out_dir
from experiments.evaluate.evalb import PARAMS, evaluate_lines
from experiments.evaluate.ppl import Sentences
from experiments.evaluate.results import write_results
from experiments.evaluate.scorer_choice import ChosenScorer, add_arguments, choose
from experiments.evaluate.subcommands import add_limit_argument, bracket_report, print_result
from lightning_modules.data.atomic import atomic_write_text
from lightning_modules.errors import InputError
from lightning_modules.numeric import is_number

UNKNOWN = ("default", "exclude", "keep")


def evaluate(chosen: ChosenScorer, model_path: str | Path, gold: Sentences, unknown: str, limit: int | None,
             out: str | Path | None = None) -> tuple[dict[str, Any], int]:
    if "parse" not in chosen.capabilities:
        raise InputError(f"a {chosen.family} model does not parse (its family has no parse capability)",
                         str(model_path))
    view = chosen.adapter.parse_view()
    left_out = (view.excluded(chosen.scorer.model, gold.words, unknown) if view.excluded is not None
                else [False] * len(gold.words))
    kept = [k for k, drop in enumerate(left_out) if not drop]
    if not kept:
        raise InputError(f"every sentence of {gold.name} has unknown words (see --unknown)", "--unknown")
    settings = {**chosen.settings, "gold": gold.name, "sentences": len(kept), "excluded_unknown": len(gold.words)
                - len(kept), "unknown": unknown, "limit": limit, "evalb": f"{view.evalb} ({view.gold_name} gold)"}
    identity = {"task": "parse", **chosen.identity, "gold": gold.name, "limit": limit, "unknown": unknown,
                "data_sha256": gold.checksum()}
    out_dir = Path(out) if out is not None else default_out_dir(model_path, "parse", identity)
    tags = [list(view.tags(t)) for t in gold.trees] if view.tags is not None else gold.tags

    def valid(r: Record) -> bool:
        return (isinstance(r["tree"], str) and is_number(r["logprob"]) and is_number(r["marginal"])
                and (view.decisions is None or isinstance(r.get("decisions"), dict)))

    def compute(wanted: list[str]) -> list[Record]:
        scores = chosen.scorer.score([gold.words[int(i)] for i in wanted])
        out = []
        for i, s in zip(wanted, scores):
            record = {"id": i, "tree": view.parsed(s, tags[int(i)]), "logprob": s.extra["best_logprob"],
                      "marginal": s.total}
            if view.decisions is not None:
                record["decisions"] = {k: list(v) for k, v in view.decisions(s, gold.trees[int(i)]).items()}
            out.append(record)
        return out

    ids = [str(k) for k in kept]
    cache = ItemCache(out_dir, valid, identity)
    cache.fill(ids, compute, chosen.chunk)
    items = cache.ordered(ids)
    gold_lines = [view.gold(gold.trees[k]) for k in kept]
    parsed = [r["tree"] for r in items]

    def evalb(test: list[str]) -> dict:
        result = evaluate_lines(gold_lines, test, PARAMS[view.evalb], f"{gold.name} ({view.gold_name})",
                                "<parsed>").as_dict()
        return {"all": result["all"], "len40": result["len40"]}

    metrics: dict[str, Any] = {"parsed": evalb(parsed)}
    baseline = ""
    if view.baseline is not None:
        metrics[view.baseline_name] = evalb([view.baseline(gold.words[k], tags[k]) for k in kept])
        baseline = f" ({view.baseline_name.replace('_', '-')} {metrics[view.baseline_name]['all']['bracket_f1']})"
    if view.oracle is not None:
        metrics["oracle"] = evalb([view.oracle(gold.trees[k]) for k in kept])
        baseline += f" (ceiling {metrics['oracle']['all']['bracket_f1']})"
    if view.decisions is not None:
        metrics["decisions"] = decision_accuracies([r["decisions"] for r in items])
        baseline += "".join(f", {name} accuracy {d['accuracy']:.3f}" for name, d in metrics["decisions"].items()
                            if d["accuracy"] is not None)
    f1 = metrics["parsed"]["all"]["bracket_f1"]
    headline = (f"{view.evalb} F1 {f1}{baseline} on {len(kept)} sentences of {gold.name} "
                f"({settings['excluded_unknown']} left out for unknown words), {chosen.description}, EVALB "
                f"{view.evalb} vs {view.gold_name} gold")
    metrics["headline"] = headline
    write_results(out_dir, "parse", metrics, view.convention, settings, items, config=identity,
                  data=dict(chosen.data))
    atomic_write_text(out_dir / "parsed.txt", "".join(t + "\n" for t in parsed))
    atomic_write_text(out_dir / "gold.txt", "".join(t + "\n" for t in gold_lines))
    result = {"metrics": metrics, "settings": settings, "convention": view.convention, "headline": headline,
              "out": str(out_dir)}
    return result, cache.computed


def decision_accuracies(rows: list[dict[str, list[int]]]) -> dict[str, dict[str, Any]]:
    """Per decision kind, the hits of every sentence pooled: ``{name: {correct, scored, accuracy}}`` (accuracy
    None when no decision was scored)."""
    out: dict[str, dict[str, Any]] = {}
    for row in rows:
        for name, (correct, scored) in row.items():
            total = out.setdefault(name, {"correct": 0, "scored": 0})
            total["correct"] += int(correct)
            total["scored"] += int(scored)
    for total in out.values():
        total["accuracy"] = total["correct"] / total["scored"] if total["scored"] else None
    return out


# -- synbench eval parse -------------------------------------------------------------------------------------
def add_command(tasks: argparse._SubParsersAction) -> None:
    p = tasks.add_parser(
        "parse", help="the model's own parses scored with EVALB against the gold trees (F1)",
        description="Each sentence's parse is the model's best tree (for a Pushdown-LM, Pushdown Layers §5 / Table "
                    "4: the best tree of the final beam over attachment decisions, subword pieces merged), scored "
                    "with EVALB against the gold trees shaped as the model's family parses (a Pushdown-LM: "
                    "binarized as in training, unlabeled), with the family's trivial baseline (right-branching) "
                    "scored beside. Sentences with unknown words are left out as in "
                    "the paper (by default for SentencePiece vocabularies; --unknown exclude|keep). --method gold "
                    "takes the decisions of the --gold trees where the family has that method (SOM: Table 2's "
                    "\"Predicted tree + Gold tree\" row, the p / p' accuracies of the parsers' predictions under the "
                    "gold history).")
    add_arguments(p, methods=("exact", "beam", "gold"))
    p.add_argument("--gold", required=True, help="gold treebank file or CORPUS/SPLIT (e.g. ptb-sample/test)")
    p.add_argument("--unknown", choices=["default", "exclude", "keep"], default="default",
                   help="sentences with unknown words: exclude (the paper), keep, or default (exclude for "
                        "SentencePiece vocabularies, keep for word vocabularies with unknown-word classes)")
    add_limit_argument(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from experiments.evaluate.rerank import read_gold

    gold: Sentences | None = None

    def gold_trees(sentences: list[list[str]]) -> list[list[Any]]:
        """``--method gold``: the decisions of the --gold trees (read below, before anything is scored)."""
        assert gold is not None
        return gold.gold_source()(sentences)

    chosen = choose(args, gold=gold_trees)
    kind = chosen.adapter.parse_view().gold_kind if "parse" in chosen.capabilities else "constituency"
    gold = read_gold(args.gold, args.limit, args.data_dir, kind)
    result, computed = evaluate(chosen, args.checkpoint, gold, args.unknown, args.limit, args.out)
    return print_result(args.json, result, computed, result["settings"]["sentences"],
                        lambda r: bracket_report(r, ("parsed", "right_branching")))
