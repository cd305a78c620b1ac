"""SyntaxGym from a model: sentences of the suites' conditions -> word surprisals -> region sums -> ``sg.score``.

Each condition's regions are joined with single spaces into one sentence (``sg.condition_text``; empty regions
contribute nothing), as the SyntaxGym tools present a condition to a model. Nothing is appended: a suite
whose last region ends with a period has that period, the others have none (Pushdown and DTG append " ."
to every sentence, which doubles the period of the subordination suites; we do not). The sentence is
tokenized the way the treebank is (``tokenize.py``, PTB rules with character offsets), the Scorer gives each
word log p(w_i | w_<i) in nats, its surprisal is ``-log2 p`` bits, and words are summed into regions by
character offsets (``sg.region_sums``); a token spanning two regions is an error, never guessed. The
end-of-sentence term belongs to no region (canonical SyntaxGym gives ``<eos>`` no surprisal). For joint
models the per-word values are incremental estimates (beam or proposal prefixes), as the convention says.

Items are (suite, item) pairs: every condition's region surprisals, cached in ``items.jsonl``; the region
surprisals are also written in the ``eval sg --surprisals`` format (``surprisals.jsonl``), so the same
scores can be recomputed from the file. A word the model's search gives probability 0 (a word-synchronous beam
that keeps no hypothesis generating it) has surprisal +inf, and so has its region: written ``null`` (with
``"infinite": true`` in ``surprisals.jsonl``; ``infinite.py``), counted in ``zero_probability_words``, and
compared as +inf (IEEE: +inf > x holds for every finite x; a difference inf - inf is NaN, and a comparison with
NaN fails).

``--suites DIR`` scores any folder of SyntaxGym JSON suites the same way (a spec: ``{name: sg, suites: DIR}``):
its ``score`` is the mean over all its suites (suite set ``folder``), the folder's sha256 joins the task identity
and ``results.json``, and the plan passes it (``--suites-sha256``), so a changed folder is scored again.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

from experiments.cli_options import positive_int
from experiments.evaluate.cache import ItemCache, Record, default_out_dir
from experiments.evaluate.infinite import from_json, is_json_value, to_json
from experiments.evaluate.results import write_results
from experiments.evaluate.scorer import Text, score_texts
from experiments.evaluate.scorer_choice import ChosenScorer, add_arguments, choose
from experiments.evaluate.sg import (
    FOLDER_SET,
    SCORE_SET,
    SUITE_SETS,
    Suite,
    SurprisalTable,
    condition_text,
    load_circuits,
    region_sums,
    score,
    suites_folder,
)
from experiments.evaluate.subcommands import print_result
from experiments.evaluate.tokenize import tokenize
from lightning_modules.data.atomic import atomic_write_text
from lightning_modules.data.checksums import check_sha256, file_sha256
from lightning_modules.errors import InputError

LN2 = math.log(2.0)
CONVENTION = ("region surprisal = sum of -log2 p(w_i | w_<i) over the region's words (bits); regions joined "
              "with spaces, no period appended, PTB tokenization with character offsets; the end of sentence "
              "is in no region; item passes when the first prediction holds; score = mean over the suite set "
              "hu2020-31 (" + SUITE_SETS["hu2020-31"] + "); suite_set_scores also over all-34 (" +
              SUITE_SETS["all-34"] + ")")


def select(suites: dict[str, Suite], names: list[str] | None, items_per_suite: int | None) -> dict[str, Suite]:
    """The chosen suites (all by default), each cut to its first ``items_per_suite`` items."""
    if items_per_suite is not None and items_per_suite < 1:
        raise InputError("must be at least 1", "--items-per-suite")
    if names:
        unknown = [n for n in names if n not in suites]
        if unknown:
            raise InputError(f"unknown suite {unknown[0]!r} (known: {', '.join(sorted(suites))})", "--suites")
    chosen = {n: suites[n] for n in (names or sorted(suites))}
    return {n: replace(s, items=s.items[:items_per_suite]) for n, s in chosen.items()}


def condition_words(suite: Suite, item_number: int, condition: str) -> tuple[list[str], list[tuple[int, int]],
                                                                             list[tuple[int, int] | None]]:
    """Words of one condition's sentence, their character spans and the regions' spans."""
    item = next(it for it in suite.items if it.number == item_number)
    text, spans = condition_text(item.conditions[condition])
    tokens = tokenize(text)
    if not tokens:
        raise InputError("the condition has no words", f"suite {suite.name} item {item_number} {condition}")
    return [t.text for t in tokens], [(t.start, t.end) for t in tokens], spans


def evaluate(chosen: ChosenScorer, model_path: str | Path, suites: dict[str, Suite], suites_dir: Path,
             items_per_suite: int | None, out: str | Path | None = None,
             score_set: str = SCORE_SET) -> tuple[dict[str, Any], int]:
    """Region surprisals of every selected item (only those missing from the cache), then the SG scores (the
    overall ``score`` over ``score_set``: ``folder`` for a ``--suites DIR``, whose sha256 joins the identity)."""
    sentences = {(name, it.number, c): condition_words(s, it.number, c)
                 for name, s in suites.items() for it in s.items for c in s.conditions}
    raw = {(name, it.number, c): condition_text(it.conditions[c])[0]
           for name, s in suites.items() for it in s.items for c in s.conditions}
    condition_texts = {key: Text(raw[key], tuple(words), tuple(offsets))
                       for key, (words, offsets, _) in sentences.items()}
    checksum = hashlib.sha256(json.dumps(sorted((f"{k[0]}/{k[1]}/{k[2]}", v[0]) for k, v in sentences.items()))
                              .encode("utf-8")).hexdigest()
    settings = {**chosen.settings, "suites": sorted(suites), "n_suites": len(suites), "score_suite_set": score_set,
                "items_per_suite": items_per_suite, "items": sum(len(s.items) for s in suites.values())}
    identity = {"task": "sg", **chosen.identity, "suites": sorted(suites), "items_per_suite": items_per_suite,
                "data_sha256": checksum}
    if score_set == FOLDER_SET:  # any folder of suites: its files (regions, predictions) decide the items
        settings["suites_dir"] = str(suites_dir)
        identity["suites_sha256"] = file_sha256(suites_dir)
    out_dir = Path(out) if out is not None else default_out_dir(model_path, "sg", identity)
    ids = [f"{name}/{it.number}" for name, s in suites.items() for it in s.items]

    def valid(r: Record) -> bool:
        suite = suites[r["suite"]]
        return (r["id"] == f"{r['suite']}/{r['item']}" and set(r["regions"]) == set(suite.conditions)
                and all(len(v) == len(suite.region_names) and all(is_json_value(x) for x in v)
                        for v in r["regions"].values())
                and isinstance(r["words"], int) and isinstance(r["unknown_words"], int)
                and isinstance(r.get("zero_probability_words", 0), int))

    def compute(wanted: list[str]) -> list[Record]:
        keys = [(name, int(number), c) for i in wanted for name, number in [i.rsplit("/", 1)]
                for c in suites[name].conditions]
        scores = score_texts(chosen.scorer, [condition_texts[k] for k in keys])
        records: dict[str, Record] = {}
        for key, s in zip(keys, scores):
            name, number, condition = key
            _, offsets, spans = sentences[key]
            bits = [-lp / LN2 for lp in s.word_logprobs]
            try:
                sums = region_sums(spans, offsets, bits)
            except ValueError as e:
                raise InputError(str(e), f"suite {name} item {number} condition {condition}") from None
            r = records.setdefault(f"{name}/{number}", {"id": f"{name}/{number}", "suite": name, "item": number,
                                                         "regions": {}, "words": 0, "unknown_words": 0,
                                                         "zero_probability_words": 0})
            r["regions"][condition] = [to_json(v, math.inf) for v in sums]
            r["words"] += len(s.words)
            r["unknown_words"] += s.unknown_words
            r["zero_probability_words"] += sum(lp == -math.inf for lp in s.word_logprobs)
        return [records[i] for i in wanted]

    cache = ItemCache(out_dir, valid, identity)
    cache.fill(ids, compute, max(1, chosen.chunk // 4))  # an item has ~4 conditions
    items = cache.ordered(ids)
    table: SurprisalTable = {}
    for r in items:
        for condition, sums in r["regions"].items():
            for region, value in enumerate(sums, start=1):
                table.setdefault(r["suite"], {})[(r["item"], condition, region)] = from_json(value, math.inf)
    scores = score(suites, table, score_set=score_set)
    words = sum(r["words"] for r in items)
    zero = sum(r.get("zero_probability_words", 0) for r in items)
    oov = sum(r["unknown_words"] for r in items) / words
    paper = load_circuits().paper_suites
    n_paper = sum(name in paper for name in suites)
    per_suite = (f"{items_per_suite} item{'s' if items_per_suite > 1 else ''} per suite" if items_per_suite
                 else "all items")
    sets = ", ".join(f"{_value(v)} ({name})" for name, v in scores["suite_set_scores"].items())
    headline = (f"SG {sets} on {len(suites)} suites ({n_paper} of the paper's 31), {chosen.description}, "
                f"{per_suite}, OOV {oov:.3f}" + (f", {zero} words of probability 0 under the search (surprisal "
                                                  "+inf)" if zero else ""))
    metrics = {**scores, "oov_rate": oov, "words": words, "zero_probability_words": zero, "headline": headline}
    write_results(out_dir, "sg", metrics, CONVENTION, settings, items, config=identity,
                  data={"suites": suites_dir, **chosen.data})
    atomic_write_text(out_dir / "surprisals.jsonl", "".join(
        json.dumps({"suite": r["suite"], "item": r["item"], "condition": c, "region": k, "surprisal": v,
                    **({"infinite": True} if v is None else {})}) + "\n"
        for r in items for c, sums in sorted(r["regions"].items()) for k, v in enumerate(sums, start=1)))
    result = {**scores, "oov_rate": oov, "zero_probability_words": zero, "settings": settings,
              "convention": CONVENTION, "headline": headline, "out": str(out_dir)}
    return result, cache.computed


# -- synbench eval sg ----------------------------------------------------------------------------------------
def add_command(tasks: argparse._SubParsersAction) -> None:
    p = tasks.add_parser(
        "sg",
        help="SyntaxGym accuracy per suite, per circuit and overall (from a model or region surprisals)",
        description=(
            "Score the SyntaxGym suites of Hu et al. (2020), from a model (CHECKPOINT) or from region "
            "surprisals (--surprisals FILE: one JSON object per line, "
            '{"suite", "item", "condition", "region", "surprisal"} with region surprisals in bits, sums over '
            "the region's words; empty regions may be omitted; an infinite surprisal is written "
            '"surprisal": null with "infinite": true). '
            "From a model, each condition's regions are "
            "joined with spaces (no period appended), tokenized PTB-style, and word surprisals are summed "
            "into regions by character offsets. An item passes when the suite's first prediction holds; "
            "the overall score is the mean over the 31 suites of Hu et al.'s analysis (suite set hu2020-31); "
            "the mean over all 34 suites (all-34, the official DTG script's) is reported beside it."
        ),
    )
    add_arguments(p, model_optional=True)
    p.add_argument("--surprisals", metavar="FILE", help="region surprisals, JSON lines (instead of a model)")
    p.add_argument("--suites-dir", metavar="DIR", help="suite JSON files (default: staged in $SYNBENCH_DATA)")
    p.add_argument("--suites", metavar="NAMES|DIR",
                   help="comma-separated suite names (default: all), or a folder of SyntaxGym JSON suites (any "
                        "suites; score = the mean over all of them, suite set 'folder')")
    p.add_argument("--suites-sha256", metavar="HEX",
                   help="the --suites folder's sha256 as the evaluation plan read it: a folder changed since is an "
                        "error")
    p.add_argument("--items-per-suite", type=positive_int, metavar="K", help="the first K items of each suite")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from experiments.evaluate.sg import default_suites_dir, load_suites, read_surprisals

    if (args.checkpoint is None) == (args.surprisals is None):
        raise InputError("give either a CHECKPOINT or --surprisals FILE", "eval sg")
    folder = suites_folder(args.suites)
    if folder is not None and args.suites_dir:
        raise InputError("give a folder of suites either as --suites DIR or as --suites-dir DIR", "--suites")
    suites_dir = folder or (Path(args.suites_dir) if args.suites_dir else default_suites_dir(args.data_dir))
    suites = load_suites(suites_dir)
    if args.suites_sha256 is not None:
        check_sha256(suites_dir, args.suites_sha256)
    score_set = SCORE_SET if folder is None else FOLDER_SET
    if args.surprisals is not None:
        result = score(suites, read_surprisals(args.surprisals, suites), score_set=score_set)
        if args.json:
            json.dump(result, sys.stdout)
            sys.stdout.write("\n")
        else:
            sys.stdout.write(format_report(result))
        return 0
    names = [s.strip() for s in args.suites.split(",") if s.strip()] if args.suites and folder is None else None
    selected = select(suites, names, args.items_per_suite)
    result, computed = evaluate(choose(args), args.checkpoint, selected, suites_dir, args.items_per_suite, args.out,
                                score_set)
    return print_result(args.json, result, computed, result["settings"]["items"],
                        lambda r: format_report(r) + f"OOV rate {r['oov_rate']:.4f}\n{r['headline']}\n")


def format_report(result: dict) -> str:
    """Accuracy per suite (and over all predictions), per circuit, and the overall score."""
    lines = [f"{'suite':28} {'accuracy':>8} {'all preds':>9}"]
    for name, r in result["suites"].items():
        lines.append(f"{name:28} {r['accuracy']:8.4f} {r['accuracy_all_predictions']:9.4f}")
    lines.append("")
    for name, acc in result["circuits"].items():
        lines.append(f"{name:28} {'-' if acc is None else format(acc, '8.4f'):>8}")
    for name, value in result["suite_set_scores"].items():
        lines.append(f"{'SyntaxGym score (' + name + ')':28} {_value(value, '8.4f'):>8}")
    return "\n".join(lines) + "\n"


def _value(value: float | None, spec: str = ".3f") -> str:
    return "-" if value is None else format(value, spec)
