"""SyntaxGym scoring (Hu et al. 2020): suites, region surprisals, predictions, suite/circuit/overall accuracy.

A suite has items; an item has conditions; a condition is a sentence cut into numbered regions. A model
gives each word a surprisal in bits; a region's surprisal is the **sum** over its words (an empty region
is 0), the suites' ``metric: sum``. An item passes when the suite's **first** prediction formula holds on
its region surprisals (what Hu et al. and the Pushdown/DTG evaluators score; ``fgd_hierarchy``'s second
prediction compares surprisals with ``=``); passing *all* predictions is reported too. A suite's accuracy
is the fraction of items that pass, a circuit's the mean of its suites' accuracies, and the overall score
the mean over a named suite set (``SUITE_SETS``): ``score`` over ``hu2020-31``, the 31 suites of Hu et al.'s
analysis; ``suite_set_scores`` over each set, ``all-34`` being the one the official DTG script averages (the
suite -> circuit table ships as package data, ``experiments/data/syntaxgym_circuits.json``, from the paper's
``notebooks/main.py``).
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from experiments.evaluate.sg_formula import Formula, FormulaError, evaluate, parse_formula, regions
from lightning_modules.data.json_input import checked_json, json_line, json_lines_text
from lightning_modules.errors import InputError


@dataclass(frozen=True)
class Item:
    number: int
    conditions: dict[str, tuple[str, ...]]  # condition -> region contents, region 1 first

    def is_empty(self, condition: str, region: int) -> bool:
        return not self.conditions[condition][region - 1].strip()


@dataclass(frozen=True)
class Suite:
    name: str
    region_names: tuple[str, ...]  # region 1 first
    conditions: tuple[str, ...]
    predictions: tuple[Formula, ...]
    formulas: tuple[str, ...]  # the predictions as written in the suite file
    items: tuple[Item, ...]


# -- loading ------------------------------------------------------------------------------------------
def load_suite(path: str | Path) -> Suite:
    """Read and validate one suite JSON file (``InputError`` at ``FILE:LINE`` with the offending key: the line
    where the object or list holding the problem starts)."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as e:
        raise InputError(f"cannot read suite: {e.strerror or e}", str(path)) from None
    except UnicodeDecodeError as e:
        raise InputError(f"suite is not UTF-8: {e}", str(path)) from None
    return checked_json(text, str(path), _suite)


