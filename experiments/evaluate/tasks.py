"""The task registry: every evaluation task declares what it needs of a model and what its results mean.

A task (``Task``) names the capability a model's family must offer for it (``experiments.families.adapter``:
a task applies to a model when its needs are covered), the module function that adds ``synbench eval NAME``
to the CLI, its options in an experiment spec's ``evaluations:`` and the ``eval`` arguments the evaluation
plan builds from them, how the metrics of its ``results.json`` flatten into the aggregate, and which of them
are headline metrics (the report's table, the summary and the Welch tests), tested, or only summarized.
Built-in tasks register here; plug-ins (``experiments.plugins``) may ``register`` more. Nothing here imports
torch: the CLI, the plan and the analysis all read it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any

from lightning_modules.errors import InputError

COMMON_OPTIONS = ("name", "models", "label")  # label: one of several entries of a task (``labelled``)
LABEL_SEPARATOR = "@"  # eval/TASK@LABEL, metrics METRIC@LABEL
CORPUS_OPTIONS = ("corpus", "split", "limit")  # a corpus split (default: the run's data.corpus)
# through the family's scorer of a method (max_actions, fast_track: word-synchronous beams that read them)
SCORING_OPTIONS = ("method", "proposals", "n", "beam", "word_beam", "max_actions", "fast_track")
# metrics of training (the family's final_metrics), beside the tasks': in the headline table / tested
TRAINING_HEADLINE = ("val_ppl", "ppl_stream")  # ppl_stream: a string model's stream-level test perplexity
TRAINING_TESTED = ("best_val_loss",)


@dataclass(frozen=True)
class PlanInput:
    """What the evaluation plan knows when it builds a task's ``eval`` arguments for one run."""

    options: Mapping[str, Any]  # the validated ``evaluations:`` entry
    corpus: str  # the entry's corpus, else the run's data.corpus
    split: str  # the entry's split, else the task's default
    proposals: Path | None  # the proposal file of the run, when it is scored over proposals
    methods: tuple[str, ...]  # the run's family's scoring methods


@dataclass(frozen=True)
class Task:
    """One evaluation task (see the module docstring)."""

    name: str
    needs: str  # the capability a model's family must offer
    command: str  # "module:function" adding `synbench eval NAME` to the eval sub-parsers (imported lazily)
    # results.json "metrics" -> aggregate metrics; None: the results feed an analysis, not the aggregate
    flatten: Callable[[Mapping[str, Any]], dict[str, float]] | None
    headline: tuple[str, ...] = ()  # metrics of the report's headline table (summarized and tested)
    tested: tuple[str, ...] = ()  # patterns of more metrics summarized and Welch-tested (e.g. "dyck.*")
    secondary: tuple[str, ...] = ()  # patterns of metrics only summarized (per circuit, oracle F1, ...)
    options: tuple[str, ...] = COMMON_OPTIONS  # its `evaluations:` options
    default_split: str | None = None
    arguments: Callable[[PlanInput], list[str]] | None = None  # the plan's `eval NAME` arguments; None: unplanned
    unplanned: str = ""  # why an experiment spec cannot name it (when ``arguments`` is None)
    scored: bool = True  # scored through the family's scorer of a method (else the family evaluates it)
    takes_method: bool = True  # its CLI reads --method (else the method is the task's own)
    requires_proposals: bool = False
    methods: tuple[str, ...] = ("proposals", "beam")  # the methods an entry may name
    # sentence-set tasks (SG, BLiMP): (name of the set, its tokenized sentences) for proposal files
    sentence_set: Callable[[Mapping[str, Any]], str] | None = None
    sentences: Callable[[Mapping[str, Any], str | None], list[list[str]]] | None = None
    check: Callable[[Mapping[str, Any]], str | None] | None = None  # task-specific option problems

    def add_command(self, subparsers: Any) -> None:
        """Add ``synbench eval NAME`` to the eval sub-parsers."""
        import importlib

        module, function = self.command.split(":")
        getattr(importlib.import_module(module), function)(subparsers)


