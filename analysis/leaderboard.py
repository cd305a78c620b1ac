"""``synbench leaderboard``: finished experiments merged into one table, when their protocols match.

An experiment is its folder (``RUNS/EXPERIMENT``, as ``submit``/``evaluate``/``reproduce`` write it) with the
tables ``synbench aggregate`` (or ``analyze``, ``reproduce``) wrote under ``aggregate/``. Its **protocol** is
read from what the runs recorded, never from names: for every evaluation (a task, or a labelled ``task@label``)
the sha256 of the very items scored (``results.json``'s ``config.data_sha256``: the sentences, SG items or
BLiMP pairs, so corpus, split, subset sizes and tokenization are all in it), and the training data of the
trained runs (``config.json``'s ``data.corpus`` and splits). Two experiments merge when every part of the
protocol they both have is equal; the first difference is one error line naming it. An evaluation only one
of them ran is no conflict: its column is ``n/a`` for the other's rows.

The table has a row per (experiment, model): its family, seeds, parameters when the run recorded them, each
headline metric (``experiments.evaluate.tasks``) as mean ± sd over seeds, and how its perplexity was scored.
Its units are the report's (``analysis.report``): SG, BLiMP and their breakdowns in percent (``sg (%)``), numbers
past 1e6 in scientific notation. The JSON keeps the values as measured (SG and BLiMP as fractions) and says so
per metric in ``units``.
"""

from __future__ import annotations

import csv
import json
import math
import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from analysis.eval_results import result_folders
from analysis.report.blocks import Paragraph, Table
from analysis.report.formatting import mean_sd, readable
from analysis.report.render import render_markdown
from experiments.evaluate import tasks
from experiments.papers import percent_scale
from lightning_modules.errors import InputError

AGGREGATE = "aggregate"
TRAINING = "training data"


@dataclass(frozen=True)
class Part:
    """One part of a protocol: the recorded value that must match, and what it is in words."""

    value: str
    described: str


@dataclass
class Experiment:
    """A finished experiment's rows (from its aggregate tables) and its protocol (from its runs' records)."""

    folder: Path
    name: str
    rows: list[dict[str, Any]]  # metrics_long rows of DONE runs
    runs: list[dict[str, str]]  # metrics_wide rows of DONE runs: run_id, model, family, seed
    scoring: dict[str, Any]  # summary.json's: {task: {model: [{method, description}]}}
    protocol: dict[str, Part] = field(default_factory=dict)


