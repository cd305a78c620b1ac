"""All runs of an experiment x their final metrics as one tidy table (Parquet and CSV), from the run folders.

The filesystem is the source of truth: the table is built from each run's ``DONE`` marker (the final training
metrics), its evaluation results (``RUN/eval/*/results.json``, named as in ``eval_results.py``: ``ppl``,
``sg``, ``sg.circuit.*``, ``blimp``, ``f1``, ...) and the experiment spec (which runs exist, their model,
data, seed and config hash), never from W&B. It reads a few small files per run and imports neither torch nor
Lightning, so hundreds of runs take a second.

Written to ``RUNS/EXPERIMENT/aggregate/`` (or ``--out``), each file atomically:

- ``metrics_long.{parquet,csv}``: one row per (DONE run, numeric metric): ``experiment, run_id, model, family,
  data, seed, config_hash, metric, value`` -- the shape statistics over seeds want.
- ``metrics_wide.{parquet,csv}``: one row per run of the spec (missing and failed ones included, with
  ``state`` and ``error``), one column per metric (text metrics such as scoring conventions included).
- ``items_long.{parquet,csv}``: item-level evaluation outcomes, one row per (DONE run, SG item or BLiMP
  pair): ``experiment, run_id, model, family, data, seed, task, item, value``.
- ``metrics_by_step.{parquet,csv}``: the metrics of the checkpoints kept over training (``train.keep_every``,
  evaluated by ``evaluate --checkpoints all``), one row per (DONE run, step, metric): the ``metrics_long``
  columns with ``step`` before ``metric`` (``analysis.learning_curves`` draws them).
- ``summary.json``: counts, the failed, running and missing runs by id, notes (e.g. ambiguous results), and
  ``scoring``: how each model's numbers of each evaluation were scored (``{task: {model: [{method,
  description}]}}``, from the results' settings; more than one entry when its seeds differ).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

from analysis.eval_results import run_items, run_metrics, step_metrics
from experiments.config import config_hash
from experiments.evaluate import tasks
from experiments.experiment_runs import experiment_dir, experiment_runs, folder_of
from experiments.experiment_spec import ExperimentSpec
from experiments.runs import read_timing, run_status
from lightning_modules.data.atomic import atomic_write_text, atomic_write_with
from lightning_modules.numeric import is_number

ID_COLUMNS = ("experiment", "run_id", "model", "family", "data", "seed", "config_hash")
IDENTITY_METRICS = ("family", "seed")  # repeated in DONE for convenience; already identity columns


@dataclass
class Aggregate:
    """The tables (pandas DataFrames), the summary and where they were written."""

    long: Any
    wide: Any
    summary: dict[str, Any]
    items: Any
    out_dir: Path
    steps: Any = None  # metrics_by_step


def collect(
    spec: ExperimentSpec, root: Path, seeds: str | None = None
) -> tuple[list[dict], list[dict], dict, list[dict], list[dict]]:
    """(long rows, wide rows, summary, item rows, step rows) of every run of ``spec`` under ``root``."""
    long_rows: list[dict[str, Any]] = []
    item_rows: list[dict[str, Any]] = []
    step_rows: list[dict[str, Any]] = []
    notes: list[str] = []
    wide_rows: list[dict[str, Any]] = []
    failed: list[dict[str, Any]] = []
    running: list[str] = []
    missing: list[str] = []
    hashes: dict[int, str] = {}
    scoring: dict[str, dict[str, list[dict[str, str]]]] = {}
    evaluated_on: dict[str, dict[str, set[Scored]]] = {}
    for run in experiment_runs(spec, seeds):
        ident = {
            "experiment": spec.name,
            "run_id": run.run_id,
            "model": run.model,
            "family": run.family,
            "data": run.data or str(run.config.get("data", {}).get("corpus", "")),  # spec without a data list
            "seed": run.seed,
            "config_hash": hashes.setdefault(id(run.config), config_hash(run.config)[:10]),
        }
        folder = folder_of(root, run)
        status = run_status(folder, run.run_id, run.seed)
        metrics = {k: v for k, v in (status.metrics or {}).items() if k not in IDENTITY_METRICS}
        if status.state == "DONE":
            evaluated, eval_settings, eval_notes = run_metrics(folder)
            metrics.update(read_timing(folder))
            metrics.update(evaluated)
            _add_scoring(scoring, run.model, eval_settings)
            level = run.config.get("data", {}).get("level", "sentence")
            for name, what in _evaluated_on(ident["data"], level, metrics, eval_settings).items():
                evaluated_on.setdefault(name, {}).setdefault(run.model, set()).add(what)
            notes.extend(f"{run.run_id}: {note}" for note in eval_notes)
            item_rows.extend({**{k: ident[k] for k in ID_COLUMNS[:6]}, **row} for row in run_items(folder))
            by_step, step_notes = step_metrics(folder)
            step_rows.extend({**ident, **row} for row in by_step)
            notes.extend(f"{run.run_id}: {note}" for note in step_notes)
        wide_rows.append({**ident, "state": status.state, "error": status.error, **metrics})
        if status.state == "DONE":
            for name in sorted(metrics):
                value = metrics[name]
                if is_number(value, finite=True):
                    long_rows.append({**ident, "metric": name, "value": float(value)})
        elif status.state == "FAILED":
            failed.append({"run_id": run.run_id, "seed": run.seed, "error": status.error})
        elif status.state == "RUNNING":
            running.append(run.run_id)
        else:
            missing.append(run.run_id)
    summary = {
        "experiment": spec.name,
        "runs": len(wide_rows),
        "done": len(wide_rows) - len(failed) - len(running) - len(missing),
        "failed": failed,
        "running": running,
        "missing": missing,
        "metrics": sorted({row["metric"] for row in long_rows}),
        "notes": notes,
        "scoring": scoring,
        "evaluated_on": _described(evaluated_on),
    }
    return long_rows, wide_rows, summary, item_rows, step_rows


class Scored(NamedTuple):
    """What one run's metric was computed on: a corpus (or task), the fingerprint of its words when the eval
    records one (``words_sha256``), and the rest (level, item count)."""

    source: str
    words: str | None
    rest: str


def _evaluated_on(data: str, level: str, metrics: dict[str, Any], eval_settings: dict[str, Any]
                  ) -> dict[str, Scored]:
    """What each metric of one run was computed on: two models' values of a metric are comparable only when
    these agree (the Welch tests check it). An evaluation's metric: its corpus (or task), words, level and
    item count; a training metric: the run's data, level and the number of validation tokens its loss averages
    over (TG's actions and TXL (terminals)' words differ)."""
    described: dict[str, Scored] = {}
    for task, settings in eval_settings.items():
        parts = [f"{settings['level']} level"] if settings.get("level") else []
        parts += [f"{settings['n_items']} items"] if settings.get("n_items") is not None else []
        what = Scored(str(settings.get("corpus") or tasks.unlabelled(task)), settings.get("words_sha256"),
                      ", ".join(parts))
        described.update(dict.fromkeys(settings.get("metrics", []), what))
    tokens = f", {metrics['val_tokens']} validation tokens" if "val_tokens" in metrics else ""
    training = Scored(f"{data} in training", None, f"{level} level{tokens}")
    return {name: described.get(name, training) for name in metrics}


def _described(evaluated_on: dict[str, dict[str, set[Scored]]]) -> dict[str, dict[str, str]]:
    """{metric: {model: what its values were computed on, in words}}; corpora of the same words (a treebank's
    test split and its dependency conversions') are named together, ``ptb-sample/test = ptb-sample-sd/test``, so
    the models scored on them count as scored on the same items."""
    aliases: dict[str, set[str]] = {}
    for by_model in evaluated_on.values():
        for scored in by_model.values():
            for what in scored:
                if what.words:
                    aliases.setdefault(what.words, set()).add(what.source)

    def words(what: Scored) -> str:
        source = " = ".join(sorted(aliases[what.words])) if what.words else what.source
        return ", ".join(p for p in (source, what.rest) if p)

    return {name: {model: " / ".join(sorted(map(words, scored))) for model, scored in by_model.items()}
            for name, by_model in sorted(evaluated_on.items())}


def _add_scoring(scoring: dict[str, dict[str, list[dict[str, str]]]], model: str,
                 eval_settings: dict[str, Any]) -> None:
    """Record how ``model``'s evaluations were scored (method and its one-line description) per task."""
    for task, settings in sorted(eval_settings.items()):
        if not isinstance(settings, dict) or not isinstance(settings.get("method"), str):
            continue  # a task the family evaluates itself (parsing, Dyck): no scoring method
        entry = {"method": settings["method"], "description": str(settings.get("description") or settings["method"])}
        known = scoring.setdefault(task, {}).setdefault(model, [])
        if entry not in known:
            known.append(entry)


def aggregate_experiment(
    spec: ExperimentSpec, root: Path, seeds: str | None = None, out_dir: Path | None = None
) -> Aggregate:
    """Build the tables of ``spec``'s runs under ``root`` and write them to ``out_dir``."""
    import pandas as pd

    long_rows, wide_rows, summary, item_rows, step_rows = collect(spec, Path(root), seeds)
    long = pd.DataFrame(long_rows, columns=[*ID_COLUMNS, "metric", "value"])
    long["seed"] = long["seed"].astype("int64")
    long["value"] = long["value"].astype("float64")
    wide = pd.DataFrame(wide_rows)
    items = pd.DataFrame(item_rows, columns=[*ID_COLUMNS[:6], "task", "item", "value"])
    items["value"] = items["value"].astype("float64")
    steps = pd.DataFrame(step_rows, columns=[*ID_COLUMNS, "step", "metric", "value"])
    steps = steps.astype({"seed": "int64", "step": "int64", "value": "float64"})
    out_dir = Path(out_dir) if out_dir is not None else experiment_dir(root, spec) / "aggregate"
    out_dir.mkdir(parents=True, exist_ok=True)
    for name, table in (("metrics_long", long), ("metrics_wide", wide), ("items_long", items),
                        ("metrics_by_step", steps)):
        atomic_write_with(out_dir / f"{name}.parquet", lambda f, t=table: t.to_parquet(f, index=False))
        atomic_write_text(out_dir / f"{name}.csv", table.to_csv(index=False))
    atomic_write_text(out_dir / "summary.json", json.dumps(summary, indent=2) + "\n")
    return Aggregate(long, wide, summary, items, out_dir, steps)