_TASKS: dict[str, Task] = {}


def register(task: Task) -> Task:
    """Add ``task`` to the registry (its name must be new); returns it."""
    if task.name in _TASKS:
        raise ValueError(f"evaluation task {task.name!r} is already registered")
    _TASKS[task.name] = task
    return task


def tasks() -> list[Task]:
    """Every registered task, built-ins first, in the order of registration."""
    from experiments.plugins import load_plugins

    load_plugins()
    return list(_TASKS.values())


def names() -> tuple[str, ...]:
    return tuple(t.name for t in tasks())


def get(name: str) -> Task:
    """The task ``name``; an unknown name is an error listing the known ones."""
    known = {t.name: t for t in tasks()}
    if name not in known:
        raise InputError(f"unknown evaluation task {name!r} (known: {', '.join(known)})", "task")
    return known[name]


# -- metrics -------------------------------------------------------------------------------------------------
def headline_metrics() -> tuple[str, ...]:
    """The report's headline table columns, in order: each task's headline, then training's."""
    return tuple(m for t in tasks() for m in t.headline) + TRAINING_HEADLINE


def labelled(name: str, label: str | None) -> str:
    """A task's folder or metric name for an ``evaluations:`` entry with a ``label`` (the same task run more
    than once, e.g. perplexity on several corpora): ``ppl@ud-gum``; the name itself without one."""
    return f"{name}{LABEL_SEPARATOR}{label}" if label else name


def unlabelled(name: str) -> str:
    """``ppl@ud-gum`` -> ``ppl``: the task's own name of a labelled folder or metric."""
    return name.split(LABEL_SEPARATOR, 1)[0]


def is_tested(metric: str) -> bool:
    """Whether the statistics compare ``metric`` (labelled or not) between models (Welch tests)."""
    metric = unlabelled(metric)
    return any(metric in t.headline or _matches(metric, t.tested) for t in tasks()) or metric in TRAINING_TESTED


def is_summarized(metric: str) -> bool:
    """Whether the statistics summarize ``metric`` (labelled or not: mean, sd, CI per model)."""
    return (is_tested(metric) or unlabelled(metric) in TRAINING_HEADLINE
            or any(_matches(unlabelled(metric), t.secondary) for t in tasks()))


def _matches(metric: str, patterns: Sequence[str]) -> bool:
    return any(fnmatchcase(metric, p) for p in patterns)


# -- the built-in tasks ----------------------------------------------------------------------------------------
def _flag(options: Mapping[str, Any], key: str) -> list[str]:
    """``--key value`` when the entry sets ``key`` (lists joined by commas)."""
    if key not in options or options[key] in (None, []):
        return []
    value = options[key]
    return [f"--{key.replace('_', '-')}", ",".join(value) if isinstance(value, list) else str(value)]


def _corpus_split(p: PlanInput) -> list[str]:
    return ["--corpus", p.corpus, "--split", p.split, *_flag(p.options, "limit")]


def _gold(p: PlanInput) -> list[str]:
    return ["--gold", p.corpus if p.split == "file" else f"{p.corpus}/{p.split}", *_flag(p.options, "limit")]


def _rerank_arguments(p: PlanInput) -> list[str]:
    assert p.proposals is not None  # rerank requires proposals
    return [*_gold(p), "--logq", str(p.proposals.with_suffix(".logq.jsonl"))]


def _sg_sentences(options: Mapping[str, Any], data_dir: str | None) -> list[list[str]]:
    from experiments.evaluate.sg import default_suites_dir, load_suites
    from experiments.evaluate.sg_eval import condition_words, select

    suites = select(load_suites(default_suites_dir(data_dir)), options.get("suites"), options.get("items_per_suite"))
    return [condition_words(s, it.number, c)[0] for s in suites.values() for it in s.items for c in s.conditions]


