"""BLiMP from a model: each pair's two sentences tokenized PTB-style, compared by total log-probability.

A sentence's score is the Scorer's ``total``: log p(x) including the end of the sentence (exact for string
models; for joint models the marginal lower bound over proposals or the beam, so the comparison is between
bounds, as in TG §3.3 and Pushdown). Aggregation (paradigm, phenomenon, overall; ties wrong) is
``blimp.evaluate``. Items are pairs, cached in ``items.jsonl`` by ``UID/k`` (k = the pair's position in its
paradigm file).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
from pathlib import Path
from typing import Any

from experiments.cli_options import positive_int
from experiments.evaluate.blimp import Pair
from experiments.evaluate.blimp import evaluate as aggregate_pairs
from experiments.evaluate.cache import ItemCache, Record, default_out_dir
from experiments.evaluate.infinite import from_json, is_json_value, to_json
from experiments.evaluate.results import write_results
from experiments.evaluate.scorer import Text, score_choices
from experiments.evaluate.scorer_choice import ChosenScorer, add_arguments, choose
from experiments.evaluate.subcommands import print_result
from experiments.evaluate.tokenize import tokenize
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


def words_of(sentence: str, location: str) -> list[str]:
    words = [t.text for t in tokenize(sentence)]
    if not words:
        raise InputError("empty sentence", location)
    return words


def text_of(sentence: str, words: list[str]) -> Text:
    """The raw sentence with its PTB tokens' character spans (text-reading scorers read the raw text)."""
    return Text(sentence, tuple(words), tuple((t.start, t.end) for t in tokenize(sentence)))


def evaluate(chosen: ChosenScorer, model_path: str | Path, paradigms: dict[str, list[Pair]], blimp_dir: Path,
             pairs_per_paradigm: int | None, out: str | Path | None = None) -> tuple[dict[str, Any], int]:
    """Score every pair (only those missing from the cache) and aggregate."""
    pairs = {f"{uid}/{k}": p for uid, ps in sorted(paradigms.items()) for k, p in enumerate(ps)}
    words = {i: (words_of(p.good, f"{p.uid} pair {p.pair_id} good"), words_of(p.bad, f"{p.uid} pair {p.pair_id} bad"))
             for i, p in pairs.items()}
    checksum = hashlib.sha256(json.dumps(sorted(words.items())).encode("utf-8")).hexdigest()
    settings = {**chosen.settings, "paradigms": len(paradigms), "pairs_per_paradigm": pairs_per_paradigm,
                "pairs": len(pairs)}
    identity = {"task": "blimp", **chosen.identity, "paradigms": sorted(paradigms),
                "pairs_per_paradigm": pairs_per_paradigm, "data_sha256": checksum}
    out_dir = Path(out) if out is not None else default_out_dir(model_path, "blimp", identity)
    ids = list(pairs)

    def valid(r: Record) -> bool:
        good, bad = words[r["id"]]
        return (is_json_value(r["logprob_good"]) and is_json_value(r["logprob_bad"])
                and r["words"] == len(good) + len(bad)
                and isinstance(r["unknown_words"], int))

    def compute(wanted: list[str]) -> list[Record]:
        texts = [text_of(sentence, w) for i in wanted for sentence, w in zip((pairs[i].good, pairs[i].bad), words[i])]
        scores = score_choices(chosen.scorer, texts)
        out = []
        for k, i in enumerate(wanted):
            good, bad = scores[2 * k], scores[2 * k + 1]
            out.append({"id": i, "logprob_good": to_json(good.total, -math.inf),
                        "logprob_bad": to_json(bad.total, -math.inf),
                        "words": len(good.words) + len(bad.words),
                        "unknown_words": good.unknown_words + bad.unknown_words})
        return out

    cache = ItemCache(out_dir, valid, identity)
    cache.fill(ids, compute, max(1, chosen.chunk // 2))
    records = cache.ordered(ids)
    by_uid: dict[str, list[float]] = {}
    for r in records:
        by_uid.setdefault(r["id"].rsplit("/", 1)[0], []).extend(
            [from_json(r["logprob_good"], -math.inf), from_json(r["logprob_bad"], -math.inf)])
    uid_of = {tuple(s for p in ps for s in (p.good, p.bad)): uid for uid, ps in paradigms.items()}

    def lookup(sentences: list[str]) -> list[float]:  # blimp.evaluate asks for one paradigm's sentences
        return by_uid[uid_of[tuple(sentences)]]

    metrics, pair_items = aggregate_pairs(paradigms, lookup)
    for r, item in zip(records, pair_items, strict=True):  # compared as -inf (IEEE), written null
        item.update(id=r["id"], words=r["words"], unknown_words=r["unknown_words"], logprob_good=r["logprob_good"],
                    logprob_bad=r["logprob_bad"])
    zero = sum((r["logprob_good"] is None) + (r["logprob_bad"] is None) for r in records)
    words_total = sum(r["words"] for r in records)
    oov = sum(r["unknown_words"] for r in records) / words_total
    per = f"{pairs_per_paradigm} pairs per paradigm" if pairs_per_paradigm else "all pairs (1,000 per paradigm)"
    headline = (f"BLiMP {metrics['accuracy']:.3f} on {len(paradigms)} paradigms, {per}, {chosen.description}, "
                f"OOV {oov:.3f}" + (f", {zero} sentences of probability 0 under the search" if zero else ""))
    convention = metrics.pop("convention") + "; log p(x) includes the end of the sentence" + (
        " (joint models: marginal lower bounds)" if chosen.joint else "")
    metrics.update(oov_rate=oov, words=words_total, zero_probability_sentences=zero, headline=headline)
    write_results(out_dir, "blimp", metrics, convention, settings, pair_items, config=identity,
                  data={"blimp": blimp_dir, **chosen.data})
    result = {"metrics": metrics, "settings": settings, "convention": convention, "headline": headline,
              "out": str(out_dir)}
    return result, cache.computed


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
