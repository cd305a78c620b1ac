"""Experiment specs: a grid of model configs x data x seeds, plus the evaluations to run after training.

``experiments/configs/experiment/NAME.yaml``::

    description: two models for tests and demos
    models:                      # required: one entry per model config
      - family: FAMILY           #   required
        preset: cpu-small        #   optional: `synbench train --preset` (default: train's default)
        name: short              #   optional label (default: the family)
        overrides: {train.max_steps: 20, model: {n_layers: 2}}   # dotted keys or nested mappings
        seeds: 0                 #   optional: fixed seeds of this model (e.g. one proposal parser for all)
        seeds_per_process: 8     #   optional: this model's seeds_per_process (default: the spec's)
      - source: hf:models/gpt2   # or a pretrained LM instead of a family: evaluated, never trained (one run;
        name: gpt2               #   label default hf-DIRNAME; evaluations default to the first data entry's
                                 #   corpus, else the first trained model's); or RUN_DIR, a finished run
                                 #   folder (e.g. from `synbench import`): its checkpoints/best.ckpt
        hf_convention: lm-eval   #   optional: minicons (default) or lm-eval (``scorers/hf.py``), in its config
        word_prob: corrected     #   optional: sum-pieces (default) or corrected (``evaluate/word_prob.py``)
    data: [ptb-sample]           # optional: corpus names (= data.corpus), or {name, overrides} entries
    seeds: 0-3                   # required: 7 | 0-99 | "0-9,20-29" | [0, 1, 5-7]
    seeds_per_process: 1         # optional: S consecutive seeds of a model train in one process, parameters
                                 #   stacked (a seed group, experiments/seed_grouping.py), and are evaluated in
                                 #   one process, all their evals (experiments/eval_group.py); default 1
    evaluations: [perplexity]    # optional: names, or {name: ..., other options} (experiments/evaluation_plan.py)
    analysis: {...}              # optional: options of `synbench analyze` (analysis/pipeline.py)
    compare_to: reproduce-PAPER-paper   # optional: the full-protocol spec this one scales down
    family_entries: true         # optional: add the models and evaluations each registered family ships for
                                 #   this spec (its folder's experiments/NAME.yaml, NAME: this spec's name;
                                 #   keys models, evaluations and, for a paper-scale spec, card: lines of
                                 #   its protocol card), so a comparison of every family names none
    launcher:                    # optional per-executor options (see experiments/launchers)
      slurm: {time: "00:10:00", max_parallel: 4}
    tune:                        # optional: the search space of `synbench tune` (Optuna)
      model: short               #   the model entry (name) whose config is tuned (default: the first)
      data: ptb-sample           #   the data entry (default: the first, if any)
      seed: 0                    #   the seed of every trial (default: the first seed)
      params:                    #   config key -> distribution
        model.peak_lr: {type: float, low: 1.0e-4, high: 1.0e-2, log: true}
        model.n_layers: {type: int, low: 1, high: 4}          # optional step
        model.d_model: {type: categorical, choices: [32, 64]}
      pruner: {n_startup_trials: 2, n_warmup_steps: 10}       # median pruner on val/loss; none = off
      sampler_seed: 0            #   TPE sampler seed (default: none, i.e. random)
      heartbeat_s: 30            #   RDB storages: a trial silent this long (x2) is failed and retried
      max_retry: 3               #   retries of a trial whose worker died

Expanding a spec resolves every (model, data) cell to a full config with the caller's resolver (the same
function ``synbench train`` uses, fed the same ``key=value`` strings), so the run ids computed at submission
are exactly the ones training computes. Every error names the spec file, line and key.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from experiments.config import _FLOAT, run_id
from experiments.presets import configs_dir, load_yaml
from experiments.seed_grouping import changes_results, group_config, group_label, seed_groups
from lightning_modules.errors import InputError

TOP_KEYS = ("name", "description", "models", "data", "seeds", "evaluations", "launcher", "tune", "analysis",
            "compare_to", "seeds_per_process", "family_entries")
FAMILY_ENTRY_KEYS = ("models", "evaluations")  # and ``card``: their lines of the paper's protocol card
TUNE_KEYS = ("model", "data", "seed", "params", "pruner", "sampler_seed", "heartbeat_s", "max_retry")
PARAM_KEYS = {"float": ("type", "low", "high", "log", "step"), "int": ("type", "low", "high", "log", "step"),
              "categorical": ("type", "choices")}
MODEL_KEYS = ("family", "preset", "name", "overrides", "seeds", "seeds_per_process")
SOURCE_KEYS = ("source", "name", "hf_convention", "word_prob")
CHECKPOINT = "checkpoints/best.ckpt"  # what a run-folder source is scored from
DATA_KEYS = ("name", "overrides")
MAX_SEEDS = 100_000
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.+-]*")
KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*")

# resolve(family, preset or None, ["train.max_steps=20", ...]) -> resolved config; raises InputError.
Resolver = Callable[[str, str | None, list[str]], dict[str, Any]]


@dataclass(frozen=True)
class ModelEntry:
    name: str
    family: str
    preset: str | None
    overrides: dict[str, Any]  # a source: its scoring settings (``hf_convention``), put in its run config
    where: str
    seeds: tuple[int, ...] | None = None  # fixed seeds of this model (e.g. one proposal parser), else the spec's
    source: str | None = None  # ``hf:DIR`` or a run folder's checkpoint: a model evaluated as it is
    seeds_per_process: int | None = None  # seeds trained in one process (a seed group), else the spec's


@dataclass(frozen=True)
class DataEntry:
    name: str
    overrides: dict[str, Any]
    where: str


@dataclass(frozen=True)
class TuneParam:
    """One dimension of the search space: ``key`` is a config key, the rest an Optuna distribution."""

    key: str
    type: str  # float | int | categorical
    low: float | None = None
    high: float | None = None
    log: bool = False
    step: float | None = None
    choices: tuple[Any, ...] = ()
    where: str = ""


@dataclass(frozen=True)
class TuneSpec:
    """The ``tune:`` section: which model/data cell is tuned, the search space, pruning and retries.
    The objective is the run's best validation loss (``best_val_loss`` in ``DONE``), minimised."""

    model: str
    data: str | None
    seed: int
    params: tuple[TuneParam, ...]
    pruner: dict[str, int] | None
    sampler_seed: int | None
    heartbeat_s: int
    max_retry: int
    where: str


