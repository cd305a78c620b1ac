"""The report's first screen: the title, whether its numbers compare with a paper's, the context in one line,
then the headline table and the key figures (the claims' verdicts come between them, ``claims_section``).

The headline table has one row per model and one column per metric the experiment measured: each
evaluation's main number (its task's first headline metric, on every corpus it was scored on: ``ppl``,
``ppl@gold-tree``), and any other headline metric the paper publishes for these models, with the paper's
number beside it. Each cell is the mean ± sd over seeds with the 95% bootstrap CI of the mean below it (one
line in Markdown), marked where the number needs a warning (``marks``). The rest of each task's metrics are in
the sections below.
"""

from __future__ import annotations

from typing import Any

from analysis import comparison_figures as cfig
from analysis import figures as fig
from analysis.report import formatting as fmt
from analysis.report import marks
from analysis.report.blocks import Block, Heading, Paragraph, Table
from analysis.report.figure_block import figure_block, missing, written
from analysis.report.sources import Sources
from experiments.evaluate import tasks
from experiments.papers import Paper, metric_title, model_order, paper_for, percent_scale

KEY_FIGURES = ((cfig.SG_VS_PPL, "SG score against perplexity per model, mean ± sd over seeds (cf. SOM Fig. 8a)."),
               (fig.DISTRIBUTIONS, "Metrics over seeds per model (cf. TG Fig. 3); perplexity on a log axis."))


def data_text(settings: dict[str, Any]) -> str | None:
    """``settings["data"]``, a name or a list of names, as one string (None when absent)."""
    data = settings.get("data")
    if isinstance(data, list):
        return ", ".join(str(d) for d in data) or None
    return None if data is None else str(data)


def paper_of(settings: dict[str, Any]) -> Paper | None:
    """The paper whose numbers stand beside this experiment's (by the families of its models), or None."""
    models = settings.get("models") or {}
    return paper_for(info.get("family", "") for info in models.values() if isinstance(info, dict))


def context(settings: dict[str, Any]) -> list[str]:
    """The seeds, data and runs as the setup lists them: ``seeds: 3 (0, 1, 2)``, ``data: ...``, ``runs: ...``."""
    seeds = settings.get("seeds") or []
    facts = [f"seeds: {len(seeds)} ({', '.join(str(s) for s in seeds)})" if seeds else "seeds: unknown",
             f"data: {data_text(settings) or 'unknown'}"]
    runs = settings.get("runs")
    if isinstance(runs, dict):
        line = f"runs: {runs.get('done', '?')} done of {runs.get('total', '?')}"
        for key in ("failed", "missing"):
            if runs.get(key):
                line += f"; {key}: {', '.join(str(r) for r in runs[key])}"
        facts.append(line)
    return facts


def headline(sources: Sources) -> list[Block]:
    """The title, the comparability warning and one line of context (the full setup is a section below)."""
    settings = sources.settings
    experiment = settings.get("experiment", sources.analysis_dir.parent.name)
    blocks: list[Block] = [Heading(f"synbench report: {experiment}", 1)]
    if "settings" in sources.problems:
        blocks.append(Paragraph(
            f"settings: {sources.problems['settings']}. The scale, seeds and reduced settings of these runs "
            "are unknown: do not compare them with the paper's numbers.", strong=True))
        return blocks
    reduced = settings.get("reduced") or []
    scale = settings.get("scale", "unknown")
    paper = paper_of(settings)
    if paper is None:
        blocks.append(Paragraph(
            f"Scale {scale}. No registered paper describes these models' families: no published numbers are "
            "shown beside ours.", strong=True))
    elif reduced:
        blocks.append(Paragraph(f"Scale {scale}. {paper.not_comparable}", strong=True))
    else:
        blocks.append(Paragraph(
            f"Scale {scale}. No reduced setting is recorded. The paper's numbers ({paper.citation}) "
            "still come from other runs (the paper's seeds and data); they are marked as such.", strong=True))
    reduced_note = f"; {len(reduced)} reduced settings (Setup, below)" if reduced else ""
    blocks.append(Paragraph("; ".join(context(settings)) + reduced_note + "."))
    return blocks


