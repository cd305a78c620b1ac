"""``synbench eval pairs FILE.jsonl MODEL...``: any file of minimal pairs, scored as BLiMP scores its pairs.

The file is JSON lines in BLiMP's format: each non-blank line an object with the strings ``sentence_good`` and
``sentence_bad`` (other fields are kept as they are), e.g. a multilingual BLiMP or one's own set. Grouping fields
give accuracies per group: ``--group-by KEY,...`` (every pair needs each key, with a string, number or boolean),
by default those of BLiMP's ``UID``, ``field`` and ``linguistics_term`` that the first pair has (then every pair
needs them). Each pair is scored as every minimal pair is (``minimal_pairs.py``: log p(good) > log p(bad), ties
wrong); ``accuracy`` pools all pairs, ``groups`` holds per key the pooled accuracy of each value, ``group_means``
per key the mean over its values (for ``UID``: BLiMP's macro accuracy over paradigms).

Items are the pairs, cached by line number. The file's sha256 is in the task identity and in ``results.json``, so
a changed file is scored again, never served from the cache; in an experiment spec (``{name: pairs, file:
PATH}``) the evaluation plan passes it (``--file PATH --sha256 HEX``), so a changed file is also a new command
to run, and one changed after planning is an error.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from experiments.evaluate.minimal_pairs import accuracy_by, pair_words, score_pairs, words_sha256
from experiments.evaluate.scorer_choice import ChosenScorer, add_arguments, choose
from experiments.evaluate.scorers import HF_PREFIX
from experiments.evaluate.subcommands import print_result
from lightning_modules.data.checksums import check_sha256, file_sha256
from lightning_modules.data.json_input import json_line, json_lines_text
from lightning_modules.errors import InputError

FIELDS = ("sentence_good", "sentence_bad")
DEFAULT_GROUPS = ("UID", "field", "linguistics_term")  # BLiMP's grouping fields, used where the file has them
RULE = ("pair correct iff log p(good) > log p(bad) (ties wrong), as BLiMP; accuracy = pooled over all pairs; "
        "groups: pooled per value of each grouping field; group_means: mean over a field's values")


@dataclass(frozen=True)
class FilePair:
    """One line of a pairs file."""

    line: int
    good: str
    bad: str
    groups: dict[str, str]  # grouping field -> its value as text


def load_pairs(path: str | Path, group_by: Sequence[str] = ()) -> tuple[list[FilePair], tuple[str, ...]]:
    """The pairs of a JSON-lines file and the grouping fields used (``group_by``, else BLiMP's that the first
    pair has); any bad line is an ``InputError`` at its ``FILE:LINE``."""
    path = Path(path)
    lines = json_lines_text(path, "pairs")
    pairs: list[FilePair] = []
    keys: tuple[str, ...] = tuple(group_by)
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        loc = f"{path}:{number}"
        record = json_line(line, loc)
        if not isinstance(record, dict):
            raise InputError("expected a JSON object with sentence_good and sentence_bad", loc)
        if not pairs and not group_by:
            keys = tuple(k for k in DEFAULT_GROUPS if k in record)
        for key in FIELDS:
            if key not in record:
                raise InputError(f"missing field {key!r}", loc)
            if not isinstance(record[key], str):
                raise InputError(f"{key} must be a string, got {record[key]!r}", loc)
        pairs.append(FilePair(number, record["sentence_good"], record["sentence_bad"],
                              {key: _group_value(record, key, loc) for key in keys}))
    if not pairs:
        raise InputError("no pairs (the file is empty)", f"{path}:1")
    return pairs, keys


def _group_value(record: dict[str, Any], key: str, loc: str) -> str:
    """A grouping field's value as text (booleans as JSON writes them); other types are an error at ``loc``."""
    if key not in record:
        raise InputError(f"missing field {key!r} (a grouping field: --group-by, or BLiMP's as the first pair has "
                         "them)", loc)
    value = record[key]
    if isinstance(value, bool):
        return str(value).lower()
    if not isinstance(value, str | int | float):
        raise InputError(f"grouping field {key!r} must be a string, number or boolean, got {value!r}", loc)
    return str(value)


