"""The experiment's figures: metric distributions over seeds (TG Fig. 3), SG per circuit (Fig. 4), MDL code
length per task and layer (Fig. 5) and the §4.2 regression coefficients.

Each function writes ``NAME.png`` and ``NAME.pdf`` into ``out_dir`` (each atomically: a temporary file in the
same folder, then a rename) and returns a ``Figures``: the paths written and notes on whatever was skipped and
why. A missing metric, model or table is a note, never an error; a single seed gets points without a box.
Figures are built on ``matplotlib.figure.Figure`` with the Agg canvas (no pyplot, no global state, no window),
and matplotlib is imported inside the functions so that ``analysis`` imports fast.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from experiments.papers import metric_title, model_order, percent_scale, published_regression
from lightning_modules.data.atomic import atomic_write_text, atomic_write_with
from lightning_modules.errors import InputError
from lightning_modules.numeric import is_number

FORMATS = ("png", "pdf")
DPI = 150
DISTRIBUTION_METRICS = ("ppl", "sg", "blimp", "f1")
PERPLEXITIES = ("ppl", "ppl_end_counted", "ppl_stream", "val_ppl", "val_word_ppl", "val_token_ppl")
CIRCUIT_PREFIX = "sg.circuit."
TASK_ORDER = ("pos", "grandparent", "top_constituents", "word_content")
PROBE_STYLES = {"linear": "-", "mlp": "--"}

# File stems, so that the report can find each figure and caption it.
DISTRIBUTIONS = "metric_distributions"
SG_CIRCUITS = "sg_circuits"
MDL_CODE_LENGTH = "mdl_code_length"
MDL_COMPRESSION = "mdl_compression"
REGRESSION_COEFFICIENTS = "regression_coefficients"
NOTES_FILE = "notes.json"


@dataclass
class Figures:
    """Paths written (PNG and PDF of each figure) and notes on what was skipped."""

    paths: list[Path] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def add(self, other: Figures) -> None:
        self.paths += other.paths
        self.notes += other.notes


def is_perplexity(metric: str) -> bool:
    """Whether ``metric`` (labelled or not: ``ppl@gold``) is a perplexity, drawn on a log axis: its values
    span orders of magnitude (an upper bound over poor proposals can be 1e30 beside an exact 60)."""
    name = metric.split("@", 1)[0]
    return name in PERPLEXITIES


def _require_columns(table: Any, columns: Iterable[str], what: str) -> None:
    missing = [c for c in columns if c not in table.columns]
    if missing:
        raise InputError(f"{what} lacks the column(s) {', '.join(missing)}", what)


def _new_figure(width: float, height: float) -> Any:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def _save(fig: Any, out_dir: Path, name: str) -> list[Path]:
    """Write ``fig`` as ``out_dir/name.{png,pdf}``, each atomically."""
    paths = []
    for fmt in FORMATS:
        path = Path(out_dir) / f"{name}.{fmt}"
        atomic_write_with(path, lambda f, fmt=fmt: fig.savefig(f, format=fmt, dpi=DPI))
        paths.append(path)
    return paths


def _colors(keys: Sequence[Any]) -> dict[Any, str]:
    """A fixed colour per key (model, or (model, representation)), the same in every panel."""
    from matplotlib import colormaps

    palette = colormaps["tab10" if len(keys) <= 10 else "tab20"]
    return {key: palette(i % palette.N) for i, key in enumerate(keys)}


def _panel_grid(fig: Any, n: int, max_cols: int = 4) -> list[Any]:
    cols = min(n, max_cols)
    rows = math.ceil(n / cols)
    axes = fig.subplots(rows, cols, squeeze=False).ravel()
    for ax in axes[n:]:
        ax.set_visible(False)
    return list(axes[:n])


def seed_distributions(
    long: Any,
    metrics: Sequence[str] | None,
    out_dir: Path,
    models: Sequence[str] | None = None,
    seed: int = 0,
) -> Figures:
    """One panel per metric: each model's values over seeds as jittered points over a box (TG Fig. 3).

    ``long`` is the aggregate long table; ``metrics`` default to ppl, sg, blimp, f1 (those present are
    drawn); ``seed`` fixes the jitter. Fractions are shown in percent, perplexities on a log axis; the models
    without a metric are one note per metric.
    """
    import numpy as np

    _require_columns(long, ("model", "seed", "metric", "value"), "long table")
    metrics = DISTRIBUTION_METRICS if metrics is None else tuple(metrics)
    out = Figures()
    present = [m for m in metrics if (long["metric"] == m).any()]
    for metric in metrics:
        if metric not in present:
            out.notes.append(f"{DISTRIBUTIONS}: metric {metric!r} not in the table, skipped")
    if not present:
        out.notes.append(f"{DISTRIBUTIONS}: none of the metrics {', '.join(metrics)} present, no figure")
        return out
    order = list(models) if models is not None else model_order(long["model"].unique())
    colors = _colors(order)
    rng = np.random.default_rng(seed)
    fig = _new_figure(3.2 * min(len(present), 4), 3.2 * math.ceil(len(present) / 4))
    for ax, metric in zip(_panel_grid(fig, len(present)), present, strict=True):
        rows = long[long["metric"] == metric]
        shown, without = [], []
        for model in order:
            values = rows.loc[rows["model"] == model, "value"].to_numpy(dtype=float) * percent_scale(metric)
            if len(values) == 0:
                without.append(model)
                continue
            x = len(shown)
            if len(values) >= 2:
                ax.boxplot(values, positions=[x], widths=0.5, showfliers=False,
                           medianprops={"color": "black"})
            ax.scatter(x + rng.uniform(-0.12, 0.12, len(values)), values, s=14, alpha=0.8, zorder=3,
                       color=colors[model])
            shown.append(model)
        if without:
            out.notes.append(f"{DISTRIBUTIONS}: no {metric!r} values for model{'s' if len(without) > 1 else ''} "
                             + ", ".join(repr(m) for m in without))
        crowded = len(shown) > 6  # steeper, smaller labels: one per model, none over the next
        ax.set_xticks(range(len(shown)), shown, rotation=60 if crowded else 30, ha="right",
                      fontsize=6 if crowded else None)
        ax.set_xlim(-0.6, len(shown) - 0.4)
        if is_perplexity(metric):  # perplexities of a model that learned and of one that did not, both readable
            ax.set_yscale("log")
        ax.set_title(metric_title(metric) + (" (log scale)" if is_perplexity(metric) else ""), fontsize=10)
        ax.grid(axis="y", alpha=0.3)
    fig.suptitle("Metrics over seeds (points: seeds; boxes: quartiles)", fontsize=10)
    out.paths += _save(fig, out_dir, DISTRIBUTIONS)
    return out


def sg_circuits(long: Any, out_dir: Path, models: Sequence[str] | None = None) -> Figures:
    """Grouped bars of the SG score per circuit (TG Fig. 4): mean over seeds, sd error bars (n >= 2)."""
    import numpy as np

    _require_columns(long, ("model", "seed", "metric", "value"), "long table")
    out = Figures()
    rows = long[long["metric"].str.startswith(CIRCUIT_PREFIX)]
    if rows.empty:
        out.notes.append(f"{SG_CIRCUITS}: no {CIRCUIT_PREFIX}* metrics in the table, no figure")
        return out
    circuits = sorted(rows["metric"].unique())
    order = list(models) if models is not None else model_order(rows["model"].unique())
    order = [m for m in order if (rows["model"] == m).any()]
    colors = _colors(order)
    stats = rows.groupby(["model", "metric"])["value"].agg(["mean", "std", "count"])
    width = 0.8 / max(len(order), 1)
    fig = _new_figure(max(5.0, 1.1 * len(circuits) + 1.5), 3.6)
    ax = fig.add_subplot()
    x = np.arange(len(circuits))
    for i, model in enumerate(order):
        means = [stats["mean"].get((model, c), np.nan) * 100 for c in circuits]
        sds = [stats["std"].get((model, c), np.nan) * 100 for c in circuits]
        sds = [s if math.isfinite(s) else 0.0 for s in sds]  # a single seed has no sd: no bar
        ax.bar(x + (i - (len(order) - 1) / 2) * width, means, width, yerr=sds, capsize=2, label=model,
               color=colors[model])
        missing = [c for c, m in zip(circuits, means, strict=True) if not math.isfinite(m)]
        if missing:
            out.notes.append(f"{SG_CIRCUITS}: model {model!r} has no score for {', '.join(missing)}")
    ax.set_xticks(x, [c[len(CIRCUIT_PREFIX):] for c in circuits], rotation=25, ha="right")
    ax.set_ylabel("SG score (%)")
    ax.set_ylim(0, 100)
    ax.grid(axis="y", alpha=0.3)
    ax.legend(fontsize=8)
    ax.set_title("SG score per circuit (mean over seeds, ± sd)", fontsize=10)
    out.paths += _save(fig, out_dir, SG_CIRCUITS)
    return out


MDL_COLUMNS = (
    "model", "representation", "task", "layer", "probe", "uniform_bits", "online_bits", "compression",
)


def code_lengths(mdl: Any, out_dir: Path) -> Figures:
    """Online code length (kbits) and compression vs layer, one panel per task (TG Fig. 5).

    One line per (model, representation); solid lines are linear probes, dashed ones MLP probes. The
    code-length panels show each task's uniform code length as a dotted line.
    """
    from matplotlib.lines import Line2D
    from matplotlib.ticker import MaxNLocator

    out = Figures()
    if mdl is None or len(mdl) == 0:
        out.notes.append(f"{MDL_CODE_LENGTH}: no MDL rows, no figures")
        return out
    _require_columns(mdl, MDL_COLUMNS, "mdl table")
    keys = ["task", "model", "representation", "probe", "layer"]
    repeated = mdl.groupby(keys).size()
    if (repeated > 1).any():
        out.notes.append(f"{MDL_CODE_LENGTH}: {int((repeated > 1).sum())} (task, model, representation, "
                         "probe, layer) cells have several rows; their mean is plotted")
    table = mdl.groupby(keys, as_index=False)[["uniform_bits", "online_bits", "compression"]].mean()
    tasks = [t for t in TASK_ORDER if t in set(table["task"])] + sorted(set(table["task"]) - set(TASK_ORDER))
    lines = [(m, r) for m in model_order(table["model"].unique())
             for r in sorted(table.loc[table["model"] == m, "representation"].unique())]
    colors = _colors(lines)
    probes = sorted(table["probe"].unique(), key=lambda p: (p not in PROBE_STYLES, p))
    for name, column, label in (
        (MDL_CODE_LENGTH, "online_bits", "online code length (kbits)"),
        (MDL_COMPRESSION, "compression", "compression (uniform / online)"),
    ):
        scale = 1000.0 if column == "online_bits" else 1.0
        fig = _new_figure(3.4 * min(len(tasks), 4), 3.0 * math.ceil(len(tasks) / 4) + 0.8)
        for ax, task in zip(_panel_grid(fig, len(tasks)), tasks, strict=True):
            rows = table[table["task"] == task]
            for (model, rep, probe), group in rows.groupby(["model", "representation", "probe"]):
                group = group.sort_values("layer")
                ax.plot(group["layer"], group[column] / scale, marker="o", markersize=3,
                        color=colors[(model, rep)], linestyle=PROBE_STYLES.get(probe, ":"))
            uniform = rows["uniform_bits"].unique()
            if column == "online_bits" and len(uniform) == 1:
                ax.axhline(uniform[0] / scale, color="grey", linestyle=":", linewidth=1)
            ax.xaxis.set_major_locator(MaxNLocator(integer=True))
            ax.set_title(task, fontsize=10)
            ax.set_xlabel("layer")
            ax.set_ylabel(label, fontsize=8)
            ax.grid(alpha=0.3)
        handles = [Line2D([], [], color=colors[key], marker="o", markersize=3, label=f"{key[0]} / {key[1]}")
                   for key in lines]
        handles += [Line2D([], [], color="black", linestyle=PROBE_STYLES.get(p, ":"), label=f"{p} probe")
                    for p in probes]
        if column == "online_bits":
            handles.append(Line2D([], [], color="grey", linestyle=":", label="uniform code length"))
        fig.legend(handles=handles, loc="outside lower center", fontsize=7, ncols=min(4, len(handles)))
        out.paths += _save(fig, out_dir, name)
    return out


def _number(value: Any) -> float:
    """A JSON number as float; None (a non-finite value in ``to_dict``) as NaN, which matplotlib skips."""
    return float(value) if is_number(value) else math.nan


def regression_coefficients(regressions: dict[str, Any], out_dir: Path) -> Figures:
    """Coefficient ± 1.96 se per indicator, one panel per regression; the paper's coefficients hollow.

    ``regressions`` is the content of ``regressions.json``; skipped regressions become notes.
    """
    out = Figures()
    fitted = {}
    for name, result in (regressions or {}).items():
        if not isinstance(result, dict) or "coefficients" not in result:
            reason = result.get("skipped", "no coefficients") if isinstance(result, dict) else "not an object"
            out.notes.append(f"{REGRESSION_COEFFICIENTS}: {name}: skipped: {reason}")
        elif not result["coefficients"]:
            out.notes.append(f"{REGRESSION_COEFFICIENTS}: {name}: no coefficients")
        else:
            fitted[name] = result
    if not fitted:
        out.notes.append(f"{REGRESSION_COEFFICIENTS}: no fitted regression, no figure")
        return out
    fig = _new_figure(4.2 * len(fitted), 3.0)
    for ax, (name, result) in zip(_panel_grid(fig, len(fitted)), fitted.items(), strict=True):
        coefs = result["coefficients"]
        y = list(range(len(coefs)))[::-1]
        half_widths = [1.96 * _number(c.get("se")) for c in coefs]
        ax.errorbar([_number(c.get("coef")) for c in coefs], y, xerr=half_widths, fmt="o", capsize=3,
                    label="ours (± 1.96 se)")
        paper = published_regression(name)
        if paper is not None:
            marks = [(paper.coefficient(c["name"]), yi) for c, yi in zip(coefs, y, strict=True)]
            marks = [(v, yi) for v, yi in marks if v is not None]
            if marks:
                ax.scatter([v for v, _ in marks], [yi for _, yi in marks], marker="D", facecolors="none",
                           edgecolors="tab:red", label="paper (different scale)", zorder=3)
        ax.axvline(0.0, color="grey", linewidth=0.8)
        ax.set_yticks(y, [c["name"] for c in coefs])
        ax.set_xlabel("coefficient (Δ log-probability)")
        adj = _number(result.get("adj_r2"))
        adj_text = f"{adj:.3f}" if math.isfinite(adj) else "n/a"
        ax.set_title(f"{name} (N = {result.get('n', 'n/a')}, adj. R² = {adj_text})", fontsize=9)
        ax.legend(fontsize=7)
        ax.grid(axis="x", alpha=0.3)
    out.paths += _save(fig, out_dir, REGRESSION_COEFFICIENTS)
    return out


def write_figures(
    out_dir: Path,
    long: Any | None = None,
    mdl: Any | None = None,
    regressions: dict[str, Any] | None = None,
    models: Sequence[str] | None = None,
) -> Figures:
    """All figures whose tables are given, plus ``out_dir/notes.json`` (the notes, for the report)."""
    out = Figures()
    if long is None:
        out.notes.append(f"{DISTRIBUTIONS}, {SG_CIRCUITS}: no metrics table given, no figures")
    else:
        out.add(seed_distributions(long, None, out_dir, models=models))
        out.add(sg_circuits(long, out_dir, models=models))
    out.add(code_lengths(mdl, out_dir))
    if regressions is None:
        out.notes.append(f"{REGRESSION_COEFFICIENTS}: no regressions given, no figure")
    else:
        out.add(regression_coefficients(regressions, out_dir))
    atomic_write_text(Path(out_dir) / NOTES_FILE, json.dumps(out.notes, indent=2) + "\n")
    return out