def _csv(path: Path) -> list[dict[str, str]]:
    if not path.is_file():
        raise InputError(f"no {AGGREGATE}/{path.name}: run synbench aggregate on this experiment first",
                         str(path.parent.parent))
    with path.open(newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def _json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise InputError(f"unreadable ({type(e).__name__})", str(path)) from None
    if not isinstance(data, dict):
        raise InputError("expected a JSON object", str(path))
    return data


def read_experiment(folder: Path) -> Experiment:
    """An experiment folder's aggregate tables and the protocol its DONE runs recorded."""
    folder = Path(folder)
    if not folder.is_dir():
        raise InputError("not an experiment folder", str(folder))
    table = folder / AGGREGATE
    runs = [r for r in _csv(table / "metrics_wide.csv") if r.get("state") == "DONE"]
    if not runs:
        raise InputError("no finished run in its aggregate tables", str(folder))
    done = {r["run_id"] for r in runs}
    rows = [r for r in _csv(table / "metrics_long.csv") if r["run_id"] in done]
    summary = _json(table / "summary.json") if (table / "summary.json").is_file() else {}
    experiment = Experiment(folder, runs[0].get("experiment") or folder.name, rows, runs,
                            summary.get("scoring") or {})
    experiment.protocol = protocol(folder, [r["run_id"] for r in runs])
    return experiment


def protocol(folder: Path, run_ids: list[str]) -> dict[str, Part]:
    """The protocol of an experiment's runs: the items of each evaluation, the training data."""
    items: dict[str, dict[str, set[str]]] = {}
    training: set[str] = set()
    for run_id in run_ids:
        run = folder / run_id
        config = run / "config.json"
        data = _json(config).get("data") if config.is_file() else None
        if isinstance(data, dict) and data.get("corpus"):
            training.add(f"{data['corpus']} ({data.get('train_split')} / {data.get('valid_split')})")
        found, _ = result_folders(run)
        for task, results in found.items():
            record = _json(results / "results.json")
            sha = (record.get("config") or {}).get("data_sha256")
            if sha is None:  # an evaluation that does not record its items (none of the shipped tasks)
                continue
            what = _described(task, record)
            entry = items.setdefault(task, {"sha": set(), "what": set()})
            entry["sha"].add(str(sha))
            entry["what"].add(what)
    out = {task: Part(" ".join(sorted(e["sha"])), " / ".join(sorted(e["what"]))) for task, e in sorted(items.items())}
    if training:
        out[TRAINING] = Part(" / ".join(sorted(training)), " / ".join(sorted(training)))
    return out


def _described(task: str, record: dict[str, Any]) -> str:
    """An evaluation's items in words: its corpus, the task's own options as set (``limit``, ``suites``,
    ``items_per_suite``, ...; not the scoring method's) and the number of items."""
    settings = record.get("settings") or {}
    own = [o for o in tasks.get(tasks.unlabelled(task)).options
           if o not in (*tasks.COMMON_OPTIONS, *tasks.SCORING_OPTIONS, *tasks.NETWORK_OPTIONS, "corpus", "split")]
    parts = [str(settings["corpus"])] if settings.get("corpus") else []
    for option in own:
        value = settings.get(option)
        if value is not None:
            parts.append(f"{option} {','.join(map(str, value)) if isinstance(value, list) else value}")
    n = record.get("n_items")
    return ", ".join([*parts, f"{n} item{'' if n == 1 else 's'}"])


def check_compatible(experiments: list[Experiment]) -> None:
    """Every protocol part two of the experiments share must be equal: the first difference is an error."""
    names: dict[str, Path] = {}
    for e in experiments:
        if e.name in names:
            raise InputError(f"experiment {e.name!r} is given twice (also {names[e.name]})", str(e.folder))
        names[e.name] = e.folder
    for k, other in enumerate(experiments):
        for first in experiments[:k]:
            _check_pair(first, other)


def _check_pair(first: Experiment, other: Experiment) -> None:
    """The first protocol part ``first`` and ``other`` both have and disagree on is an error at ``other``."""
    for key in sorted(first.protocol.keys() & other.protocol.keys()):
        a, b = first.protocol[key], other.protocol[key]
        if a.value == b.value:
            continue
        what = "trained on other data" if key == TRAINING else f"scored {key} on other items"
        detail = (f"{a.described} vs {b.described}" if key == TRAINING else
                  f"{a.described}, sha256 {a.value[:12]} vs {b.described}, sha256 {b.value[:12]}")
        raise InputError(f"{what} than {first.folder} ({detail}): the protocols differ, not merged",
                         str(other.folder))


def _summary(values: list[float]) -> dict[str, Any]:
    sd = statistics.stdev(values) if len(values) > 1 else None
    return {"mean": statistics.fmean(values), "sd": sd, "n": len(values)}


def merge(experiments: list[Experiment]) -> dict[str, Any]:
    """The merged table (JSON-ready): the metrics shown, the shared protocol and one row per model."""
    check_compatible(experiments)
    headline = tasks.headline_metrics()
    present = {r["metric"] for e in experiments for r in e.rows}
    metrics = sorted((m for m in present if tasks.unlabelled(m) in headline),
                     key=lambda m: (headline.index(tasks.unlabelled(m)), m))
    rows = []
    for e in experiments:
        models = list(dict.fromkeys(r["model"] for r in e.runs))
        for model in models:
            runs = [r for r in e.runs if r["model"] == model]
            values: dict[str, list[float]] = {}
            for r in e.rows:
                if r["model"] == model:
                    values.setdefault(r["metric"], []).append(float(r["value"]))
            parameters = values.get("parameters")
            rows.append({
                "experiment": e.name, "model": model, "family": runs[0]["family"],
                "seeds": sorted(int(r["seed"]) for r in runs),
                "parameters": int(parameters[0]) if parameters else None,
                "metrics": {m: _summary(values[m]) for m in metrics if m in values},
                "ppl_scoring": "; ".join(s["description"] for s in e.scoring.get("ppl", {}).get(model, [])) or None,
            })
    shared: dict[str, str] = {}
    for e in experiments:
        for key, part in e.protocol.items():
            shared.setdefault(key, part.described)
    return {"experiments": [{"name": e.name, "folder": str(e.folder)} for e in experiments],
            "protocol": shared, "metrics": metrics, "units": {m: unit(m) for m in metrics}, "rows": rows}


def unit(metric: str) -> str:
    """How the JSON gives ``metric``'s values: ``fraction`` (shown in percent in the table and the report) or
    ``as measured``."""
    return "fraction" if percent_scale(metric) == 100.0 else "as measured"


def _header(metric: str) -> str:
    """A metric's column: its name, with ``(%)`` where the table shows it in percent."""
    return f"{metric} (%)" if percent_scale(metric) == 100.0 else metric


def markdown(merged: dict[str, Any]) -> str:
    """The merged table as Markdown, with the protocol the experiments share under it."""
    metrics = merged["metrics"]
    header = ["experiment", "model", "family", "seeds", "parameters", *(_header(m) for m in metrics), "ppl scored by"]
    body = []
    for row in merged["rows"]:
        cells = [row["experiment"], row["model"], row["family"], str(len(row["seeds"])),
                 readable(row["parameters"]) if row["parameters"] is not None else "n/a"]
        for m in metrics:
            s = row["metrics"].get(m)
            sd = s["sd"] if s and s["sd"] is not None else math.nan
            cells.append(mean_sd(s["mean"], sd, percent_scale(m)) if s else "n/a")
        body.append([*cells, row["ppl_scoring"] or "n/a"])
    protocol_text = "; ".join(f"{key}: {what}" for key, what in merged["protocol"].items()) or "nothing recorded"
    return render_markdown([Table(header, body), Paragraph(f"Shared protocol: {protocol_text}.")])