@dataclass(frozen=True)
class ExperimentSpec:
    """A parsed, validated spec; ``where(*keys)`` gives ``FILE:LINE`` of a key for later error messages."""

    name: str
    path: Path
    description: str
    models: tuple[ModelEntry, ...]
    data: tuple[DataEntry, ...]
    seeds: tuple[int, ...]
    evaluations: tuple[dict[str, Any], ...]
    launcher: dict[str, dict[str, Any]]
    lines: dict[tuple, int | str] = field(repr=False, compare=False)
    tune: TuneSpec | None = None
    analysis: dict[str, Any] = field(default_factory=dict)  # options of `synbench analyze` (analysis/pipeline.py)
    compare_to: str | None = None  # the full-protocol spec this one scales down (its settings name what is reduced)
    seeds_per_process: int = 1  # seeds of a model trained in one process (``experiments.seed_grouping``)

    def where(self, *keys: str | int) -> str:
        """``FILE:LINE`` of the deepest of ``keys`` that the file spells out (the file alone if none)."""
        return _Locator(self.path, self.lines).where(*keys)


@dataclass(frozen=True)
class Run:
    """One (resolved config, seed) of an experiment, with the ``key=value`` overrides that reproduce it."""

    experiment: str
    run_id: str
    seed: int
    family: str
    preset: str | None
    model: str
    data: str
    overrides: tuple[str, ...]
    evaluations: tuple[dict[str, Any], ...]
    config: dict[str, Any] = field(compare=False, repr=False)
    group: tuple[int, ...] = ()  # the seeds trained in one process with this one (``seeds_per_process``)


# --- locating keys ---