def evaluate(chosen: ChosenScorer, model_path: str | Path, path: Path, pairs: list[FilePair], keys: tuple[str, ...],
             out: str | Path | None = None) -> tuple[dict[str, Any], int]:
    """Score every pair of the file (only those missing from the cache) and aggregate overall and per group."""
    texts = {str(p.line): (p.good, p.bad) for p in pairs}
    words = pair_words(texts, {str(p.line): f"{path}:{p.line}" for p in pairs})
    sha = file_sha256(path)
    settings = {**chosen.settings, "file": str(path), "file_sha256": sha, "pairs": len(pairs), "group_by": list(keys)}
    identity = {"task": "pairs", **chosen.identity, "file_sha256": sha, "data_sha256": words_sha256(words)}
    scored = score_pairs(chosen, model_path, "pairs", texts, words, identity, out)
    items = [{**item, "line": p.line, "groups": p.groups} for p, item in zip(pairs, scored.items(), strict=True)]
    groups = {key: accuracy_by((item["groups"][key], item["correct"]) for item in items) for key in keys}
    accuracy = sum(item["correct"] for item in items) / len(items)
    metrics = {"accuracy": accuracy, "groups": groups,
               "group_means": {key: sum(v.values()) / len(v) for key, v in groups.items()}, "pairs": len(items)}
    return scored.finish("pairs", chosen, f"pairs {accuracy:.3f} on {len(items)} pairs of {path.name}", metrics,
                         RULE, settings, items, identity, {"pairs": path})


# -- synbench eval pairs -------------------------------------------------------------------------------------
def add_command(tasks: argparse._SubParsersAction) -> None:
    p = tasks.add_parser(
        "pairs", help="accuracy on a JSON-lines file of minimal pairs (BLiMP's format), overall and per group",
        description="Minimal pairs from a file (FILE.jsonl: one JSON object per line with sentence_good and "
                    "sentence_bad, as BLiMP's files), scored for each MODEL as BLiMP scores its pairs: correct when "
                    "log p(good) > log p(bad) (PTB tokens; joint models compare marginal lower bounds). Accuracy "
                    "overall and per value of each grouping field (--group-by, default BLiMP's UID, field and "
                    "linguistics_term where the file has them). With --json, one JSON object per MODEL and line.")
    p.add_argument("file", nargs="?", type=Path, metavar="FILE.jsonl", help="the pairs (or --file)")
    add_arguments(p, several_models=True)
    p.add_argument("--file", dest="pairs_file", type=Path, metavar="FILE.jsonl",
                   help="the pairs, named as an option (then every positional argument is a MODEL)")
    p.add_argument("--group-by", action="append", metavar="KEY[,KEY...]",
                   help="grouping fields (repeatable; default: BLiMP's UID, field, linguistics_term as present)")
    p.add_argument("--sha256", metavar="HEX",
                   help="the file's sha256 as the evaluation plan read it: a file changed since is an error")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Score the file for every MODEL in turn (the file read and every model found before the first is scored)."""
    models = [str(m) for m in ([args.file] if args.pairs_file and args.file else []) + list(args.checkpoint)]
    path = args.pairs_file or args.file
    if path is None or not models:
        raise InputError("give the pairs FILE.jsonl and at least one MODEL", "eval pairs")
    if len(models) > 1 and args.out is not None:
        raise InputError("--out names the results folder of one MODEL; give one, or leave --out out", "--out")
    group_by = [k.strip() for given in args.group_by or [] for k in given.split(",") if k.strip()]
    pairs, keys = load_pairs(path, group_by)
    if args.sha256 is not None:
        check_sha256(path, args.sha256)
    for model in models:  # every model's file is there before the first is scored
        if not model.startswith(HF_PREFIX) and not Path(model).is_file():
            raise InputError("model file not found", model)
    for model in models:
        result, computed = evaluate(choose(argparse.Namespace(**{**vars(args), "checkpoint": model})), model, path,
                                    pairs, keys, args.out)
        print_result(args.json, result, computed, len(pairs), format_report)
    return 0


def format_report(result: dict) -> str:
    """Accuracy per value of each grouping field, overall, then the headline."""
    m = result["metrics"]
    rows = []
    for key, values in m["groups"].items():
        rows += [f"{key + ' ' + value:48} {acc:.4f}" for value, acc in values.items()] + [""]
    return "\n".join(rows + [f"{'overall':48} {m['accuracy']:.4f}", result["headline"]]) + "\n"