def headline_metrics(summary: Any, paper: Paper | None, data: str | None) -> list[str]:
    """The headline table's columns: each task's main metric (labelled variants after it), and the other
    headline metrics the paper publishes for some model; all headline metrics present when no task's is."""
    present = list(dict.fromkeys(str(m) for m in summary["metric"]))
    models = list(dict.fromkeys(str(m) for m in summary["model"]))
    main = {t.headline[0] for t in tasks.tasks() if t.headline}
    ordered = [m for h in tasks.headline_metrics()
               for m in sorted((m for m in present if tasks.unlabelled(m) == h), key=lambda m: m != h)]
    chosen = [m for m in ordered if tasks.unlabelled(m) in main
              or (paper is not None and any(paper.numbers_for(model, m, data) for model in models))]
    return chosen or ordered


def _cell(row: Any, scale: float, mark: str, n_seeds: int) -> str:
    n = f" (n={fmt.count(row.n)})" if not n_seeds or row.n != n_seeds else ""
    interval = fmt.ci(getattr(row, "ci_low", None), getattr(row, "ci_high", None), scale)
    return fmt.mean_sd(row.mean, row.sd, scale) + mark + n + (f"\n{interval}" if interval else "")


def results(sources: Sources) -> list[Block]:
    """The headline table under its heading, with the legend of its cells and marks (or why there is none)."""
    heading = Heading("Results (mean ± sd over seeds, [95% CI])")
    if "summary" in sources.problems:
        return [heading, missing("results", sources, "summary")]
    return [heading, *headline_table(sources)]


def headline_table(sources: Sources) -> list[Block]:
    """The table (one row per model, ours with the paper's number beside where it has one) and its legend."""
    summary = sources.tables["summary"]
    data, paper = data_text(sources.settings), paper_of(sources.settings)
    metrics = headline_metrics(summary, paper, data)
    if not metrics:
        wanted = ", ".join(tasks.headline_metrics())
        return [Paragraph(f"results: summary.csv has none of the headline metrics {wanted}.")]
    cells = {(str(r.metric), str(r.model)): r for r in summary.itertuples(index=False)}
    models = [m for m in model_order(summary["model"].unique()) if any((x, m) in cells for x in metrics)]
    n_seeds = len(sources.settings.get("seeds") or [])
    stopped = marks.not_converged(sources)
    with_paper = {m: paper is not None and any(paper.numbers_for(model, m, data) for model in models)
                  for m in metrics}
    header = ["model"]
    for metric in metrics:
        header += [metric_title(metric), paper.column] if with_paper[metric] else [metric_title(metric)]
    used = {marks.NOT_CONVERGED} if stopped.keys() & set(models) else set()
    rows = []
    for model in models:
        row = [model + (f" {marks.NOT_CONVERGED}" if model in stopped else "")]
        for metric in metrics:
            r = cells.get((metric, model))
            mark = marks.perplexity_mark(sources, cells, metric, model) if r is not None else ""
            used.add(mark)
            row.append("—" if r is None else _cell(r, percent_scale(metric), mark, n_seeds))
            if with_paper[metric]:
                numbers = paper.numbers_for(model, metric, data)
                row.append("; ".join(dict.fromkeys(p.text() for p in numbers)) or "—")
        rows.append(row)
    notes = ["Mean ± sd over the seeds and [the 95% bootstrap CI of the mean] (n= where a model has fewer "
             "seeds); SG and BLiMP in percent; — where a model has no such number. The rest of each evaluation's "
             "metrics, the Welch tests and how each number was obtained are in the sections below."]
    if marks.legend(used):
        notes.append(marks.legend(used) + ".")
    if any(with_paper.values()):
        notes.append(f"The paper's columns: the numbers {paper.citation} published, from other runs at another "
                     "scale; their sources in “The paper's published numbers” below.")
    return [Table(header, rows, compact=True), Paragraph(" ".join(notes))]


def key_figures(sources: Sources) -> list[Block]:
    """The figures a reader looks at first (those written; why the others are not: Figures, below)."""
    blocks: list[Block] = []
    for stem, caption in KEY_FIGURES:
        if written(sources, stem):
            blocks += figure_block(sources, stem, caption)
    return [Heading("Key figures"), *blocks] if blocks else []