def _key_lines(node: yaml.Node, prefix: tuple = ()) -> dict[tuple, int]:
    """Map each key path (mapping keys and sequence indices) to its 1-based line in the file."""
    out: dict[tuple, int] = {}
    if isinstance(node, yaml.MappingNode):
        for key_node, value_node in node.value:
            path = (*prefix, key_node.value)
            out[path] = key_node.start_mark.line + 1
            out.update(_key_lines(value_node, path))
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            out[(*prefix, i)] = item.start_mark.line + 1
            out.update(_key_lines(item, (*prefix, i)))
    return out


def _key_name(keys: tuple) -> str:
    text = ""
    for k in keys:
        text += f"[{k}]" if isinstance(k, int) else (f".{k}" if text else str(k))
    return text


class _Locator:
    def __init__(self, path: Path, lines: dict[tuple, int | str]):
        self.path, self.lines = path, lines

    def where(self, *keys: str | int) -> str:
        """``FILE:LINE`` of the deepest of ``keys`` that the file spells out."""
        for n in range(len(keys), 0, -1):
            if keys[:n] in self.lines:
                line = self.lines[keys[:n]]  # a line of this file, or FILE:LINE of a family's entries
                return line if isinstance(line, str) else f"{self.path}:{line}"
        return str(self.path)

    def error(self, message: str, *keys: str | int) -> InputError:
        return InputError(f"{_key_name(keys)}: {message}" if keys else message, self.where(*keys))


# --- seeds ---


def parse_seeds(value: Any, location: str = "seeds") -> tuple[int, ...]:
    """``7``, ``"0-99"``, ``"0-9,20-29"``, ``[0, 1, "5-7"]`` -> seeds in the given order; no duplicates."""
    items = value if isinstance(value, list) else [value]
    seeds: list[int] = []
    for item in items:
        if isinstance(item, bool) or not isinstance(item, int | str):
            raise InputError(f"expected a seed, a range like 0-99 or a list, got {item!r}", location)
        for part in str(item).split(","):
            m = re.fullmatch(r"\s*(\d+)\s*(?:-\s*(\d+)\s*)?", part)
            if not m:
                raise InputError(f"bad seed or range {part.strip()!r} (e.g. 7, 0-99, 0-9,20-29)", location)
            lo, hi = int(m[1]), int(m[2] or m[1])
            if hi < lo:
                raise InputError(f"empty seed range {lo}-{hi}", location)
            if len(seeds) + hi - lo + 1 > MAX_SEEDS:
                raise InputError(f"more than {MAX_SEEDS} seeds", location)
            seeds.extend(range(lo, hi + 1))
    if not seeds:
        raise InputError("no seeds given", location)
    dupes = sorted({s for s in seeds if seeds.count(s) > 1}) if len(set(seeds)) != len(seeds) else []
    if dupes:
        raise InputError(f"seed {dupes[0]} is listed twice", location)
    return tuple(seeds)


# --- overrides ---


def _flatten(overrides: Any, loc: _Locator, keys: tuple) -> dict[str, Any]:
    """Nested mappings and dotted keys -> {"a.b.c": value}."""
    if overrides is None:
        return {}
    if not isinstance(overrides, dict):
        raise loc.error("expected a mapping of config keys to values", *keys)
    flat: dict[str, Any] = {}
    for key, value in overrides.items():
        if not isinstance(key, str) or not KEY.fullmatch(key):
            raise loc.error(f"bad config key {key!r} (expected e.g. train.max_steps)", *keys, key)
        if isinstance(value, dict) and value:
            for sub, v in _flatten(value, loc, (*keys, key)).items():
                flat[f"{key}.{sub}"] = v
        elif isinstance(value, dict | list | str | int | float | bool) or value is None:
            flat[key] = value
        else:
            raise loc.error(f"unsupported value {value!r}", *keys, key)
    return flat


def format_override(key: str, value: Any) -> str:
    """``key=value`` that ``experiments.config.parse_overrides`` reads back as exactly ``value``."""
    text = yaml.safe_dump(value, default_flow_style=True, width=2**31, allow_unicode=True).strip()
    if text.endswith("\n..."):
        text = text[: -len("\n...")]
    elif text.endswith("..."):
        text = text[:-3].rstrip()
    if isinstance(value, str) and _FLOAT.fullmatch(text):  # parse_overrides reads a bare 1e3 as a number
        text = "'" + value.replace("'", "''") + "'"
    return f"{key}={text}"


