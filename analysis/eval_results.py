"""A run's evaluation results (``RUN/eval/*/results.json``) as flat metrics and item-level outcomes.

Metric names (what the analysis tables and the report use) are each task's (``experiments.evaluate.tasks``:
its ``flatten``), e.g. ``ppl`` (word perplexity, a bound for joint models), ``sg`` and ``sg.circuit.<circuit>``,
``blimp`` and ``blimp.phenomenon.<phenomenon>``, ``f1`` (reranking bracket F1), ``parse_f1``, ``uas``,
``dyck.<set>``.

Which folder: ``eval/<task>`` (what ``synbench evaluate``/``reproduce`` write) when present, otherwise the one
``eval/<task>-<hash>`` folder of a manual ``synbench eval``; several such folders and no canonical one is
ambiguous and reported, not guessed. A labelled entry's ``eval/<task>@<label>`` (the same task on another
corpus) gives the task's metrics named ``<metric>@<label>``. The evaluations of the checkpoints a run kept over
training (``RUN/steps/step-NNNNNN/eval``) are read the same way, by step (``step_metrics``). Reads JSON only (no
torch, no pandas).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from experiments.evaluate import tasks
from experiments.runs import step_folders
from lightning_modules.numeric import is_number


def result_folders(run_dir: Path) -> tuple[dict[str, Path], list[str]]:
    """({task or task@label: folder with results.json}, notes about ambiguous tasks)."""
    root = Path(run_dir) / "eval"
    found: dict[str, Path] = {}
    notes: list[str] = []
    if not root.is_dir():
        return found, notes
    for task in (t.name for t in tasks.tasks() if t.flatten is not None):
        for folder in sorted(root.glob(tasks.labelled(task, "*"))):
            if (folder / "results.json").is_file():
                found[folder.name] = folder
        canonical = root / task
        if (canonical / "results.json").is_file():
            found[task] = canonical
            continue
        # TASK-HASH folders; not another task's (uas-rerank is not a hashed uas)
        hashed = sorted(p for p in root.glob(f"{task}-*") if (p / "results.json").is_file()
                        and re.fullmatch(r"[0-9a-f]+", p.name[len(task) + 1:]))
        if len(hashed) == 1:
            found[task] = hashed[0]
        elif hashed:
            notes.append(f"{task}: {len(hashed)} result folders ({', '.join(p.name for p in hashed)}); "
                         f"none used (put the one to report in eval/{task})")
    return found, notes


def _read(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) and isinstance(data.get("metrics"), dict) else None


def run_metrics(run_dir: Path) -> tuple[dict[str, float], dict[str, Any], list[str]]:
    """(metrics, the settings of each task's evaluation, notes) of one run's evaluations.

    Each task's settings also hold its ``n_items`` and the names of the ``metrics`` it gave."""
    folders, notes = result_folders(run_dir)
    metrics: dict[str, float] = {}
    settings: dict[str, Any] = {}
    for task, folder in folders.items():
        record = _read(folder / "results.json")
        if record is None:
            notes.append(f"{task}: unreadable {folder / 'results.json'}")
            continue
        m = record["metrics"]
        settings[task] = {**record.get("settings", {}), "convention": record.get("convention"),
                          "n_items": record.get("n_items")}
        label = task[len(tasks.unlabelled(task)) + 1:] or None
        try:
            flat = tasks.get(tasks.unlabelled(task)).flatten(m)  # type: ignore[misc]  # result_folders: flatten set
        except (KeyError, TypeError, AttributeError):
            notes.append(f"{task}: results.json lacks the expected metrics ({folder})")
            continue
        named = {tasks.labelled(k, label): v for k, v in flat.items()}
        metrics.update(named)
        settings[task]["metrics"] = sorted(named)
    return metrics, settings, notes


def step_metrics(run_dir: Path) -> tuple[list[dict[str, Any]], list[str]]:
    """The metrics of each checkpoint the run kept over training and ``evaluate --checkpoints all`` evaluated
    (``RUN/steps/step-NNNNNN/eval``, read as a run's own ``eval``): rows ``{"step", "metric", "value"}`` of the
    finite numbers, in step order, and notes (each with its step)."""
    rows: list[dict[str, Any]] = []
    notes: list[str] = []
    for step, folder in step_folders(run_dir).items():
        metrics, _, found = run_metrics(folder)
        rows += [{"step": step, "metric": name, "value": float(value)} for name, value in sorted(metrics.items())
                 if is_number(value, finite=True)]
        notes += [f"step {step}: {note}" for note in found]
    return rows, notes


def run_items(run_dir: Path) -> list[dict[str, Any]]:
    """Item-level outcomes of a run: ``{"task", "item", "value"}`` for SG items (prediction 1 holds) and
    BLiMP pairs (log p(good) > log p(bad))."""
    folders, _ = result_folders(run_dir)
    rows: list[dict[str, Any]] = []
    if "sg" in folders:
        record = _read(folders["sg"] / "results.json")
        for suite, scored in ((record or {}).get("metrics", {}).get("suites") or {}).items():
            for item, passed in scored.get("items", {}).items():
                rows.append({"task": "sg", "item": f"{suite}/{item}", "value": float(bool(passed))})
    if "blimp" in folders:
        path = folders["blimp"] / "items.jsonl"
        if path.is_file():
            for line in path.read_text(encoding="utf-8").splitlines():
                try:
                    r = json.loads(line)
                    rows.append({"task": "blimp", "item": str(r["id"]),
                                 "value": float(r["logprob_good"] > r["logprob_bad"])})
                except (ValueError, KeyError, TypeError):
                    continue
    return rows