def _suite(data: Any, where: Callable[[Any], str]) -> Suite:
    """A parsed suite validated; ``where(node)``: the location of a part of it (``json_input.checked_json``)."""

    def need(cond: bool, key: str, message: str, node: Any = data) -> None:
        if not cond:
            raise InputError(f"{key}: {message}", where(node))

    need(isinstance(data, dict), "(top level)", "a suite is a JSON object")
    for key in ("meta", "region_meta", "predictions", "items"):
        need(key in data, key, "missing key")
    meta = data["meta"]
    need(isinstance(meta, dict) and isinstance(meta.get("name"), str), "meta.name", "missing suite name", meta)
    need(meta.get("metric", "sum") == "sum", "meta.metric",
         f"metric {meta.get('metric')!r} is not supported (region surprisals are sums)", meta)
    region_meta = data["region_meta"]
    need(isinstance(region_meta, dict) and region_meta, "region_meta", "expected {\"1\": name, ...}", region_meta)
    n_regions = len(region_meta)
    need(sorted(region_meta) == sorted(str(i) for i in range(1, n_regions + 1)), "region_meta",
         "region numbers must be 1..N", region_meta)
    region_names = tuple(str(region_meta[str(i)]) for i in range(1, n_regions + 1))

    need(isinstance(data["predictions"], list) and data["predictions"], "predictions", "no predictions",
         data["predictions"])
    predictions, formulas = [], []
    for i, pred in enumerate(data["predictions"]):
        key = f"predictions[{i}]"
        is_formula = isinstance(pred, dict) and pred.get("type") == "formula"
        need(is_formula and isinstance(pred.get("formula"), str), key, "expected {type: formula, formula}", pred)
        try:
            predictions.append(parse_formula(pred["formula"]))
        except FormulaError as e:
            need(False, key, str(e), pred)
        formulas.append(pred["formula"])

    need(isinstance(data["items"], list) and data["items"], "items", "no items", data["items"])
    items: list[Item] = []
    condition_names: tuple[str, ...] | None = None
    for i, raw in enumerate(data["items"]):
        key = f"items[{i}]"
        need(isinstance(raw, dict) and type(raw.get("item_number")) is int, key, "missing item_number", raw)
        need(isinstance(raw.get("conditions"), list) and raw["conditions"], key, "no conditions", raw)
        conditions: dict[str, tuple[str, ...]] = {}
        for j, cond in enumerate(raw["conditions"]):
            ckey = f"{key}.conditions[{j}]"
            need(isinstance(cond, dict) and isinstance(cond.get("condition_name"), str), ckey,
                 "missing condition_name", cond)
            name = cond["condition_name"]
            need(name not in conditions, ckey, f"duplicate condition {name!r}", cond)
            regs = cond.get("regions")
            need(isinstance(regs, list) and len(regs) == n_regions, ckey, f"expected {n_regions} regions", cond)
            need(all(isinstance(r, dict) and isinstance(r.get("content"), str) for r in regs), ckey,
                 "every region needs a string content", regs)
            need([r.get("region_number") for r in regs] == list(range(1, n_regions + 1)), ckey,
                 f"region_number must run 1..{n_regions} in order", regs)
            conditions[name] = tuple(r["content"] for r in regs)
        names = tuple(sorted(conditions))
        need(condition_names in (None, names), key, "conditions differ from the first item's", raw)
        condition_names = names
        items.append(Item(raw["item_number"], conditions))
    numbers = [it.number for it in items]
    need(len(set(numbers)) == len(numbers), "items", "duplicate item_number", data["items"])
    assert condition_names is not None
    for i, formula in enumerate(predictions):
        pred = data["predictions"][i]
        for condition, region in regions(formula):
            need(condition in condition_names, f"predictions[{i}]", f"unknown condition {condition!r}", pred)
            need(region is None or 1 <= region <= n_regions, f"predictions[{i}]", f"no region {region}", pred)
    return Suite(
        meta["name"], region_names, condition_names, tuple(predictions), tuple(formulas), tuple(items)
    )


def load_suites(directory: str | Path) -> dict[str, Suite]:
    """All ``*.json`` suites of a folder, by suite name."""
    directory = Path(directory)
    if not directory.is_dir():
        raise InputError("suites folder not found", str(directory))
    suites: dict[str, Suite] = {}
    for path in sorted(directory.glob("*.json")):
        suite = load_suite(path)
        if suite.name in suites:
            raise InputError(f"a second suite named {suite.name!r}", str(path))
        suites[suite.name] = suite
    if not suites:
        raise InputError("no *.json suites in the folder", str(directory))
    return suites


def default_suites_dir(data_dir: str | Path | None = None) -> Path:
    """Where ``synbench prepare`` stages the suites: ``DATA_DIR/syntaxgym_hu2020/json``."""
    from lightning_modules.data.corpora import resolve_data_dir

    suites = resolve_data_dir(data_dir) / "syntaxgym_hu2020" / "json"
    if not suites.is_dir():
        raise InputError("SyntaxGym suites are not prepared: run `synbench prepare` or pass --suites-dir",
                         str(suites))
    return suites


SCORE_SET = "hu2020-31"  # the set of ``score``, the overall number
SUITE_SETS = {
    "hu2020-31": "the 31 suites of Hu et al. (2020)'s analysis (their circuits; fgd-embed3, fgd-embed4 and "
                 "nn-nv-rpl left out)",
    "all-34": "all 34 suites of Hu et al.'s release: what the official DTG script (beam_search_standard.py) "
              "averages, every file of its test_suites/json",
}
FOLDER_SET = "folder"  # the set of ``score`` for ``--suites DIR``: every suite of that folder


def suites_folder(value: object) -> Path | None:
    """The folder of suite files that a ``--suites`` value (a spec's ``suites:``) names, else None: a string naming
    an existing folder, or holding a path separator, is a folder of any SyntaxGym suites; any other string is a
    comma-separated list of suite names (in a spec, also a list of names)."""
    if not isinstance(value, str):
        return None
    return Path(value) if Path(value).is_dir() or "/" in value or os.sep in value else None


