"""The report's comparison section: every model x the metrics that compare across families (``comparison.csv``,
``analysis.comparison``), then SG against perplexity and the SG-circuit and BLiMP-phenomenon heat maps.

Each cell is the mean ± sd over seeds with its 95% bootstrap CI; the words beside a number (how the
perplexity was scored, the family's own convention, the training device) follow the table, per model. The
Welch tests (with the correction over the whole table) are the report's own section: they test only models
scored on the same items.
"""

from __future__ import annotations

import math
from typing import Any

from analysis import comparison_figures as cfig
from analysis.comparison import COMMON_PPL, TITLES
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


def _cell(row: Any) -> str:
    scale = percent_scale(str(row.metric))
    digits = 0 if row.metric in ("parameters", "train_tokens_per_s", "train_seconds") else 2
    text = fmt.mean_sd(row.mean, row.sd, scale) if digits else _integer(row.mean, row.sd)
    if fmt.is_finite(row.ci_low) and row.metric != "parameters":
        low, high = fmt.scaled(row.ci_low, scale), fmt.scaled(row.ci_high, scale)
        text += f" [{low:.{digits}f}, {high:.{digits}f}]"
    return text


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
    details = [f"{model}, {TITLES[metric]}: {r.detail}" for model in models for metric in metrics
               if (r := cells.get((model, metric))) is not None and isinstance(r.detail, str) and r.detail
               and not (isinstance(r.detail, float) and math.isnan(r.detail))]
    blocks: list[Block] = [heading, Paragraph(NORMALISATION), Table(header, rows),
                           Paragraph("Mean ± sd over seeds [95% bootstrap CI of the mean]; — where a model has "
                                     "no such number.")]
    if details:
        blocks += [Heading("How each number was obtained", 3), Bullets(details)]
    blocks += figure_block(sources, cfig.SG_VS_PPL, f"SG score against {COMMON_PPL} per model, mean ± sd over seeds "
                      "(cf. SOM Fig. 8a).")
    blocks += figure_block(sources, cfig.SG_CIRCUIT_HEATMAP, "SG score per circuit and model (mean over seeds).")
    blocks += figure_block(sources, cfig.BLIMP_PHENOMENON_HEATMAP, "BLiMP accuracy per phenomenon and model (mean "
                      "over seeds).")
    return blocks
