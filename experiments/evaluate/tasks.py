"""The task registry: every evaluation task declares what it needs of a model and what its results mean.

A task (``Task``) names the capability a model's family must offer for it (``experiments.families.adapter``:
a task applies to a model when its needs are covered), the module function that adds ``synbench eval NAME``
to the CLI, its options in an experiment spec's ``evaluations:`` and the ``eval`` arguments the evaluation
plan builds from them, how the metrics of its ``results.json`` flatten into the aggregate, and which of them
are headline metrics (the report's table, the summary and the Welch tests), tested, or only summarized.
The evaluators' tasks register here, each naming the ``add_command`` of its own module (``ppl.py``, ``sg_eval.py``
...: the sub-command's parser and its ``run``); a task a family owns registers from the family's folder, in a
module named after it (``_load_family_tasks``); plug-ins (``experiments.plugins``) may ``register`` more.
Nothing here imports torch: the CLI, the plan and the analysis all read it.
"""

from __future__ import annotations

import math
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
# how every scorer's network runs, whatever the method (``inference_dtype.py``; default float32)
NETWORK_OPTIONS = ("inference_dtype",)
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
    tested: tuple[str, ...] = ()  # patterns of more metrics summarized and Welch-tested (e.g. "decision_accuracy.*")
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
    """Every registered task in the order of registration: the built-ins, then the tasks the families own and
    the plug-ins' (loading the families registers theirs, ``_load_family_tasks``)."""
    from experiments.plugins import load_plugins

    _load_family_tasks()
    load_plugins()
    return list(_TASKS.values())


_families_searched: set[str] = set()


def _load_family_tasks() -> None:
    """Register the tasks the families own. A family owns a task by an evaluation it runs itself (its adapter's
    ``evaluations`` part, by the capability the task needs) and a module of its package named after that
    capability, which registers the task when imported (a ``terminals.py`` registering ``terminals``); this
    imports it for each registered family (once per family). An own evaluation that a registered task already
    needs (``dependency_parse``: ``uas-rerank``) has no module of its own."""
    import importlib
    import importlib.util
    import sys

    from experiments import families

    for name in families.names():  # loads the built-in families and the plug-ins
        if name in _families_searched:
            continue
        _families_searched.add(name)
        adapter = families.get_family(name)
        package = type(adapter).__module__
        if not hasattr(sys.modules.get(package), "__path__"):  # a family module, not a package: nothing to own
            continue
        needed = {t.needs for t in _TASKS.values()}
        for capability in sorted(set(adapter.evaluations()) - needed):
            module = f"{package}.{capability}"
            if module not in sys.modules and importlib.util.find_spec(module) is not None:
                importlib.import_module(module)


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


# -- the evaluators' tasks (plan arguments shared with the families' own tasks: flag, corpus_split) ----------
def flag(options: Mapping[str, Any], key: str) -> list[str]:
    """``--key value`` when the entry sets ``key`` (lists joined by commas)."""
    if key not in options or options[key] in (None, []):
        return []
    value = options[key]
    return [f"--{key.replace('_', '-')}", ",".join(value) if isinstance(value, list) else str(value)]


def corpus_split(p: PlanInput) -> list[str]:
    """``--corpus C --split S [--limit K]``: the plan's arguments of a task over a corpus split."""
    return ["--corpus", p.corpus, "--split", p.split, *flag(p.options, "limit")]


def _gold(p: PlanInput) -> list[str]:
    return ["--gold", p.corpus if p.split == "file" else f"{p.corpus}/{p.split}", *flag(p.options, "limit")]


def _rerank_arguments(p: PlanInput) -> list[str]:
    assert p.proposals is not None  # rerank requires proposals
    return [*_gold(p), "--logq", str(p.proposals.with_suffix(".logq.jsonl"))]


def _sg_sentences(options: Mapping[str, Any], data_dir: str | None) -> list[list[str]]:
    from experiments.evaluate.sg import default_suites_dir, load_suites, suites_folder
    from experiments.evaluate.sg_eval import condition_words, select

    folder = suites_folder(options.get("suites"))
    suites = select(load_suites(folder or default_suites_dir(data_dir)),
                    None if folder else _names(options.get("suites")) or None, options.get("items_per_suite"))
    return [condition_words(s, it.number, c)[0] for s in suites.values() for it in s.items for c in s.conditions]


def _blimp_sentences(options: Mapping[str, Any], data_dir: str | None) -> list[list[str]]:
    from experiments.evaluate.blimp import load_paradigms
    from experiments.evaluate.blimp_eval import default_data_dir, select
    from experiments.evaluate.minimal_pairs import words_of

    paradigms = select(load_paradigms(default_data_dir(data_dir), options.get("pairs_per_paradigm")),
                       options.get("paradigms"))
    return [words_of(sentence, p.uid) for ps in paradigms.values() for p in ps for sentence in (p.good, p.bad)]


def _pairs_sentences(options: Mapping[str, Any], data_dir: str | None) -> list[list[str]]:
    from experiments.evaluate.minimal_pairs import words_of
    from experiments.evaluate.pairs import load_pairs

    path = options["file"]
    pairs, _ = load_pairs(path, _names(options.get("group_by")))
    return [words_of(sentence, f"{path}:{p.line}") for p in pairs for sentence in (p.good, p.bad)]


