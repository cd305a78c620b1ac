"""Reading the report's inputs from ``RUNS/EXPERIMENT/analysis/``, never raising on a file's content.

``settings.json`` (scale, seeds, data, reduced settings, models, skipped analyses, scoring, proposal sets),
``summary.csv``, ``welch.csv``, ``claims.csv``, ``variance.csv``, ``mdl.csv``, ``comparison.csv``,
``regressions.json`` and ``figures/notes.json``. A file that is missing, unreadable, malformed or empty is not in
``Sources``; its ``problems`` entry says why, and the sections say so in the report.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from analysis import figures as fig
from lightning_modules.errors import InputError


@dataclass
class Sources:
    """What the report read from the analysis folder; ``problems[name]`` says why a file is not usable."""

    analysis_dir: Path
    out_dir: Path
    settings: dict[str, Any] = field(default_factory=dict)
    tables: dict[str, Any] = field(default_factory=dict)  # summary, welch, variance, mdl DataFrames
    regressions: dict[str, Any] | None = None
    figure_notes: list[str] = field(default_factory=list)
    problems: dict[str, str] = field(default_factory=dict)

    def local(self, text: str) -> str:
        """``text`` with the experiment folder's absolute path left out: a proposal file is named from the
        experiment folder (``proposals/PARSER_RUN/SET.jsonl``), as the report's reader finds it beside the
        report, not from this machine's root."""
        experiment = self.analysis_dir.parent
        for prefix in dict.fromkeys((str(experiment.resolve()), str(experiment.absolute()))):
            text = text.replace(prefix + "/", "")
        return text


CSV_COLUMNS = {
    "summary": ("metric", "model", "n", "mean", "sd"),
    "welch": ("metric", "model_a", "model_b", "t", "df", "p", "p_adjusted"),
    "variance": ("task", "model"),
    "mdl": ("model", "representation", "task", "layer", "probe", "online_bits", "compression"),
}
# read when present: an analysis written before the comparison existed has none (no problem, no section)
OPTIONAL_CSV_COLUMNS = {
    "comparison": ("model", "family", "metric", "n", "mean", "sd", "ci_low", "ci_high", "detail"),
    "claims": ("paper", "claim", "metric", "where", "statement", "published_better", "published_worse",
               "mean_better", "mean_worse", "p", "p_adjusted", "verdict"),  # only when some claim's models ran
}

LABEL_COLUMNS = (
    "metric", "model", "model_a", "model_b", "task", "representation", "probe", "correction", "note", "family",
    "detail", "paper", "claim", "where", "statement", "suite_set", "published_suite_sets", "verdict",
)

def _read_json(path: Path) -> tuple[Any, str | None]:
    if not path.is_file():
        return None, f"missing: {path.name} not found"
    try:
        return json.loads(path.read_text(encoding="utf-8")), None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        return None, f"unreadable: {path.name}: {error}"

def _read_csv(path: Path, columns: tuple[str, ...]) -> tuple[Any, str | None]:
    import pandas as pd

    if not path.is_file():
        return None, f"missing: {path.name} not found"
    try:  # labels stay text ("NA", "1" are labels), only empty and "nan" cells are missing values
        table = pd.read_csv(path, dtype={c: str for c in LABEL_COLUMNS}, keep_default_na=False,
                            na_values=["", "nan", "NaN"])
    except (OSError, UnicodeDecodeError, ValueError) as error:  # pandas' parser and empty-data errors
        return None, f"unreadable: {path.name}: {error}"
    missing = [c for c in columns if c not in table.columns]
    if missing:
        return None, f"malformed: {path.name} lacks the column(s) {', '.join(missing)}"
    if table.empty:
        return None, f"empty: {path.name} has no rows"
    return table, None

def read_sources(analysis_dir: Path, out_dir: Path | None = None) -> Sources:
    """Everything the report shows, with a reason for each file that is missing or unusable."""
    analysis_dir = Path(analysis_dir)
    if not analysis_dir.is_dir():
        raise InputError("not an analysis folder (no such directory)", str(analysis_dir))
    sources = Sources(analysis_dir, Path(out_dir) if out_dir is not None else analysis_dir)
    settings, problem = _read_json(analysis_dir / "settings.json")
    if problem is None and not isinstance(settings, dict):
        settings, problem = None, "malformed: settings.json is not a JSON object"
    if problem:
        sources.problems["settings"] = problem
    else:
        sources.settings = settings
    for name, columns in {**CSV_COLUMNS, **OPTIONAL_CSV_COLUMNS}.items():
        table, problem = _read_csv(analysis_dir / f"{name}.csv", columns)
        if problem and name in OPTIONAL_CSV_COLUMNS and problem.startswith("missing"):
            continue
        if problem:
            sources.problems[name] = problem
        else:
            sources.tables[name] = table
    regressions, problem = _read_json(analysis_dir / "regressions.json")
    if problem is None and not isinstance(regressions, dict):
        regressions, problem = None, "malformed: regressions.json is not a JSON object"
    if problem:
        sources.problems["regressions"] = problem
    else:
        sources.regressions = regressions
    notes, problem = _read_json(analysis_dir / "figures" / fig.NOTES_FILE)
    if problem is None and isinstance(notes, list):
        sources.figure_notes = [str(note) for note in notes]
    return sources
