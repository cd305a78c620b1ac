"""The report's comparison section: every model x the metrics that compare across families (``comparison.csv``,
``analysis.comparison``), then the SG-circuit and BLiMP-phenomenon heat maps (SG against perplexity is one of
the report's key figures, at its top).

Each cell is the mean ± sd over seeds with its 95% bootstrap CI; the words beside a number (how the
perplexity was scored, the family's own convention, the training device) follow the table, once per
distinct text with the models it applies to. The
Welch tests (with the correction over the whole table) are the report's own section: they test only models
scored on the same items.
"""

from __future__ import annotations

from typing import Any

from analysis import comparison_figures as cfig
from analysis.comparison import TITLES
from analysis.report import formatting as fmt
from analysis.report.blocks import Block, Bullets, Heading, Paragraph, Table
from analysis.report.figure_block import figure_block
from analysis.report.sources import Sources
from experiments.papers import model_order, percent_scale

FIGURES = (cfig.SG_VS_PPL, cfig.SG_CIRCUIT_HEATMAP, cfig.BLIMP_PHENOMENON_HEATMAP)
NORMALISATION = (
    "Perplexity in one normalisation for every model: per word, the end of the sentence in log p (TG §3.1), "
    "exact for string models and an upper bound for joint models (over proposals or a beam, as "
    "stated per model below); beside it the end of sentence counted as a word too (Kim et al. "
    "2019, SOM's and PaLM's convention), each family's own validation perplexity (in the convention its run "
    "states), and, where a model was scored with its gold trees, that value and the bound's distance to it "
    "(per seed). Rows scored on different items are not tested against each other (Welch tests below).")
COUNTS = ("parameters", "train_tokens_per_s", "train_seconds")  # shown as integers


def _cell(row: Any) -> str:
    scale = percent_scale(str(row.metric))
    text = _integer(row.mean, row.sd) if row.metric in COUNTS else fmt.mean_sd(row.mean, row.sd, scale)
    interval = fmt.ci(row.ci_low, row.ci_high, scale) if row.metric != "parameters" else ""
    return f"{text} {interval}" if interval else text


def _integer(mean: Any, sd: Any) -> str:
    return f"{mean:,.0f}" + (f" ± {sd:,.0f}" if fmt.is_finite(sd) and sd > 0 else "")


def comparison(sources: Sources) -> list[Block]:
    """The comparison table and figures, or nothing for an analysis folder written before it existed."""
    heading = Heading("Comparison across models (same sentences, same items)")
    skipped = sources.settings.get("skipped")
    reason = skipped.get("comparison") if isinstance(skipped, dict) else None
    if reason:
        return [heading, Paragraph(f"comparison: skipped: {reason}.")]
    if "comparison" in sources.problems:
        return [heading, Paragraph(f"comparison: {sources.problems['comparison']}.")]
    if "comparison" not in sources.tables:
        return []
    table = sources.tables["comparison"]
    metrics = [m for m in TITLES if (table["metric"] == m).any()]
    cells = {(r.model, r.metric): r for r in table.itertuples(index=False)}
    models = model_order(table["model"].unique())
    families = {r.model: r.family for r in table.itertuples(index=False)}
    header = ["model", "family", "seeds", *(TITLES[m] for m in metrics)]
    rows = []
    for model in models:
        n = max(int(cells[(model, m)].n) for m in metrics if (model, m) in cells)
        rows.append([model, fmt.text(families.get(model)), str(n),
                     *(_cell(cells[(model, m)]) if (model, m) in cells else "—" for m in metrics)])
    blocks: list[Block] = [heading, Paragraph(NORMALISATION), Table(header, rows),
                           Paragraph("Mean ± sd over seeds [95% bootstrap CI of the mean]; — where a model has "
                                     "no such number.")]
    details = _obtained(sources, cells, models, metrics)
    if details:
        blocks += [Heading("How each number was obtained", 3), Bullets(details)]
    blocks += figure_block(sources, cfig.SG_CIRCUIT_HEATMAP, "SG score per circuit and model (mean over seeds).")
    blocks += figure_block(sources, cfig.BLIMP_PHENOMENON_HEATMAP, "BLiMP accuracy per phenomenon and model (mean "
                      "over seeds).")
    return blocks


def _obtained(sources: Sources, cells: dict[tuple[str, str], Any], models: list[str], metrics: list[str]) -> list[str]:
    """``TITLE: DETAIL: MODEL, MODEL`` per column and distinct detail (how it was scored, the convention, the
    device), the models in the table's order; ``every model`` when all of the table's share it."""
    found: dict[tuple[str, str], list[str]] = {}
    for metric in metrics:
        for model in models:
            detail = getattr(cells.get((model, metric)), "detail", None)
            if isinstance(detail, str) and detail:
                found.setdefault((metric, sources.local(detail)), []).append(model)
    return [f"{TITLES[metric]}: {detail}: {'every model' if len(which) == len(models) > 1 else ', '.join(which)}"
            for (metric, detail), which in found.items()]