def _marvin_linzen_sentences(options: Mapping[str, Any], data_dir: str | None) -> list[list[str]]:
    from experiments.evaluate.marvin_linzen import default_data_dir, load_cases
    from experiments.evaluate.minimal_pairs import words_of

    cases = load_cases(default_data_dir(data_dir), _names(options.get("constructions")) or None,
                       options.get("pairs_per_construction"))
    sentences = dict.fromkeys(s for cs in cases.values() for case in cs for s in case.sentences)  # NPI: a triple
    return [words_of(s, "marvin-linzen") for s in sentences]


def _subset(size_key: str, names_key: str) -> Callable[[Mapping[str, Any]], str]:
    def name(options: Mapping[str, Any]) -> str:
        return f"{options.get(size_key) or 'all'}-{','.join(_names(options.get(names_key))) or 'all'}"

    return name


def _names(value: str | list[str] | None) -> list[str]:
    """A spec's list of names, or one comma-separated string of them."""
    return [v.strip() for v in value.split(",") if v.strip()] if isinstance(value, str) else list(value or [])


# -- tasks over a data file or folder the spec names: planned with its sha256, so a changed one runs again ----
def _planned_file(path: str) -> tuple[str, str]:
    """A data path as the plan passes it (absolute: the commands may run elsewhere) and its sha256 now."""
    from lightning_modules.data.checksums import file_sha256

    return str(Path(path).resolve()), file_sha256(path)


def _sg_arguments(p: PlanInput) -> list[str]:
    from experiments.evaluate.sg import suites_folder

    folder = suites_folder(p.options.get("suites"))
    if folder is None:
        return [*flag(p.options, "items_per_suite"), *flag(p.options, "suites")]
    path, sha = _planned_file(str(folder))
    return [*flag(p.options, "items_per_suite"), "--suites", path, "--suites-sha256", sha]


def _sg_set(options: Mapping[str, Any]) -> str:
    """The sentence set's name (proposal files): a folder of suites by its name and content."""
    from experiments.evaluate.sg import suites_folder

    folder = suites_folder(options.get("suites"))
    if folder is None:
        return _subset("items_per_suite", "suites")(options)
    return f"{options.get('items_per_suite') or 'all'}-{folder.name}-{_planned_file(str(folder))[1][:12]}"


def _sg_check(options: Mapping[str, Any]) -> str | None:
    from experiments.evaluate.sg import suites_folder

    folder = suites_folder(options.get("suites"))
    return f"suites: no folder {str(folder)!r}" if folder is not None and not folder.is_dir() else None


def _pairs_arguments(p: PlanInput) -> list[str]:
    path, sha = _planned_file(p.options["file"])
    return ["--file", path, "--sha256", sha, *flag(p.options, "group_by")]


def _pairs_set(options: Mapping[str, Any]) -> str:
    return f"{Path(options['file']).stem}-{_planned_file(options['file'])[1][:12]}"


def _pairs_check(options: Mapping[str, Any]) -> str | None:
    path = options.get("file")
    if not isinstance(path, str):
        return "file: required: the pairs file (JSON lines with sentence_good and sentence_bad)"
    return None if Path(path).is_file() else f"file: no such file {path!r}"


def _ppl(m: Mapping[str, Any]) -> dict[str, float]:
    """A perplexity written ``null`` (a sentence of probability 0 under a search: ``infinite``) is +inf in the
    tables, so a seed's infinite bound is never read as a missing value."""
    out = {"ppl": _finite_or_inf(m["word_ppl"]), "ppl_oov_rate": m["oov_rate"]}
    if "ppl_end_counted" in m:  # results written before it was reported have only the word perplexity
        out["ppl_end_counted"] = _finite_or_inf(m["ppl_end_counted"])
    if "word_ppl_given_tree" in m:  # scored on one given tree per sentence (gold): log p(x, y) in two parts
        out["ppl_words_given_tree"] = m["word_ppl_given_tree"]
        out["structure_nll_per_word"] = m["structure_nll_per_word"]
    if "word_ppl_official" in m:  # also as the family's official code counts it (imported checkpoints)
        out["ppl_official"] = m["word_ppl_official"]
    return out


def _finite_or_inf(value: float | None) -> float:
    return math.inf if value is None else value


def _sg(m: Mapping[str, Any]) -> dict[str, float]:
    """``sg`` over the suite set hu2020-31; ``sg.all_34`` over all 34 suites (the official DTG script's)."""
    every = (m.get("suite_set_scores") or {}).get("all-34")
    return {"sg": m["score"], **({} if every is None else {"sg.all_34": every}),
            **{f"sg.circuit.{c}": v for c, v in m["circuits"].items() if v is not None}}


def _blimp(m: Mapping[str, Any]) -> dict[str, float]:
    return {"blimp": m["accuracy"], **{f"blimp.phenomenon.{p}": v for p, v in m["phenomena"].items()}}