# --- parsing ---


def find_spec(name_or_path: str) -> Path:
    """A spec file: an existing path, or the name of a shipped spec (``smoke``)."""
    path = Path(name_or_path)
    if path.suffix in (".yaml", ".yml") or path.is_file():
        if not path.is_file():
            raise InputError("experiment spec not found", str(path))
        return path
    shipped = configs_dir() / "experiment"
    candidate = shipped / f"{name_or_path}.yaml"
    if NAME.fullmatch(name_or_path) and candidate.is_file():
        return candidate
    known = ", ".join(sorted(p.stem for p in shipped.glob("*.yaml"))) or "none"
    raise InputError(f"no experiment {name_or_path!r} (shipped: {known}; or give a path to a YAML file)")


def load_spec(name_or_path: str | Path) -> ExperimentSpec:
    """Read and validate an experiment spec (a shipped name or a path)."""
    path = find_spec(str(name_or_path))
    data = load_yaml(path)
    with open(path, encoding="utf-8") as f:
        lines = _key_lines(yaml.compose(f, Loader=yaml.SafeLoader))
    return parse_spec(data, path, lines)


def family_entry_files(name: str) -> list[Path]:
    """The entries the registered families ship for the spec ``name``: ``experiments/NAME.yaml`` in each
    adapter's folder, where one exists (by path: one order on every machine)."""
    import inspect

    from experiments.families import get_family, names

    folders = {Path(inspect.getfile(type(get_family(n)))).parent for n in names()}
    return sorted(p for p in (f / "experiments" / f"{name}.yaml" for f in folders) if p.is_file())


def _with_family_entries(data: dict[str, Any], name: str, lines: dict[tuple, Any], loc: _Locator
                         ) -> dict[str, Any]:
    """``data`` with the families' models and evaluations appended (``family_entries: true``); ``lines`` gets
    their ``FILE:LINE`` so every error names the family's file."""
    wanted = data.get("family_entries", False)
    if not isinstance(wanted, bool):
        raise loc.error("expected true or false", "family_entries")
    if not wanted:
        return data
    data = dict(data)
    for file in family_entry_files(name):
        part = load_yaml(file)
        with open(file, encoding="utf-8") as f:
            part_lines = _key_lines(yaml.compose(f, Loader=yaml.SafeLoader))
        part_loc = _Locator(file, part_lines)
        if not isinstance(part, dict):
            raise part_loc.error("expected a mapping with models and evaluations")
        _check_keys(part, (*FAMILY_ENTRY_KEYS, "card"), part_loc, ())
        for key in FAMILY_ENTRY_KEYS:
            entries = part.get(key, [])
            if not isinstance(entries, list):
                raise part_loc.error("expected a list", key)
            mine = data.get(key) or []
            if not isinstance(mine, list):
                raise loc.error("expected a list", key)
            data[key] = [*mine, *entries]
            lines.update({(key, len(mine) + k[1], *k[2:]): f"{file}:{line}" for k, line in part_lines.items()
                          if k[0] == key and len(k) > 1})
    return data


def _check_keys(mapping: dict, allowed: tuple[str, ...], loc: _Locator, keys: tuple) -> None:
    for key in mapping:
        if key not in allowed:
            raise loc.error(f"unknown key (allowed: {', '.join(allowed)})", *keys, key)


def _name(value: Any, loc: _Locator, keys: tuple) -> str:
    if not isinstance(value, str) or not NAME.fullmatch(value):
        raise loc.error(f"expected a name of letters, digits and _.+- (got {value!r})", *keys)
    return value