@dataclass(frozen=True)
class Circuits:
    """The suite -> circuit table of Hu et al. (2020), the suites of the paper's overall score and all the
    suites of the release (``all_suites``; empty: the circuits' suites only)."""

    circuits: dict[str, tuple[str, ...]]  # circuit -> suites
    all_suites: tuple[str, ...] = ()

    @property
    def paper_suites(self) -> tuple[str, ...]:
        return tuple(sorted(s for suites in self.circuits.values() for s in suites))

    def suite_sets(self) -> dict[str, tuple[str, ...]]:
        """Each named suite set (``SUITE_SETS``) -> its suites."""
        return {"hu2020-31": self.paper_suites, "all-34": tuple(sorted(self.all_suites or self.paper_suites))}


def load_circuits() -> Circuits:
    """The project's copy of the circuit table (package data, the same file ``prepare`` stages)."""
    text = resources.files("experiments").joinpath("data/syntaxgym_circuits.json").read_text(encoding="utf-8")
    circuits: dict[str, list[str]] = {}
    table = json.loads(text)["suites"]
    for suite, info in sorted(table.items()):
        if not info["excluded_in_paper_analysis"]:
            circuits.setdefault(info["circuit"], []).append(suite)
    return Circuits({name: tuple(suites) for name, suites in circuits.items()}, tuple(sorted(table)))


# -- region surprisals ---------------------------------------------------------------------------------
def condition_text(contents: Sequence[str]) -> tuple[str, list[tuple[int, int] | None]]:
    """The sentence of a condition and each region's character span in it (``None`` for empty regions).

    The sentence is the space-join of the non-empty regions, each stripped of surrounding spaces, so a
    model's words can be assigned to regions by character offsets.
    """
    parts, spans, pos = [], [], 0
    for content in contents:
        text = content.strip()
        if not text:
            spans.append(None)
            continue
        if parts:
            pos += 1
        spans.append((pos, pos + len(text)))
        parts.append(text)
        pos += len(text)
    return " ".join(parts), spans


def region_sums(
    spans: Sequence[tuple[int, int] | None],
    word_offsets: Sequence[tuple[int, int]],
    surprisals: Sequence[float],
) -> list[float]:
    """Sum word surprisals into regions by character offsets (empty regions get 0).

    Every word must lie inside one region; a word that straddles a boundary is an error (the tokenizer
    never joins across the spaces between regions).
    """
    if len(word_offsets) != len(surprisals):
        raise ValueError(f"{len(word_offsets)} words but {len(surprisals)} surprisals")
    sums = [0.0] * len(spans)
    for (start, end), s in zip(word_offsets, surprisals):
        for r, span in enumerate(spans):
            if span is not None and span[0] <= start and end <= span[1]:
                sums[r] += s
                break
        else:
            raise ValueError(f"word at characters {start}-{end} is not inside one region")
    return sums


# -- surprisal files ----------------------------------------------------------------------------------
SurprisalTable = dict[str, dict[tuple[int, str, int], float]]  # suite -> (item, condition, region) -> bits


