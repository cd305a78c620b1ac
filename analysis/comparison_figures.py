"""The comparison's figures: SG against perplexity across models (SOM Fig. 8a's style), and SG per circuit and
BLiMP per phenomenon as heat maps (models x circuits / phenomena, mean over seeds).

Like ``figures``: each writes ``NAME.png`` and ``NAME.pdf`` atomically and returns a ``Figures`` (paths and
notes on what was skipped); a missing metric is a note, never an error. Models are the table's, in the
papers' order (``experiments.papers.model_order``), coloured by family; no family is named here.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from analysis.figures import CIRCUIT_PREFIX, Figures, _colors, _new_figure, _require_columns, _save
from experiments.papers import model_order

SG_VS_PPL = "sg_vs_ppl"
SG_CIRCUIT_HEATMAP = "sg_circuit_heatmap"
BLIMP_PHENOMENON_HEATMAP = "blimp_phenomenon_heatmap"
PHENOMENON_PREFIX = "blimp.phenomenon."
PPL, SG = "ppl", "sg"


def sg_vs_ppl(long: Any, out_dir: Path) -> Figures:
    """Each model's mean SG score against its mean test perplexity (log axis), ± sd over seeds both ways,
    points coloured by family, each labelled where its label overlaps no other (``place_labels``): do models
    that predict words better also generalise syntactically?"""
    _require_columns(long, ("model", "family", "metric", "value"), "long table")
    out = Figures()
    stats = long[long["metric"].isin((PPL, SG))].groupby(["model", "metric"])["value"].agg(["mean", "std"])
    models = [m for m in model_order(long["model"].unique())
              if (m, PPL) in stats.index and (m, SG) in stats.index]
    if len(models) < 2:
        out.notes.append(f"{SG_VS_PPL}: fewer than two models have both {PPL} and {SG}, no figure")
        return out
    families = dict(zip(long["model"], long["family"], strict=False))
    colors = _colors(list(dict.fromkeys(families[m] for m in models)))
    fig = _new_figure(7.0, 4.2)
    ax = fig.add_subplot()
    seen: set[str] = set()
    points = []
    for model in models:
        x, y = stats.loc[(model, PPL)], stats.loc[(model, SG)]
        family = families[model]
        ax.errorbar(x["mean"], 100 * y["mean"], xerr=_sd(x["std"]), yerr=100 * _sd(y["std"]), fmt="o",
                    color=colors[family], capsize=2, label=None if family in seen else family)
        seen.add(family)
        points.append((x["mean"], 100 * y["mean"]))
    ax.set_xscale("log")
    ax.set_xlabel("test perplexity (per word, log scale)")
    ax.set_ylabel("SG score (%)")
    ax.grid(alpha=0.3)
    fig.legend(fontsize=7, title="family", title_fontsize=7, loc="outside right upper")  # clear of the labels
    ax.set_title("SG score against perplexity (mean over seeds, ± sd)", fontsize=10)
    place_labels(ax, points, models)
    out.paths += _save(fig, out_dir, SG_VS_PPL)
    return out


# where a label may go around its point: directions (x, y) tried in turn at growing distances (points)
DIRECTIONS = ((1, 0.4), (1, -0.4), (-1, 0.4), (-1, -0.4), (0, 1), (0, -1), (1, 1), (-1, 1), (1, -1), (-1, -1))
DISTANCES = (4, 12, 22, 34)
MARKER_PX = 4  # half the side of the box kept free around each point


def place_labels(ax: Any, points: list[tuple[float, float]], labels: list[str], fontsize: float = 7) -> list[Any]:
    """Label each point where its text overlaps no other label, no point and stays inside the axes: the first
    free place of ``DISTANCES`` x ``DIRECTIONS`` around it (a leader line from the second distance on), else
    the last one tried. Fixes the figure's layout first (the labels are placed in display coordinates).
    Returns the labels' boxes (display coordinates), in the order of ``points``."""
    from matplotlib.transforms import Bbox

    fig = ax.figure
    fig.canvas.draw()  # the layout, then keep it: moving the axes now would move the labels onto each other
    fig.set_layout_engine("none")
    renderer = fig.canvas.get_renderer()
    frame = ax.get_window_extent(renderer)
    centres = ax.transData.transform(points) if points else []
    taken = [Bbox.from_extents(cx - MARKER_PX, cy - MARKER_PX, cx + MARKER_PX, cy + MARKER_PX) for cx, cy in centres]
    places = [(distance, direction) for distance in DISTANCES for direction in DIRECTIONS]
    boxes = []
    for point, label in zip(points, labels, strict=True):
        for k, (distance, direction) in enumerate(places):
            box = _label(ax, label, point, distance, direction, fontsize, renderer)
            inside = frame.x0 <= box.x0 and box.x1 <= frame.x1 and frame.y0 <= box.y0 and box.y1 <= frame.y1
            if (inside and not any(box.overlaps(other) for other in taken)) or k == len(places) - 1:
                break  # a free place, or nowhere free: the last place tried
            ax.texts[-1].remove()
        taken.append(box)
        boxes.append(box)
    return boxes