def _source_model(entry: dict, models: list[ModelEntry], loc: _Locator, keys: tuple) -> ModelEntry:
    """A ``{source: hf:DIR, hf:ORG/NAME@REV or RUN_DIR, name}`` entry: one run (seed 0), evaluated as it is, of
    the family whose models are named by the source's prefix (``hf``), or of the family of a finished run
    folder's checkpoint (``RUN_DIR/checkpoints/best.ckpt``: another experiment's run, or one ``synbench import``
    wrote), whose source is that checkpoint; the path is kept as written, relative paths resolve against the
    directory synbench runs in."""
    from experiments.evaluate.scorers import HF_CONVENTIONS as CONVENTIONS
    from experiments.evaluate.scorers import HF_PREFIX
    from experiments.evaluate.scorers.hub import hub_model
    from experiments.evaluate.word_prob import WORD_PROBS
    from experiments.families import checkpoint_family, source_family

    _check_keys(entry, SOURCE_KEYS, loc, keys)
    source = entry["source"]
    family = source_family(source) if isinstance(source, str) else None
    prefix = family.source_prefix if family else ""
    run_checkpoint = Path(source) / CHECKPOINT if isinstance(source, str) and family is None else None
    if run_checkpoint is not None and run_checkpoint.is_file():
        try:
            family = checkpoint_family(run_checkpoint)[0]
        except InputError as e:
            raise loc.error(f"{run_checkpoint}: {e.message}", *keys, "source") from None
        source = str(run_checkpoint)
        if "hf_convention" in entry:
            raise loc.error(f"applies to {HF_PREFIX} sources only", *keys, "hf_convention")
    elif family is None or len(source) == len(prefix):
        raise loc.error(f"expected {HF_PREFIX}DIR (a local transformers causal LM), {HF_PREFIX}ORG/NAME@REV (one in "
                        f"the local Hugging Face cache) or RUN_DIR (a run folder with {CHECKPOINT}, e.g. from "
                        f"synbench import), got {source!r}", *keys, "source")
    hub = hub_model(source) if prefix else None  # hf:ORG/NAME@REV: labelled NAME-REV, not by the last component
    folder = Path(entry["source"]) if run_checkpoint is not None else Path(source[len(prefix):])
    default = f"{family.name}-" + (hub.label() if hub else folder.name)
    label = _name(entry.get("name", default), loc, (*keys, "name"))
    if any(m.name == label for m in models):
        raise loc.error(f"two models are named {label!r}; give each a distinct 'name'", *keys)
    settings = {key: entry[key] for key in SOURCE_KEYS[2:] if key in entry}
    if settings.get("hf_convention", CONVENTIONS[0]) not in CONVENTIONS:
        raise loc.error(f"expected {' or '.join(CONVENTIONS)}, got {settings['hf_convention']!r}", *keys,
                        "hf_convention")
    if settings.get("word_prob", WORD_PROBS[0]) not in WORD_PROBS:
        raise loc.error(f"expected {' or '.join(WORD_PROBS)}, got {settings['word_prob']!r}", *keys, "word_prob")
    return ModelEntry(label, family.name, None, settings, loc.where(*keys), (0,), source)