def read_surprisals(path: str | Path, suites: dict[str, Suite]) -> SurprisalTable:
    """Read ``{"suite", "item", "condition", "region", "surprisal"}`` JSON lines, checked against the suites.

    A surprisal of +inf (a word of probability 0) is ``null`` with ``"infinite": true``. Every suite that appears
    must be complete: each non-empty region of each condition of each item needs a
    value (an empty region may be omitted and counts 0). Errors name ``FILE:LINE`` or the missing region.
    """
    path = Path(path)
    lines = json_lines_text(path, "surprisals")
    table: SurprisalTable = {}
    items = {name: {it.number: it for it in suite.items} for name, suite in suites.items()}
    for lineno, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        loc = f"{path}:{lineno}"
        rec = json_line(line, loc)
        if not isinstance(rec, dict) or not {"suite", "item", "condition", "region", "surprisal"} <= set(rec):
            raise InputError("expected {\"suite\", \"item\", \"condition\", \"region\", \"surprisal\"}", loc)
        suite, item, condition, region, value = (rec[k] for k in ("suite", "item", "condition", "region",
                                                                   "surprisal"))
        if suite not in suites:
            raise InputError(f"unknown suite {suite!r}", loc)
        if type(item) is not int or item not in items[suite]:
            raise InputError(f"suite {suite} has no item {item!r}", loc)
        if condition not in items[suite][item].conditions:
            raise InputError(f"suite {suite} has no condition {condition!r}", loc)
        if type(region) is not int or not 1 <= region <= len(suites[suite].region_names):
            raise InputError(f"suite {suite} has no region {region!r}", loc)
        if value is None and rec.get("infinite") is True:  # probability 0 (infinite.py)
            value = math.inf
        elif type(value) not in (int, float) or not math.isfinite(value):
            raise InputError(f"surprisal must be a number, finite (+inf: null with \"infinite\": true), got {value!r}",
                             loc)
        key = (item, condition, region)
        cell = table.setdefault(suite, {})
        if key in cell:
            raise InputError(f"duplicate surprisal for {suite} item {item} {condition} region {region}", loc)
        cell[key] = float(value)
    if not table:
        raise InputError("no surprisals in the file", str(path))
    for name, cell in table.items():
        for it in suites[name].items:
            for condition in suites[name].conditions:
                for region in range(1, len(suites[name].region_names) + 1):
                    if (it.number, condition, region) not in cell and not it.is_empty(condition, region):
                        raise InputError(
                            f"missing surprisal for suite {name} item {it.number} condition {condition} "
                            f"region {region} (only empty regions may be omitted)",
                            str(path),
                        )
    return table


# -- scoring ------------------------------------------------------------------------------------------
def item_surprisals(suite: Suite, item: Item, cell: dict[tuple[int, str, int], float]) -> dict:
    """``{(condition, region): surprisal}`` of one item, every region of every condition (empty = 0)."""
    return {
        (condition, region): cell.get((item.number, condition, region), 0.0)
        for condition in suite.conditions
        for region in range(1, len(suite.region_names) + 1)
    }


def score_suite(suite: Suite, cell: dict[tuple[int, str, int], float]) -> dict:
    """Per-item pass/fail (first prediction, and all predictions) and the suite accuracies."""
    first, every = {}, {}
    for item in suite.items:
        values = item_surprisals(suite, item, cell)
        results = [bool(evaluate(p, values)) for p in suite.predictions]
        first[str(item.number)] = results[0]
        every[str(item.number)] = all(results)
    return {
        "accuracy": sum(first.values()) / len(first),
        "items": first,
        "accuracy_all_predictions": sum(every.values()) / len(every),
        "items_all_predictions": every,
    }


def score(suites: dict[str, Suite], table: SurprisalTable, circuits: Circuits | None = None,
          score_set: str = SCORE_SET) -> dict:
    """The ``synbench eval sg --json`` object: ``{"suites", "circuits", "score", "score_suite_set",
    "suite_set_scores"}``: ``score`` is the mean over ``score_suite_set`` (``hu2020-31``; ``folder`` for the
    suites of a ``--suites DIR``: every suite scored), ``suite_set_scores`` the mean over each named set
    (``SUITE_SETS``).

    Only suites present in ``table`` are scored; a circuit whose suites are not all scored, and a set's score
    unless all its suites are, are ``null`` (a partial run is never mistaken for one).
    """
    circuits = circuits or load_circuits()
    scored = {name: score_suite(suites[name], table[name]) for name in sorted(table)}
    by_circuit = {
        name: _mean([scored[s]["accuracy"] for s in members]) if all(s in scored for s in members) else None
        for name, members in circuits.circuits.items()
    }
    by_set = {name: _mean([scored[s]["accuracy"] for s in members]) if all(s in scored for s in members) else None
              for name, members in circuits.suite_sets().items()}
    if score_set == FOLDER_SET:
        by_set[FOLDER_SET] = _mean(r["accuracy"] for r in scored.values())
    return {"suites": scored, "circuits": by_circuit, "score": by_set[score_set], "score_suite_set": score_set,
            "suite_set_scores": by_set}


def _mean(values: Iterable[float]) -> float:
    values = list(values)
    return sum(values) / len(values)
