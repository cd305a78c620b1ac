"""Marvin & Linzen (2018), targeted syntactic evaluation: minimal pairs of 15 constructions, accuracy per construction.

The data are the EMNLP 2018 templates that ``synbench prepare`` stages as JSON
(``DATA/marvin_linzen_2018/templates_json/TEMPLATE.json``: ``{condition: [[grammatical, ungrammatical], ...]}``;
the NPI templates hold triples ``[grammatical, intrusive, ungrammatical]``: "no authors that the guards like have
ever...", "the authors that no guards like have ever...", "most authors that the guards like have ever...").
A construction is a template with its animacy suffix (``_anim``, ``_inanim``) dropped, as the official
``analyze_results.py`` joins them: the 15 rows of the paper's table (``CONSTRUCTIONS``: 10 of subject-verb
agreement, 3 of reflexive anaphora, 2 of negative polarity items).

A tuple gives the pair (grammatical, ungrammatical); an NPI triple gives two, the grammatical sentence against
the intrusive licensor and against the unlicensed sentence (comparisons ``intrusive`` and ``ungrammatical``; the
official analysis reports both, and a third between the two bad sentences that tests no preference for the
grammatical one). Pairs are scored as every minimal pair is (``minimal_pairs.py``: whole sentences, the
official ``full_sent`` analysis; correct when log p(good) > log p(bad), ties wrong). A construction's accuracy
pools its pairs (the official per-construction accuracy, animacy variants joined); a phenomenon's is the mean
over its constructions and ``accuracy`` the mean over all constructions. ``pairs_per_construction K`` keeps K
tuples of each construction, taken in turn from each of its (template, condition) cells (the first of every
cell, then the second...), so a small subset still covers singular and plural, animate and inanimate. Items are
the pairs, cached by ``TEMPLATE/CONDITION/K/COMPARISON``.
"""

from __future__ import annotations

import argparse
import itertools
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from experiments.cli_options import positive_int
from experiments.evaluate.minimal_pairs import accuracy_by, pair_words, score_pairs, words_sha256
from experiments.evaluate.scorer_choice import ChosenScorer, add_arguments, choose
from experiments.evaluate.subcommands import print_result
from lightning_modules.data.json_input import checked_json
from lightning_modules.errors import InputError

# construction -> (phenomenon, the paper's row), in the paper's order
CONSTRUCTIONS = {
    "simple_agrmt": ("agreement", "Simple"),
    "sent_comp": ("agreement", "In a sentential complement"),
    "vp_coord": ("agreement", "Short VP coordination"),
    "long_vp_coord": ("agreement", "Long VP coordination"),
    "prep": ("agreement", "Across a prepositional phrase"),
    "subj_rel": ("agreement", "Across a subject relative clause"),
    "obj_rel_across": ("agreement", "Across an object relative clause"),
    "obj_rel_no_comp_across": ("agreement", "Across an object relative (no that)"),
    "obj_rel_within": ("agreement", "In an object relative clause"),
    "obj_rel_no_comp_within": ("agreement", "In an object relative (no that)"),
    "simple_reflexives": ("reflexives", "Simple"),
    "reflexive_sent_comp": ("reflexives", "In a sentential complement"),
    "reflexives_across": ("reflexives", "Across a relative clause"),
    "simple_npi": ("npi", "Simple"),
    "npi_across": ("npi", "Across a relative clause"),
}
COMPARISONS = {2: ("ungrammatical",), 3: ("intrusive", "ungrammatical")}  # tuple length -> its bad sentences
RULE = ("pair correct iff log p(grammatical) > log p(ungrammatical) (ties wrong), whole sentences; an NPI triple "
        "gives two pairs (grammatical vs intrusive licensor, grammatical vs unlicensed); construction accuracy = "
        "pooled over its pairs (animacy variants joined); phenomenon and overall accuracy = mean over "
        "constructions")


@dataclass(frozen=True)
class Case:
    """One test case of a template: the grammatical sentence first."""

    construction: str
    template: str
    condition: str
    index: int  # its position in the condition's list
    sentences: tuple[str, ...]

    def pairs(self) -> dict[str, tuple[str, str]]:
        """Its pairs by item id: the grammatical sentence against each bad one."""
        return {f"{self.template}/{self.condition}/{self.index}/{comparison}": (self.sentences[0], bad)
                for comparison, bad in zip(COMPARISONS[len(self.sentences)], self.sentences[1:], strict=True)}