def parse_spec(data: dict[str, Any], path: Path, lines: dict[tuple, int | str] | None = None) -> ExperimentSpec:
    """Validate the mapping read from ``path``; ``lines`` maps key paths to lines for error locations."""
    lines = dict(lines or {})
    loc = _Locator(path, lines)
    _check_keys(data, TOP_KEYS, loc, ())
    name = _name(data.get("name", path.stem), loc, ("name",))
    data = _with_family_entries(data, name, lines, loc)
    description = data.get("description", "")
    if not isinstance(description, str):
        raise loc.error("expected a string", "description")

    raw_models = data.get("models")
    if not isinstance(raw_models, list) or not raw_models:
        raise loc.error("expected a non-empty list of {family, name, overrides} entries", "models")
    models: list[ModelEntry] = []
    for i, entry in enumerate(raw_models):
        keys = ("models", i)
        if not isinstance(entry, dict):
            raise loc.error("expected a mapping with at least 'family'", *keys)
        if "source" in entry:
            models.append(_source_model(entry, models, loc, keys))
            continue
        _check_keys(entry, MODEL_KEYS, loc, keys)
        if "family" not in entry:
            raise loc.error("missing 'family'", *keys)
        family = _name(entry["family"], loc, (*keys, "family"))
        label = _name(entry.get("name", family), loc, (*keys, "name"))
        if any(m.name == label for m in models):
            raise loc.error(f"two models are named {label!r}; give each a distinct 'name'", *keys)
        preset = _name(entry["preset"], loc, (*keys, "preset")) if "preset" in entry else None
        overrides = _flatten(entry.get("overrides"), loc, (*keys, "overrides"))
        fixed = parse_seeds(entry["seeds"], loc.where(*keys, "seeds")) if "seeds" in entry else None
        per_process = (_number(entry["seeds_per_process"], loc, (*keys, "seeds_per_process"), integer=True,
                               positive=True) if "seeds_per_process" in entry else None)
        models.append(ModelEntry(label, family, preset, overrides, loc.where(*keys), fixed,
                                 seeds_per_process=per_process))

    raw_data = data.get("data", [])
    if not isinstance(raw_data, list):
        raise loc.error("expected a list of corpus names or {name, overrides} entries", "data")
    entries: list[DataEntry] = []
    for i, entry in enumerate(raw_data):
        keys = ("data", i)
        if isinstance(entry, str):
            entry = {"name": entry, "overrides": {"data.corpus": entry}}
        if not isinstance(entry, dict) or "name" not in entry:
            raise loc.error("expected a corpus name or a mapping with 'name' and 'overrides'", *keys)
        _check_keys(entry, DATA_KEYS, loc, keys)
        label = _name(entry["name"], loc, (*keys, "name"))
        if any(d.name == label for d in entries):
            raise loc.error(f"data {label!r} is listed twice", *keys)
        entries.append(
            DataEntry(label, _flatten(entry.get("overrides"), loc, (*keys, "overrides")), loc.where(*keys))
        )

    if "seeds" not in data:
        raise loc.error("missing 'seeds' (e.g. seeds: 0-9)")
    seeds = parse_seeds(data["seeds"], loc.where("seeds"))
    per_process = _number(data.get("seeds_per_process", 1), loc, ("seeds_per_process",), integer=True, positive=True)

    raw_evals = data.get("evaluations", [])
    if not isinstance(raw_evals, list):
        raise loc.error("expected a list of evaluation names or {name: ..., options} mappings", "evaluations")
    evaluations: list[dict[str, Any]] = []
    for i, entry in enumerate(raw_evals):
        entry = {"name": entry} if isinstance(entry, str) else entry
        if not isinstance(entry, dict) or "name" not in entry:
            raise loc.error("expected an evaluation name or a mapping with 'name'", "evaluations", i)
        _name(entry["name"], loc, ("evaluations", i, "name"))
        evaluations.append(dict(entry))

    launcher = data.get("launcher", {}) or {}
    if not isinstance(launcher, dict) or not all(isinstance(v, dict) for v in launcher.values()):
        raise loc.error("expected a mapping of executor name to its options", "launcher")
    _check_keys(launcher, ("local", "slurm", "submitit"), loc, ("launcher",))

    tune = _parse_tune(data["tune"], loc, models, entries, seeds) if data.get("tune") is not None else None
    analysis = data.get("analysis") or {}
    if not isinstance(analysis, dict):
        raise loc.error("expected a mapping of analysis options", "analysis")
    compare_to = data.get("compare_to")
    if compare_to is not None:
        _name(compare_to, loc, ("compare_to",))
    return ExperimentSpec(
        name,
        path,
        description,
        tuple(models),
        tuple(entries),
        seeds,
        tuple(evaluations),
        {k: dict(v) for k, v in launcher.items()},
        lines,
        tune,
        dict(analysis),
        compare_to,
        int(per_process),
    )


def _number(value: Any, loc: _Locator, keys: tuple, integer: bool = False, positive: bool = False
            ) -> float | int:
    if isinstance(value, bool) or not isinstance(value, int if integer else int | float):
        hint = " (YAML reads 1e-4 as text: write 1.0e-4)" if isinstance(value, str) else ""
        raise loc.error(f"expected {'an integer' if integer else 'a number'}, got {value!r}{hint}", *keys)
    if positive and value <= 0:
        raise loc.error(f"expected a positive {'integer' if integer else 'number'}, got {value!r}", *keys)
    return value


