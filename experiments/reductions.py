"""What a smaller-scale experiment reduces from the full protocol it names in ``compare_to``.

A smaller scale is a different experiment, never a silent shortcut: ``synbench reproduce`` prints these lines
before it starts and the analysis records them in ``settings.json``, whose report states every one of them.
"""

from __future__ import annotations

from typing import Any

from experiments.config import VOLATILE_SECTIONS
from experiments.evaluate import tasks
from experiments.experiment_runs import experiment_runs
from experiments.experiment_spec import ExperimentSpec, Run, load_spec, parse_seeds

SECTION_ORDER = ("data", "train", "model")  # how a model's differing settings are listed (then any other)


def reduced_settings(spec: ExperimentSpec, seeds: str | None = None) -> list[str]:
    """Every protocol setting of ``spec`` that differs from its ``compare_to`` spec, as readable lines."""
    if not spec.compare_to:
        return []
    full = load_spec(spec.compare_to)
    lines = []
    n_seeds = len(parse_seeds(seeds) if seeds else spec.seeds)
    if n_seeds != len(full.seeds):
        lines.append(f"{n_seeds} seeds per model (full protocol: {len(full.seeds)})")
    ours_runs, full_runs = first_runs(spec), first_runs(full)
    lines += [f"model {label}: not trained" for label in full_runs if label not in ours_runs]
    for label, run in ours_runs.items():
        ref = full_runs.get(label)
        if ref is None:
            continue
        ours, theirs = config_settings(run.config), config_settings(ref.config)
        diffs = [f"{key} {_none(ours.get(key))} (full protocol: {_none(theirs.get(key))})"
                 for key in _ordered([*ours, *theirs]) if ours.get(key) != theirs.get(key)]
        if diffs:
            lines.append(f"{label}: " + ", ".join(diffs))
    ours_evals = {_key(e): e for e in spec.evaluations}
    for entry in full.evaluations:
        if _key(entry) not in ours_evals:
            lines.append(f"evaluation {_key(entry)}: not run")
    for entry in spec.evaluations:
        which = f" ({', '.join(entry['models'])})" if entry.get("models") else ""
        ref = _reference(entry, full.evaluations)
        defaults = {"split": tasks.get(entry["name"]).default_split}
        keys = [k for k in dict.fromkeys([*entry, *ref]) if k not in ("name", "models", "proposals", "label")]
        if not ref:  # e.g. the same task scored a second way, to show how tight the headline's bound is
            added = ", ".join(f"{k} {entry[k]}" for k in keys)
            lines.append(f"evaluation {_key(entry)}{which}: not in the full protocol (added: {added})")
            continue
        ours_v = {k: entry.get(k, defaults.get(k)) for k in keys}
        full_v = {k: ref.get(k, defaults.get(k)) for k in keys}
        diffs = [f"{k} {_unset(k, ours_v[k], entry, spec)} (full protocol: {_unset(k, full_v[k], ref, full)})"
                 for k in keys if ours_v[k] != full_v[k]]
        if diffs:
            lines.append(f"evaluation {_key(entry)}{which}: " + ", ".join(diffs))
    ours_p, full_p = spec.analysis.get("probing") or {}, full.analysis.get("probing") or {}
    if full_p and not ours_p:
        lines.append("probing: not run")
    elif ours_p:
        keys = [k for k in dict.fromkeys([*ours_p, *full_p]) if k not in ("models", "seed")]
        diffs = [f"{k} {_all(ours_p.get(k))} (full protocol: {_all(full_p.get(k))})" for k in keys
                 if ours_p.get(k) != full_p.get(k)]
        if diffs:
            lines.append("probing: " + ", ".join(diffs))
    for name in full.analysis.get("regressions") or {}:
        if name not in (spec.analysis.get("regressions") or {}):
            lines.append(f"regression {name}: not run")
    return lines


def _key(entry: dict[str, Any]) -> str:
    """An evaluation entry by its folder name (labelled entries of one task apart)."""
    return tasks.labelled(entry["name"], entry.get("label"))


def _reference(entry: dict[str, Any], full: list[dict[str, Any]]) -> dict[str, Any]:
    """The full protocol's entry of the same task and label that ``entry`` scales down: of several (one per
    group of models), the one sharing most of its models (ties: the first)."""
    same = [e for e in full if _key(e) == _key(entry)]
    ours = set(entry.get("models") or [])
    return max(same, key=lambda e: len(ours & set(e.get("models") or [])), default={})


def _none(value: Any) -> Any:
    """A config setting of null reads "none" (``train.max_steps`` none: the epochs bound the run), never "None"."""
    return "none" if value is None else value


def _all(value: Any) -> Any:
    """A setting that is absent means 'everything' (all items, all sentences, all layers)."""
    return "all" if value is None else value


def _unset(key: str, value: Any, entry: dict[str, Any], spec: ExperimentSpec) -> Any:
    """An evaluation setting as the entry has it; absent, what the evaluation then does: the scoring method
    is proposals when the entry names a parser (else the family's default), a method option is the default
    its method declares (``not used`` where the method does not read it), a subset size means everything."""
    if value is not None:
        return value
    if key == "method":
        return "proposals" if entry.get("proposals") else "the family's default"
    if key in tasks.SCORING_OPTIONS:
        return _method_default(key, entry, spec)
    return "all"


def _method_default(key: str, entry: dict[str, Any], spec: ExperimentSpec) -> Any:
    """The default of method option ``key`` for the runs of ``spec`` an ``entry`` evaluates (their families'
    methods say it; ``not used`` where none reads it, ``the family's default`` where they differ)."""
    from experiments.evaluation_plan import Evaluation, family_of, scoring_method

    evaluation = Evaluation(entry["name"], dict(entry), "")
    defaults = set()
    for run in first_runs(spec).values():
        method = scoring_method(evaluation, run) if evaluation.applies_to(run) else None
        options = family_of(run).method(method, run.config).options if method else {}
        if key in options:
            defaults.add(options[key])
    if not defaults:
        return "not used"
    return defaults.pop() if len(defaults) == 1 else "the family's default"


def first_runs(spec: ExperimentSpec) -> dict[str, Run]:
    """Each model label's first run (its resolved config stands for all its seeds')."""
    runs: dict[str, Run] = {}
    for run in experiment_runs(spec, None):
        runs.setdefault(run.model, run)
    return runs


def config_settings(config: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """Every setting of a resolved config that can change a result, by dotted key (where a run runs, its
    ``runtime``, and the preset name, whose settings are listed themselves, left out)."""
    out: dict[str, Any] = {}
    for key, value in config.items():
        if not prefix and key in (*VOLATILE_SECTIONS, "family", "preset"):
            continue
        if isinstance(value, dict):
            out.update(config_settings(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value
    return out


def _ordered(keys: list[str]) -> list[str]:
    """Dotted keys deduplicated, by section (``SECTION_ORDER``, then the others), in their order within one."""
    rank = {section: i for i, section in enumerate(SECTION_ORDER)}
    return sorted(dict.fromkeys(keys), key=lambda k: rank.get(k.split(".")[0], len(rank)))