def construction_of(template: str) -> str:
    """The construction of a template: its name without the animacy suffix."""
    for suffix in ("_inanim", "_anim"):
        if template.endswith(suffix):
            return template[: -len(suffix)]
    return template


def default_data_dir(data_dir: str | None = None) -> Path:
    """Where ``synbench prepare`` stages the templates."""
    from lightning_modules.data.corpora import resolve_data_dir

    path = resolve_data_dir(data_dir) / "marvin_linzen_2018" / "templates_json"
    if not path.is_dir():
        raise InputError("Marvin & Linzen is not prepared: run `synbench prepare` or pass --templates-dir", str(path))
    return path


def load_template(path: Path) -> dict[str, list[tuple[str, ...]]]:
    """One template file: condition -> its tuples; a malformed one is an ``InputError`` at its ``FILE:LINE``."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise InputError(f"cannot read template: {e}", str(path)) from None
    return checked_json(text, str(path), _conditions)


def _conditions(data: Any, where: Callable[[Any], str]) -> dict[str, list[tuple[str, ...]]]:
    """A parsed template checked (``where(node)``: the location of a bad part) as condition -> tuples."""
    if not isinstance(data, dict) or not data:
        raise InputError("a template is a JSON object {condition: [[grammatical, ungrammatical], ...]}", where(data))
    for condition, cases in data.items():
        if not isinstance(cases, list) or not cases:
            raise InputError(f"condition {condition!r}: expected a list of sentence tuples", where(cases))
        for case in cases:
            if not (isinstance(case, list) and len(case) in COMPARISONS and all(isinstance(s, str) for s in case)):
                raise InputError(f"condition {condition!r}: expected [grammatical, ungrammatical] or an NPI triple, "
                                 f"got {case!r}", where(case))
    return {condition: [tuple(case) for case in cases] for condition, cases in data.items()}


def template_files(directory: str | Path) -> dict[str, list[Path]]:
    """The template files of a folder by construction (the paper's order, then any other by name)."""
    directory = Path(directory)
    if not directory.is_dir():
        raise InputError("Marvin & Linzen templates folder not found", str(directory))
    files: dict[str, list[Path]] = {}
    for path in sorted(directory.glob("*.json")):
        files.setdefault(construction_of(path.stem), []).append(path)
    if not files:
        raise InputError("no *.json templates in the folder", str(directory))
    order = [*CONSTRUCTIONS, *sorted(set(files) - set(CONSTRUCTIONS))]
    return {name: files[name] for name in order if name in files}


def load_cases(directory: str | Path, constructions: list[str] | None = None,
               per_construction: int | None = None) -> dict[str, list[Case]]:
    """The cases of the chosen constructions (all by default), each cut to ``per_construction`` taken in turn
    from its (template, condition) cells."""
    files = template_files(directory)
    unknown = [c for c in constructions or [] if c not in files]
    if unknown:
        raise InputError(f"unknown construction {unknown[0]!r} (known: {', '.join(files)})", "--constructions")
    chosen: dict[str, list[Case]] = {}
    for name in constructions or files:
        cells = [(path.stem, condition, cases) for path in files[name]
                 for condition, cases in load_template(path).items()]
        turns = (Case(name, stem, condition, k, cases[k]) for k in range(max(len(cell[2]) for cell in cells))
                 for stem, condition, cases in cells if k < len(cases))  # built lazily: a demo takes one
        chosen[name] = list(itertools.islice(turns, per_construction))
    return chosen


def evaluate(chosen: ChosenScorer, model_path: str | Path, cases: dict[str, list[Case]], data_dir: Path,
             per_construction: int | None, out: str | Path | None = None) -> tuple[dict[str, Any], int]:
    """Score every pair (only those missing from the cache) and aggregate per construction, phenomenon, overall."""
    of_pair = {i: (case, i.rsplit("/", 1)[1]) for cs in cases.values() for case in cs for i in case.pairs()}
    texts = {i: pair for cs in cases.values() for case in cs for i, pair in case.pairs().items()}
    words = pair_words(texts, {i: f"{case.template} {case.condition} #{case.index}" for i, (case, _) in
                               of_pair.items()})
    settings = {**chosen.settings, "constructions": list(cases), "pairs_per_construction": per_construction,
                "pairs": len(texts)}
    identity = {"task": "marvin-linzen", **chosen.identity, "constructions": list(cases),
                "pairs_per_construction": per_construction, "data_sha256": words_sha256(words)}
    scored = score_pairs(chosen, model_path, "marvin-linzen", texts, words, identity, out)
    items = [{**item, "construction": of_pair[item["id"]][0].construction, "comparison": of_pair[item["id"]][1]}
             for item in scored.items()]
    by_construction = accuracy_by((item["construction"], item["correct"]) for item in items)
    phenomena: dict[str, list[float]] = {}
    for name, accuracy in by_construction.items():
        phenomena.setdefault(CONSTRUCTIONS.get(name, ("other",))[0], []).append(accuracy)
    comparisons = {name: accuracy_by((item["comparison"], item["correct"]) for item in items
                                     if item["construction"] == name) for name in by_construction}
    accuracy = sum(by_construction.values()) / len(by_construction)
    per = f"{per_construction} cases per construction" if per_construction else "all cases"
    metrics = {"accuracy": accuracy, "constructions": by_construction,
               "phenomena": {name: sum(v) / len(v) for name, v in phenomena.items()},
               "comparisons": {name: c for name, c in comparisons.items() if len(c) > 1}, "pairs": len(items)}
    headline = f"Marvin & Linzen {accuracy:.3f} on {len(cases)} constructions, {per} ({len(items)} pairs)"
    return scored.finish("marvin-linzen", chosen, headline, metrics, RULE, settings, items, identity,
                         {"marvin_linzen": data_dir})


# -- synbench eval marvin-linzen -----------------------------------------------------------------------------
def add_command(tasks: argparse._SubParsersAction) -> None:
    p = tasks.add_parser(
        "marvin-linzen", help="Marvin & Linzen (2018) accuracy per construction, per phenomenon and overall",
        description="Marvin & Linzen (2018): minimal pairs of 15 constructions (subject-verb agreement, reflexive "
                    "anaphora, NPIs; animate and inanimate templates joined). A pair is correct when log p(good) "
                    "> log p(bad) over whole sentences (PTB tokens; joint models compare marginal lower bounds); "
                    "an NPI triple gives two pairs. Accuracy per construction (pooled), per phenomenon and "
                    "overall (means over constructions).")
    add_arguments(p)
    p.add_argument("--templates-dir", metavar="DIR", help="template JSON files (default: staged in $SYNBENCH_DATA)")
    p.add_argument("--constructions", help=f"comma-separated constructions (default: all: {', '.join(CONSTRUCTIONS)})")
    p.add_argument("--pairs-per-construction", type=positive_int, metavar="K",
                   help="K cases of each construction, in turn from each of its conditions")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """``synbench eval marvin-linzen``: the chosen constructions' cases scored and aggregated."""
    data_dir = Path(args.templates_dir) if args.templates_dir else default_data_dir(args.data_dir)
    names = [s.strip() for s in args.constructions.split(",") if s.strip()] if args.constructions else None
    cases = load_cases(data_dir, names, args.pairs_per_construction)
    result, computed = evaluate(choose(args), args.checkpoint, cases, data_dir, args.pairs_per_construction, args.out)
    return print_result(args.json, result, computed, result["settings"]["pairs"], format_report)


def format_report(result: dict) -> str:
    """Accuracy per construction (with the paper's row name), per phenomenon and overall, then the headline."""
    m = result["metrics"]
    rows = []
    for name, acc in m["constructions"].items():
        phenomenon, row = CONSTRUCTIONS.get(name, ("other", name))
        rows.append(f"{phenomenon + ': ' + row:48} {acc:.4f}")
    rows += [""] + [f"{name:48} {acc:.4f}" for name, acc in m["phenomena"].items()]
    return "\n".join(rows + ["", f"{'overall':48} {m['accuracy']:.4f}", result["headline"]]) + "\n"