def _parse_param(key: str, entry: Any, loc: _Locator, keys: tuple) -> TuneParam:
    if not KEY.fullmatch(key):
        raise loc.error(f"bad config key {key!r} (expected e.g. model.peak_lr)", *keys)
    if not isinstance(entry, dict) or entry.get("type") not in PARAM_KEYS:
        raise loc.error("expected {type: float|int|categorical, ...}", *keys)
    kind = entry["type"]
    _check_keys(entry, PARAM_KEYS[kind], loc, keys)
    if kind == "categorical":
        choices = entry.get("choices")
        if not isinstance(choices, list) or not choices or not all(
            c is None or isinstance(c, str | int | float | bool) for c in choices
        ):
            raise loc.error("expected a non-empty list of scalar choices", *keys, "choices")
        return TuneParam(key, kind, choices=tuple(choices), where=loc.where(*keys))
    for bound in ("low", "high"):
        if bound not in entry:
            raise loc.error(f"missing '{bound}'", *keys)
    integer = kind == "int"
    low, high = (_number(entry[b], loc, (*keys, b), integer) for b in ("low", "high"))
    if high < low:
        raise loc.error(f"high {high} is below low {low}", *keys, "high")
    log = entry.get("log", False)
    if not isinstance(log, bool):
        raise loc.error(f"expected true or false, got {log!r}", *keys, "log")
    if log and low <= 0:
        raise loc.error("a log-scale range needs low > 0", *keys, "low")
    step = _number(entry["step"], loc, (*keys, "step"), integer) if entry.get("step") is not None else None
    if step is not None and (step <= 0 or log):
        raise loc.error("step must be positive and cannot be combined with log", *keys, "step")
    return TuneParam(key, kind, low, high, log, step, where=loc.where(*keys))


def _parse_tune(
    raw: Any, loc: _Locator, models: list[ModelEntry], data: list[DataEntry], seeds: tuple[int, ...]
) -> TuneSpec:
    if not isinstance(raw, dict):
        raise loc.error("expected a mapping with 'params'", "tune")
    _check_keys(raw, TUNE_KEYS, loc, ("tune",))
    model = raw.get("model", models[0].name)
    if model not in [m.name for m in models]:
        known = ", ".join(m.name for m in models)
        raise loc.error(f"no model named {model!r} (models: {known})", "tune", "model")
    data_name = raw.get("data", data[0].name if data else None)
    if data_name is not None and data_name not in [d.name for d in data]:
        raise loc.error(f"no data entry named {data_name!r}", "tune", "data")
    seed = _number(raw.get("seed", seeds[0]), loc, ("tune", "seed"), integer=True)
    params = raw.get("params")
    if not isinstance(params, dict) or not params:
        raise loc.error("expected a mapping of config keys to distributions", "tune", "params")
    parsed = tuple(_parse_param(k, v, loc, ("tune", "params", k)) for k, v in params.items())
    pruner = raw.get("pruner", {})
    if pruner in ("none", None, False):
        pruner = None
    elif not isinstance(pruner, dict):
        raise loc.error("expected {n_startup_trials, n_warmup_steps} or none", "tune", "pruner")
    else:
        _check_keys(pruner, ("n_startup_trials", "n_warmup_steps"), loc, ("tune", "pruner"))
        pruner = {k: int(_number(v, loc, ("tune", "pruner", k), integer=True)) for k, v in pruner.items()}
    sampler_seed = raw.get("sampler_seed")
    if sampler_seed is not None:
        sampler_seed = int(_number(sampler_seed, loc, ("tune", "sampler_seed"), integer=True))
    heartbeat = int(_number(raw.get("heartbeat_s", 30), loc, ("tune", "heartbeat_s"), integer=True))
    retries = int(_number(raw.get("max_retry", 3), loc, ("tune", "max_retry"), integer=True))
    if heartbeat < 1 or retries < 0:
        raise loc.error("heartbeat_s must be >= 1 and max_retry >= 0", "tune")
    return TuneSpec(model, data_name, int(seed), parsed, pruner, sampler_seed, heartbeat, retries,
                    loc.where("tune"))