def _blimp_sentences(options: Mapping[str, Any], data_dir: str | None) -> list[list[str]]:
    from experiments.evaluate.blimp import load_paradigms
    from experiments.evaluate.blimp_eval import default_data_dir, select, words_of

    paradigms = select(load_paradigms(default_data_dir(data_dir), options.get("pairs_per_paradigm")),
                       options.get("paradigms"))
    return [words_of(sentence, p.uid) for ps in paradigms.values() for p in ps for sentence in (p.good, p.bad)]


def _subset(size_key: str, names_key: str) -> Callable[[Mapping[str, Any]], str]:
    def name(options: Mapping[str, Any]) -> str:
        return f"{options.get(size_key) or 'all'}-{','.join(options.get(names_key) or []) or 'all'}"

    return name


def _check_dyck(options: Mapping[str, Any]) -> str | None:
    from lightning_modules.families.pushdown.dyck import TEST_SETS

    sets = options.get("sets", list(TEST_SETS))
    if not isinstance(sets, list) or not sets or any(s not in TEST_SETS for s in sets):
        return f"sets: expected a list of {', '.join(TEST_SETS)}, got {sets!r}"
    return None


def _dyck_arguments(p: PlanInput) -> list[str]:
    o = p.options
    return [*(a for s in o.get("sets") or [] for a in ("--set", s)), *_flag(o, "size"), *_flag(o, "seed"),
            *(_flag(o, "beam") if "beam" in p.methods else [])]


def _ppl(m: Mapping[str, Any]) -> dict[str, float]:
    return {"ppl": m["word_ppl"], "ppl_oov_rate": m["oov_rate"]}


def _sg(m: Mapping[str, Any]) -> dict[str, float]:
    return {"sg": m["score"], **{f"sg.circuit.{c}": v for c, v in m["circuits"].items() if v is not None}}


def _blimp(m: Mapping[str, Any]) -> dict[str, float]:
    return {"blimp": m["accuracy"], **{f"blimp.phenomenon.{p}": v for p, v in m["phenomena"].items()}}


def _rerank(m: Mapping[str, Any]) -> dict[str, float]:
    out = {"f1": m["reranked"]["all"]["bracket_f1"], "f1_oracle": m["oracle"]["all"]["bracket_f1"]}
    if m.get("parser_1best"):
        out["f1_parser"] = m["parser_1best"]["all"]["bracket_f1"]
    return out


def _parse(m: Mapping[str, Any]) -> dict[str, float]:
    out = {"parse_f1": m["parsed"]["all"]["bracket_f1"],
           "parse_f1_right_branching": m["right_branching"]["all"]["bracket_f1"]}
    if m.get("oracle"):
        out["parse_f1_oracle"] = m["oracle"]["all"]["bracket_f1"]
    out.update({f"decision_accuracy.{name}": d["accuracy"] for name, d in (m.get("decisions") or {}).items()
                if d.get("accuracy") is not None})
    return out


def _unsupervised_f1(m: Mapping[str, Any]) -> dict[str, float]:
    parsed = m["parsed"]
    out = {"unsupervised_f1": parsed["sentence_f1"], "unsupervised_f1_corpus": parsed["corpus_f1"],
           "unsupervised_f1_right_branching": m["right_branching"]["sentence_f1"]}
    out.update({f"splits.{side}": parsed[f"{side}_splits_pct"] for side in ("left", "right")
                if parsed.get(f"{side}_splits_pct") is not None})
    for key in ("gold_splits", "gold_splits_nary"):
        out.update({f"{key}.{side}": m[key][f"{side}_splits_pct"] for side in ("left", "right")
                    if m.get(key, {}).get(f"{side}_splits_pct") is not None})
    return out


def _uas(m: Mapping[str, Any]) -> dict[str, float]:
    return {k: m[k] for k in ("uas", "las") if m.get(k) is not None}


def _uas_rerank(m: Mapping[str, Any]) -> dict[str, float]:
    return {f"uas_rerank{suffix}": m[f"uas{suffix}"] for suffix in ("", "_parser", "_oracle")
            if m.get(f"uas{suffix}") is not None}


