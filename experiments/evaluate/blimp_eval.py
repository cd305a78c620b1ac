"""BLiMP from a model: each pair's two sentences tokenized PTB-style, compared by total log-probability.

A pair is scored as every minimal pair is (``minimal_pairs.py``: the Scorer's ``total``, log p(x) including the
end of the sentence; for joint models the marginal lower bound over proposals or the beam, so the comparison is
between bounds, as in TG §3.3 and Pushdown). Aggregation (paradigm, phenomenon, overall; ties wrong) is
``blimp.evaluate``. Items are pairs, cached in ``items.jsonl`` by ``UID/k`` (k = the pair's position in its
paradigm file).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from experiments.cli_options import positive_int
from experiments.evaluate.blimp import Pair
from experiments.evaluate.blimp import evaluate as aggregate_pairs
from experiments.evaluate.minimal_pairs import pair_words, score_pairs, words_sha256
from experiments.evaluate.scorer_choice import ChosenScorer, add_arguments, choose
from experiments.evaluate.subcommands import print_result
from lightning_modules.errors import InputError


def default_data_dir(data_dir: str | None = None) -> Path:
    from lightning_modules.data.corpora import resolve_data_dir

    path = resolve_data_dir(data_dir) / "blimp" / "data"
    if not path.is_dir():
        raise InputError("BLiMP is not prepared: run `synbench prepare` or pass --blimp-dir", str(path))
    return path


def select(paradigms: dict[str, list[Pair]], names: list[str] | None) -> dict[str, list[Pair]]:
    if not names:
        return paradigms
    unknown = [n for n in names if n not in paradigms]
    if unknown:
        raise InputError(f"unknown paradigm {unknown[0]!r}", "--paradigms")
    return {n: paradigms[n] for n in sorted(names)}


def evaluate(chosen: ChosenScorer, model_path: str | Path, paradigms: dict[str, list[Pair]], blimp_dir: Path,
             pairs_per_paradigm: int | None, out: str | Path | None = None) -> tuple[dict[str, Any], int]:
    """Score every pair (only those missing from the cache) and aggregate."""
    ordered = {f"{uid}/{k}": p for uid, ps in sorted(paradigms.items()) for k, p in enumerate(ps)}
    pairs = {i: (p.good, p.bad) for i, p in ordered.items()}
    words = pair_words(pairs, {i: f"{p.uid} pair {p.pair_id}" for i, p in ordered.items()})
    settings = {**chosen.settings, "paradigms": len(paradigms), "pairs_per_paradigm": pairs_per_paradigm,
                "pairs": len(pairs)}
    identity = {"task": "blimp", **chosen.identity, "paradigms": sorted(paradigms),
                "pairs_per_paradigm": pairs_per_paradigm, "data_sha256": words_sha256(words)}
    scored = score_pairs(chosen, model_path, "blimp", pairs, words, identity, out)
    by_uid: dict[str, list[float]] = {}
    for r in scored.records:
        by_uid.setdefault(r["id"].rsplit("/", 1)[0], []).extend(scored.logprobs(r))
    uid_of = {tuple(s for p in ps for s in (p.good, p.bad)): uid for uid, ps in paradigms.items()}

    def lookup(sentences: list[str]) -> list[float]:  # blimp.evaluate asks for one paradigm's sentences
        return by_uid[uid_of[tuple(sentences)]]

    metrics, pair_items = aggregate_pairs(paradigms, lookup)
    for r, item in zip(scored.records, pair_items, strict=True):  # compared as -inf (IEEE), written null
        item.update(id=r["id"], words=r["words"], unknown_words=r["unknown_words"], logprob_good=r["logprob_good"],
                    logprob_bad=r["logprob_bad"])
    per = f"{pairs_per_paradigm} pairs per paradigm" if pairs_per_paradigm else "all pairs (1,000 per paradigm)"
    rule = metrics.pop("convention")
    return scored.finish("blimp", chosen, f"BLiMP {metrics['accuracy']:.3f} on {len(paradigms)} paradigms, {per}",
                         metrics, rule, settings, pair_items, identity, {"blimp": blimp_dir})


# -- synbench eval blimp -------------------------------------------------------------------------------------
def add_command(tasks: argparse._SubParsersAction) -> None:
    p = tasks.add_parser(
        "blimp", help="BLiMP accuracy per paradigm, per phenomenon and overall",
        description="BLiMP (Warstadt et al. 2020): a pair is correct when log p(good) > log p(bad) (sentences "
                    "tokenized PTB-style; joint models compare marginal lower bounds). Accuracy per paradigm, "
                    "per phenomenon and overall (mean over paradigms).")
    add_arguments(p)
    p.add_argument("--blimp-dir", metavar="DIR", help="BLiMP data folder (default: staged in $SYNBENCH_DATA)")
    p.add_argument("--paradigms", help="comma-separated paradigm UIDs (default: all 67)")
    p.add_argument("--pairs-per-paradigm", type=positive_int, metavar="K", help="the first K pairs of each paradigm")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from experiments.evaluate.blimp import load_paradigms

    blimp_dir = Path(args.blimp_dir) if args.blimp_dir else default_data_dir(args.data_dir)
    paradigms = load_paradigms(blimp_dir, args.pairs_per_paradigm)
    names = [s.strip() for s in args.paradigms.split(",") if s.strip()] if args.paradigms else None
    selected = select(paradigms, names)
    result, computed = evaluate(choose(args), args.checkpoint, selected, blimp_dir, args.pairs_per_paradigm, args.out)
    return print_result(args.json, result, computed, result["settings"]["pairs"], format_report)


def format_report(result: dict) -> str:
    """Accuracy per paradigm, per phenomenon and overall, then the headline."""
    m = result["metrics"]
    rows = [f"{uid:48} {acc:.4f}" for uid, acc in m["paradigms"].items()]
    rows += [""] + [f"{name:48} {acc:.4f}" for name, acc in m["phenomena"].items()]
    return "\n".join(rows + ["", f"{'overall':48} {m['accuracy']:.4f}", result["headline"]]) + "\n"