# --- expansion ---


def _default_corpus(spec: ExperimentSpec, resolve: Resolver) -> str:
    """The corpus a source model's evaluations default to without data entries: the first trained model's."""
    trained = next((m for m in spec.models if m.source is None), None)
    if trained is None:
        return "ptb-sample"
    return resolve(trained.family, trained.preset, [format_override(k, v) for k, v in trained.overrides.items()]
                   )["data"]["corpus"]


def seeds_per_process(spec: ExperimentSpec, model: ModelEntry, stacks: Callable[[str], bool] | None) -> int:
    """The seeds of ``model`` trained in one process: its ``seeds_per_process``, else the spec's; 1 for a
    family that cannot stack seeds (``stacks(family)`` false: ``Family.stacks_seeds``) or a pretrained model."""
    wanted = model.seeds_per_process or spec.seeds_per_process
    if wanted == 1 or model.source is not None or stacks is None or not stacks(model.family):
        return 1
    return wanted


def expand(spec: ExperimentSpec, resolve: Resolver, seeds: tuple[int, ...] | None = None,
           stacks: Callable[[str], bool] | None = None) -> list[Run]:
    """All runs of the spec (models x data x seeds, in that order); ``seeds`` replaces the spec's seeds (not
    the fixed ``seeds`` of a model entry, e.g. the one proposal parser every seed of the LMs shares).

    ``stacks(family)`` says whether a family trains seed groups (None: no family does). Where a model's seeds
    train in groups (``seeds_per_process``) and the group changes what they compute (dropout), each run
    carries its group in ``runtime.seed_group`` (an override too, so ``synbench train`` resolves the same id).

    ``resolve(family, preset, overrides)`` must resolve exactly as ``synbench train`` does (with
    ``experiments.config.resolve_train_config``, and train's default preset when ``preset`` is None); its
    ``InputError`` is re-raised at the spec location of the model or data entry responsible."""
    runs: list[Run] = []
    seen: dict[str, str] = {}
    cells = [(m, d) for m in spec.models for d in (spec.data or (None,))]
    for model, data in cells:
        merged = dict(model.overrides)
        if data is not None:
            clash = sorted(set(merged) & set(data.overrides))
            if clash:
                raise InputError(
                    f"data {data.name!r} sets {clash[0]}, which model {model.name!r} sets too", data.where
                )
            merged.update(data.overrides)
        overrides = [format_override(k, v) for k, v in merged.items()]
        try:
            if model.source is not None:  # a pretrained model: its config names the source, nothing to resolve
                config = {"family": model.family, "source": model.source,
                          "data": {"corpus": data.name if data else _default_corpus(spec, resolve)}, **model.overrides}
                overrides = []
            else:
                config = resolve(model.family, model.preset, overrides)
        except InputError as e:
            where = data.where if data is not None and e.location in (data.overrides or {}) else model.where
            raise InputError(
                f"model {model.name!r}{f' on {data.name!r}' if data else ''}: {e}", where
            ) from None
        base = (overrides, config)
        per_process = seeds_per_process(spec, model, stacks)
        label = f"{model.name}/{data.name}" if data else model.name
        for group in seed_groups(model.seeds or (seeds if seeds is not None else spec.seeds), per_process):
            overrides, config = base
            if len(group) > 1 and changes_results(config):
                overrides = [*overrides, format_override("runtime.seed_group", group_label(group))]
                config = group_config(config, group)
            for seed in group:
                rid = run_id(config, seed)
                if rid in seen:
                    raise InputError(f"{label} and {seen[rid]} are the same run ({rid}); remove one", model.where)
                seen[rid] = label
                runs.append(Run(spec.name, rid, seed, model.family, model.preset, model.name,
                                data.name if data else "", tuple(overrides), spec.evaluations, config, group))
    return runs