def _label(ax: Any, label: str, point: tuple[float, float], distance: float, direction: tuple[float, float],
           fontsize: float, renderer: Any) -> Any:
    """Annotate ``point`` with ``label`` at ``distance`` points in ``direction``; the text's box (not its
    leader line's)."""
    from matplotlib.text import Text

    dx, dy = direction
    text = ax.annotate(label, point, xytext=(dx * distance, dy * distance), textcoords="offset points",
                       fontsize=fontsize, ha="left" if dx > 0 else "right" if dx < 0 else "center",
                       va="bottom" if dy > 0 else "top" if dy < 0 else "center",
                       arrowprops={"arrowstyle": "-", "color": "grey", "lw": 0.5} if distance > DISTANCES[0] else None)
    text.update_positions(renderer)
    return Text.get_window_extent(text, renderer)


def _sd(value: float) -> float:
    return value if math.isfinite(value) else 0.0  # a single seed has no sd: no bar


def heatmap(long: Any, out_dir: Path, prefix: str, name: str, what: str) -> Figures:
    """Models x the breakdown metrics ``prefix*`` (mean over seeds, %), each cell printed; blank where a
    model has no score."""
    import numpy as np

    _require_columns(long, ("model", "metric", "value"), "long table")
    out = Figures()
    rows = long[long["metric"].str.startswith(prefix)]
    if rows.empty:
        out.notes.append(f"{name}: no {prefix}* metrics in the table, no figure")
        return out
    columns = sorted(rows["metric"].unique())
    models = model_order(rows["model"].unique())
    means = rows.groupby(["model", "metric"])["value"].mean()
    grid = np.array([[100 * means.get((m, c), np.nan) for c in columns] for m in models])
    fig = _new_figure(max(4.0, 0.7 * len(columns) + 2.5), max(2.5, 0.32 * len(models) + 1.5))
    ax = fig.add_subplot()
    image = ax.imshow(np.ma.masked_invalid(grid), cmap="viridis", vmin=0, vmax=100, aspect="auto")
    for i in range(len(models)):
        for j in range(len(columns)):
            if math.isfinite(grid[i, j]):
                ax.text(j, i, f"{grid[i, j]:.0f}", ha="center", va="center", fontsize=6,
                        color="white" if grid[i, j] < 50 else "black")
    ax.set_xticks(range(len(columns)), [c[len(prefix):] for c in columns], rotation=35, ha="right", fontsize=7)
    ax.set_yticks(range(len(models)), models, fontsize=7)
    fig.colorbar(image, ax=ax, label=f"{what} (%)")
    ax.set_title(f"{what} (mean over seeds)", fontsize=10)
    out.paths += _save(fig, out_dir, name)
    return out


def write_comparison_figures(long: Any, out_dir: Path) -> Figures:
    """The three figures of the comparison (each a note instead when its metrics are missing)."""
    out = sg_vs_ppl(long, out_dir)
    out.add(heatmap(long, out_dir, CIRCUIT_PREFIX, SG_CIRCUIT_HEATMAP, "SG score per circuit"))
    out.add(heatmap(long, out_dir, PHENOMENON_PREFIX, BLIMP_PHENOMENON_HEATMAP, "BLiMP accuracy per phenomenon"))
    return out
