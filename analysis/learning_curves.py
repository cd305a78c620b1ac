"""Learning curves: each metric of the checkpoints kept over training against the training step.

``train.keep_every N`` keeps ``checkpoints/step-NNNNNN.ckpt`` every N steps; ``synbench evaluate EXPERIMENT
--checkpoints all`` evaluates each of them (``RUN/steps/step-NNNNNN/eval``); the aggregate's ``metrics_by_step``
table holds their metrics, one row per (run, step, metric). From it: ``learning_curves.csv`` (per model, metric
and step: the seeds ``n``, ``mean`` and ``sd``, values as measured) and the figure
``figures/learning_curves.{png,pdf}``: one panel per headline metric the evaluations gave (the report's
metrics, ``tasks.headline_metrics``; labelled ones too), one line per model (the mean over its seeds) in a ± sd
band, perplexities on a log axis, SG and BLiMP in percent. Nothing is written when no kept checkpoint was
evaluated. Like ``figures``: matplotlib's Agg canvas, each file written atomically.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from analysis.figures import _colors, _new_figure, _panel_grid, _save, is_perplexity
from experiments.evaluate import tasks
from experiments.papers import metric_title, model_order, percent_scale
from lightning_modules.data.atomic import atomic_write_text

CURVES_FILE = "learning_curves.csv"
LEARNING_CURVES = "learning_curves"  # the figure's file stem


def curves(steps: Any) -> Any:
    """Per (model, metric, step) of the headline metrics in ``steps`` (the ``metrics_by_step`` table): the number
    of seeds ``n``, their ``mean`` and ``sd`` (NaN for one seed), in headline order, then by model and step."""
    import pandas as pd

    headline = tasks.headline_metrics()
    present = [m for m in steps["metric"].unique() if tasks.unlabelled(m) in headline]
    if not present:
        return pd.DataFrame(columns=["model", "metric", "step", "n", "mean", "sd"])
    metrics = sorted(present, key=lambda m: (headline.index(tasks.unlabelled(m)), m))
    table = (steps[steps["metric"].isin(metrics)].groupby(["model", "metric", "step"])["value"]
             .agg(n="count", mean="mean", sd="std").reset_index())
    order = {"metric": metrics, "model": model_order(table["model"].unique())}
    ranks = {column: table[column].map({v: i for i, v in enumerate(values)}) for column, values in order.items()}
    return (table.assign(_metric=ranks["metric"], _model=ranks["model"])
            .sort_values(["_metric", "_model", "step"]).drop(columns=["_metric", "_model"]).reset_index(drop=True))


def draw(table: Any, out_dir: Path) -> list[Path]:
    """The figure of a ``curves`` table into ``out_dir`` (PNG and PDF); returns the paths written."""
    import numpy as np
    from matplotlib.ticker import MaxNLocator

    metrics = list(dict.fromkeys(table["metric"]))
    models = model_order(table["model"].unique())
    colors = _colors(models)
    fig = _new_figure(3.6 * min(len(metrics), 3) + 1.6, 3.0 * -(-len(metrics) // 3))
    for ax, metric in zip(_panel_grid(fig, len(metrics), max_cols=3), metrics, strict=True):
        scale = percent_scale(metric)
        for model in models:
            rows = table[(table["metric"] == metric) & (table["model"] == model)]
            if rows.empty:
                continue
            step = rows["step"].to_numpy(dtype=float)
            mean = rows["mean"].to_numpy(dtype=float) * scale
            sd = np.nan_to_num(rows["sd"].to_numpy(dtype=float)) * scale
            low = mean - sd
            if is_perplexity(metric):  # a band reaching below zero has no place on a log axis
                low = np.where(low > 0, low, mean)
            ax.fill_between(step, low, mean + sd, color=colors[model], alpha=0.2, linewidth=0)
            ax.plot(step, mean, marker="o", markersize=3, color=colors[model], label=model)
        if is_perplexity(metric):
            ax.set_yscale("log")
        ax.set_title(metric_title(metric) + (" (log scale)" if is_perplexity(metric) else ""), fontsize=9)
        ax.grid(alpha=0.3)
        ax.set_xlabel("training step", fontsize=8)
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.tick_params(which="both", labelsize=7)
    handles, labels = fig.axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside right upper", fontsize=8, title="mean ± sd over seeds",
               title_fontsize=8)
    return _save(fig, out_dir, LEARNING_CURVES)


def write_learning_curves(steps: Any, analysis_dir: Path) -> list[Path]:
    """``learning_curves.csv`` and the figure (under ``figures/``) into ``analysis_dir`` from the aggregate's
    ``metrics_by_step`` table; nothing (an empty list) when it has no headline metric."""
    if steps is None or steps.empty:
        return []
    table = curves(steps)
    if table.empty:
        return []
    path = Path(analysis_dir) / CURVES_FILE
    atomic_write_text(path, table.to_csv(index=False))
    return [path, *draw(table, Path(analysis_dir) / "figures")]