def _pairs(m: Mapping[str, Any]) -> dict[str, float]:
    return {"pairs": m["accuracy"], **{f"pairs.{key}.{value}": accuracy for key, values in m["groups"].items()
                                       for value, accuracy in values.items()}}


def _marvin_linzen(m: Mapping[str, Any]) -> dict[str, float]:
    return {"marvin_linzen": m["accuracy"],
            **{f"marvin_linzen.construction.{c}": v for c, v in m["constructions"].items()},
            **{f"marvin_linzen.phenomenon.{p}": v for p, v in m["phenomena"].items()}}


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


_EVALUATE = "experiments.evaluate"

for _task in (
    Task("ppl", "perplexity", f"{_EVALUATE}.ppl:add_command", _ppl, headline=("ppl",), secondary=("ppl_end_counted",),
         options=COMMON_OPTIONS + CORPUS_OPTIONS + SCORING_OPTIONS + NETWORK_OPTIONS, default_split="test",
         arguments=corpus_split, methods=("proposals", "beam", "gold")),
    Task("sg", "surprisal", f"{_EVALUATE}.sg_eval:add_command", _sg, headline=("sg", "sg.all_34"), secondary=("sg.*",),
         # suites: names, or a folder
         options=COMMON_OPTIONS + SCORING_OPTIONS + NETWORK_OPTIONS + ("items_per_suite", "suites"),
         arguments=_sg_arguments, sentence_set=_sg_set, sentences=_sg_sentences, check=_sg_check),
    Task("blimp", "score", f"{_EVALUATE}.blimp_eval:add_command", _blimp, headline=("blimp",),
         secondary=("blimp.*",),
         options=COMMON_OPTIONS + SCORING_OPTIONS + NETWORK_OPTIONS + ("pairs_per_paradigm", "paradigms"),
         arguments=lambda p: [*flag(p.options, "pairs_per_paradigm"), *flag(p.options, "paradigms")],
         sentence_set=_subset("pairs_per_paradigm", "paradigms"), sentences=_blimp_sentences),
    Task("rerank", "rerank", f"{_EVALUATE}.rerank:add_command", _rerank, headline=("f1",),
         secondary=("f1_oracle", "f1_parser"),
         options=COMMON_OPTIONS + CORPUS_OPTIONS + ("proposals", "n") + NETWORK_OPTIONS, default_split="test",
         arguments=_rerank_arguments, takes_method=False, requires_proposals=True, methods=("proposals",)),
    Task("parse", "parse", f"{_EVALUATE}.parse:add_command", _parse,
         headline=("parse_f1", "decision_accuracy.p", "decision_accuracy.p_prime"), tested=("decision_accuracy.*",),
         secondary=("parse_f1_right_branching", "parse_f1_oracle"),
         options=COMMON_OPTIONS + CORPUS_OPTIONS + ("method", "beam"), default_split="test", arguments=_gold,
         methods=("gold",)),
    Task("unsupervised-f1", "parse", f"{_EVALUATE}.unsupervised_parse:add_command", _unsupervised_f1,
         headline=("unsupervised_f1", "unsupervised_f1_right_branching", "splits.left", "splits.right"),
         tested=("unsupervised_f1_corpus",), secondary=("gold_splits.*", "gold_splits_nary.*"),
         options=COMMON_OPTIONS + CORPUS_OPTIONS + ("max_length",), default_split="test",
         arguments=lambda p: [*_gold(p), *flag(p.options, "max_length")], takes_method=False, methods=()),
    Task("uas", "dependency_parse", f"{_EVALUATE}.uas:add_command", _uas, headline=("uas",), secondary=("las",),
         unplanned="it compares two CoNLL-U files (synbench eval uas GOLD TEST), not a model", scored=False),
    Task("uas-rerank", "dependency_parse", f"{_EVALUATE}.uas:add_rerank_command", _uas_rerank,
         headline=("uas_rerank",), secondary=("uas_rerank_parser", "uas_rerank_oracle"),
         options=COMMON_OPTIONS + CORPUS_OPTIONS + ("proposals", "n"), default_split="test",
         arguments=corpus_split, scored=False, takes_method=False, requires_proposals=True,
         methods=("proposals",)),
    Task("pairs", "score", f"{_EVALUATE}.pairs:add_command", _pairs, headline=("pairs",), secondary=("pairs.*",),
         options=COMMON_OPTIONS + SCORING_OPTIONS + NETWORK_OPTIONS + ("file", "group_by"), arguments=_pairs_arguments,
         sentence_set=_pairs_set, sentences=_pairs_sentences, check=_pairs_check),
    Task("marvin-linzen", "score", f"{_EVALUATE}.marvin_linzen:add_command", _marvin_linzen,
         headline=("marvin_linzen",), secondary=("marvin_linzen.*",),
         options=COMMON_OPTIONS + SCORING_OPTIONS + NETWORK_OPTIONS + ("pairs_per_construction", "constructions"),
         arguments=lambda p: [*flag(p.options, "pairs_per_construction"), *flag(p.options, "constructions")],
         sentence_set=_subset("pairs_per_construction", "constructions"), sentences=_marvin_linzen_sentences),
):
    register(_task)