def _dyck(m: Mapping[str, Any]) -> dict[str, float]:
    return {f"dyck.{name}": value for name, value in m["accuracy"].items()}


_EVAL = "experiments.commands.eval"

for _task in (
    Task("ppl", "perplexity", f"{_EVAL}:add_ppl", _ppl, headline=("ppl",),
         options=COMMON_OPTIONS + CORPUS_OPTIONS + SCORING_OPTIONS, default_split="test",
         arguments=_corpus_split, methods=("proposals", "beam", "gold")),
    Task("sg", "surprisal", f"{_EVAL}:add_sg", _sg, headline=("sg",), secondary=("sg.*",),
         options=COMMON_OPTIONS + SCORING_OPTIONS + ("items_per_suite", "suites"),
         arguments=lambda p: [*_flag(p.options, "items_per_suite"), *_flag(p.options, "suites")],
         sentence_set=_subset("items_per_suite", "suites"), sentences=_sg_sentences),
    Task("blimp", "score", f"{_EVAL}:add_blimp", _blimp, headline=("blimp",), secondary=("blimp.*",),
         options=COMMON_OPTIONS + SCORING_OPTIONS + ("pairs_per_paradigm", "paradigms"),
         arguments=lambda p: [*_flag(p.options, "pairs_per_paradigm"), *_flag(p.options, "paradigms")],
         sentence_set=_subset("pairs_per_paradigm", "paradigms"), sentences=_blimp_sentences),
    Task("rerank", "rerank", f"{_EVAL}:add_rerank", _rerank, headline=("f1",), secondary=("f1_oracle", "f1_parser"),
         options=COMMON_OPTIONS + CORPUS_OPTIONS + ("proposals", "n"), default_split="test",
         arguments=_rerank_arguments, takes_method=False, requires_proposals=True, methods=("proposals",)),
    Task("parse", "parse", f"{_EVAL}:add_parse", _parse,
         headline=("parse_f1", "decision_accuracy.p", "decision_accuracy.p_prime"), tested=("decision_accuracy.*",),
         secondary=("parse_f1_right_branching", "parse_f1_oracle"), options=COMMON_OPTIONS + CORPUS_OPTIONS + ("beam",),
         default_split="test", arguments=_gold, takes_method=False, methods=()),
    Task("unsupervised-f1", "parse", f"{_EVAL}:add_unsupervised_f1", _unsupervised_f1,
         headline=("unsupervised_f1", "unsupervised_f1_right_branching", "splits.left", "splits.right"),
         tested=("unsupervised_f1_corpus",), secondary=("gold_splits.*", "gold_splits_nary.*"),
         options=COMMON_OPTIONS + CORPUS_OPTIONS + ("max_length",), default_split="test",
         arguments=lambda p: [*_gold(p), *_flag(p.options, "max_length")], takes_method=False, methods=()),
    Task("uas", "dependency_parse", f"{_EVAL}:add_uas", _uas, headline=("uas",), secondary=("las",),
         unplanned="it compares two CoNLL-U files (synbench eval uas GOLD TEST), not a model", scored=False),
    Task("uas-rerank", "dependency_parse", f"{_EVAL}:add_uas_rerank", _uas_rerank, headline=("uas_rerank",),
         secondary=("uas_rerank_parser", "uas_rerank_oracle"),
         options=COMMON_OPTIONS + CORPUS_OPTIONS + ("proposals", "n"), default_split="test",
         arguments=_corpus_split, scored=False, takes_method=False, requires_proposals=True,
         methods=("proposals",)),
    Task("terminals", "terminals", f"{_EVAL}:add_terminals", None,
         options=COMMON_OPTIONS + CORPUS_OPTIONS, default_split="valid", arguments=_corpus_split, scored=False,
         methods=()),
    Task("dyck", "dyck", f"{_EVAL}:add_dyck", _dyck, tested=("dyck.*",),
         options=COMMON_OPTIONS + ("sets", "size", "seed", "beam"), arguments=_dyck_arguments, scored=False,
         methods=(), check=_check_dyck),
):
    register(_task)
