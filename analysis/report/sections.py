"""The report's sections, in reading order: one function per section, each from ``Sources`` to blocks.

First the screen a reader sees (``TOP``): the headline (title, comparability, context in one line), the
headline table (``headline_section``), the papers' claims' verdicts (``claims_section``) and the key figures.
Then everything else, each a section the HTML folds (``FOLDED``): the setup with every reduced setting
(``setup_section``), the paper's published numbers with their sources, the comparison across models
(``comparison_section``), how each claim was checked, all metrics, Welch tests, variance components,
regressions, MDL probing, how each number was scored, proposal sets and the remaining figures. A folded
section may give the Markdown a brief instead of its long tables (all metrics, the Welch tests, the variance
components, the claims' full table: ``report.html`` and the CSVs have them), so that ``report.md`` stays short.

A section whose file is missing says why (the pipeline's reason for skipping it, or the file's problem); a
section that fails on its values says so in one paragraph and costs nothing else (``build_report``). The
published numbers come from the paper whose tables describe the experiment's model families
(``experiments.papers``); sections ask that registry and never name a family themselves.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from analysis import figures as fig
from analysis.report import claims_section, comparison_section, headline_section, learning_curves_section, setup_section
from analysis.report import formatting as fmt
from analysis.report.blocks import Block, Bullets, Folded, Heading, Paragraph, Table
from analysis.report.figure_block import figure_block, missing, why_not_written, written
from analysis.report.headline_section import data_text, paper_of
from analysis.report.marks import labelled_metric
from analysis.report.sources import Sources
from analysis.statistics import NOT_COMPARED
from experiments.evaluate import tasks
from experiments.papers import metric_title, model_order, percent_scale, published_regression


def paper_numbers(sources: Sources) -> list[Block]:
    """Ours beside each published number with its source (table, column, split) and the paper's provenance,
    for the headline metrics the paper publishes for these models; nothing when it publishes none."""
    paper = paper_of(sources.settings)
    if paper is None or "summary" in sources.problems:
        return []
    summary = sources.tables["summary"]
    data = data_text(sources.settings)
    present = list(dict.fromkeys(str(m) for m in summary["metric"]))
    # each headline metric, then its labelled variants (the same task on other corpora: ppl@gum, ...)
    metrics = [m for h in tasks.headline_metrics()
               for m in sorted((m for m in present if tasks.unlabelled(m) == h), key=lambda m: m != h)]
    cells = {(r.metric, r.model): r for r in summary.itertuples(index=False)}
    models = [m for m in model_order(summary["model"].unique()) if any((x, m) in cells for x in metrics)]
    published = [m for m in metrics if any(paper.numbers_for(model, m, data) for model in models)]
    if not published:
        return []
    header = ["model"]
    for metric in published:
        header += [f"{metric_title(metric)}: ours", f"{metric_title(metric)}: {paper.column}"]
    rows = []
    for model in models:
        row = [model]
        for metric in published:
            r = cells.get((metric, model))
            row.append("—" if r is None else fmt.mean_sd(r.mean, r.sd, percent_scale(metric)))
            row.append("; ".join(f"{p.text()} ({p.table}, {p.column.title}, {p.split})"
                                 for p in paper.numbers_for(model, metric, data)) or "—")
        rows.append(row)
    notes = [paper.provenance]
    without = [metric_title(m) for m in metrics if m not in published]
    if without:
        notes.append(f"Not in the paper: {', '.join(without)}.")
    return [Heading("The paper's published numbers"), Table(header, rows), *(Paragraph(n) for n in notes)]


def all_metrics(sources: Sources) -> list[Block]:
    blocks: list[Block] = [Heading("All metrics (mean ± sd over seeds, 95% bootstrap CI)")]
    if "summary" in sources.problems:
        return [*blocks, missing("all metrics", sources, "summary")]
    summary = sources.tables["summary"]
    order = {m: i for i, m in enumerate(model_order(summary["model"].unique()))}
    rows = []
    for r in sorted(summary.itertuples(index=False), key=lambda r: (str(r.metric), order[r.model])):
        scale = percent_scale(str(r.metric))
        ci = fmt.ci(getattr(r, "ci_low", None), getattr(r, "ci_high", None), scale) or "n/a"
        rows.append([metric_title(str(r.metric)), str(r.model), fmt.count(r.n), fmt.mean_sd(r.mean, r.sd, scale),
                     ci])
    return [*blocks, Table(["metric", "model", "n", "mean ± sd", "95% CI"], rows)]


def all_metrics_brief(sources: Sources) -> list[Block]:
    """The Markdown's: where the table of every metric is."""
    if "summary" in sources.problems:
        return [missing("all metrics", sources, "summary")]
    summary = sources.tables["summary"]
    return [Paragraph(f"{len(summary)} rows ({summary['metric'].nunique()} metrics x {summary['model'].nunique()} "
                      "models, mean ± sd and the 95% bootstrap CI of each): report.html, and analysis/summary.csv "
                      "(there SG and BLiMP as fractions, as measured).")]


WELCH_HEADER = ["metric", "A", "B", "n A", "n B", "mean A", "mean B", "A − B", "t", "df", "p", "p adjusted", "note"]
ALPHA = 0.05  # the Markdown's brief lists the tests whose adjusted p is below it


def _welch_row(r: dict[str, Any]) -> list[str]:
    scale = percent_scale(str(r["metric"]))
    return [metric_title(str(r["metric"])), str(r["model_a"]), str(r["model_b"]), fmt.count(r.get("n_a")),
            fmt.count(r.get("n_b")), fmt.fixed(fmt.scaled(r.get("mean_a"), scale)),
            fmt.fixed(fmt.scaled(r.get("mean_b"), scale)), fmt.fixed(fmt.scaled(r.get("diff"), scale)),
            fmt.general(r["t"]), fmt.general(r["df"]), fmt.p_value(r["p"]), fmt.p_value(r["p_adjusted"]),
            fmt.text(r.get("note"))]


def _welch_records(sources: Sources) -> tuple[list[Block], list[dict[str, Any]], list[dict[str, Any]]]:
    """(the correction's paragraph, the tested pairs, the pairs scored on different items) of welch.csv."""
    table = sources.tables["welch"]
    corrections = sorted({fmt.text(c) for c in table.get("correction", [])} - {""})
    intro: list[Block] = [Paragraph(f"Adjusted p-values: {', '.join(corrections)} correction over the whole "
                                    "table.")] if corrections else []
    records = table.to_dict("records")
    apart = [r for r in records if fmt.text(r.get("note")).startswith(NOT_COMPARED)]
    return intro, [r for r in records if r not in apart], apart


def welch(sources: Sources) -> list[Block]:
    blocks: list[Block] = [Heading("Welch's t-tests between models (two-sided, over seeds)")]
    if "welch" in sources.problems:
        return [*blocks, missing("Welch tests", sources, "welch")]
    intro, tested, apart = _welch_records(sources)
    blocks += intro
    if apart:
        pairs = "; ".join(f"{metric_title(str(r['metric']))}: {r['model_a']} – {r['model_b']}" for r in apart)
        blocks.append(Paragraph("Only models scored on the same items are tested (same corpus, level and item "
                                "count; for the validation loss, the same validation tokens). Not tested, "
                                f"scored on different items (welch.csv says on what): {pairs}."))
    return [*blocks, Table(WELCH_HEADER, [_welch_row(r) for r in tested])]


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


def welch_brief(sources: Sources) -> list[Block]:
    """The Markdown's: the tests significant after the correction (every test: report.html, welch.csv)."""
    if "welch" in sources.problems:
        return [missing("Welch tests", sources, "welch")]
    intro, tested, apart = _welch_records(sources)
    significant = [r for r in tested if fmt.is_finite(r["p_adjusted"]) and r["p_adjusted"] < ALPHA]
    what = f"{_count(len(tested), 'test')}, {len(significant) or 'none'} with an adjusted p below {ALPHA:g}"
    untested = (f" ({_count(len(apart), 'pair')} scored on different items {'is' if len(apart) == 1 else 'are'} "
                "not tested)") if apart else ""
    shown = "; those" if significant else ""
    blocks = [*intro, Paragraph(f"{what}{untested}{shown}; every test: report.html and analysis/welch.csv.")]
    return blocks + ([Table(WELCH_HEADER, [_welch_row(r) for r in significant])] if significant else [])


def variance(sources: Sources) -> list[Block]:
    blocks: list[Block] = [Heading("Seed-level vs item-level variance")]
    if "variance" in sources.problems:
        return [*blocks, missing("variance components", sources, "variance")]
    table = sources.tables["variance"]
    blocks.append(Paragraph(
        "seed_sd: sd over seeds of each seed's score on the same items (training randomness); item_se: "
        "standard error of one seed's score from the finite item set; CI: bootstrap over items of the "
        "seed-averaged score. Scores of SG and BLiMP in percent."))
    columns = list(table.columns)
    scaled = {"mean", "seed_sd", "item_se", "ci_low", "ci_high"}
    rows = []
    for r in table.to_dict("records"):
        scale = percent_scale(str(r["task"]))
        row = []
        for c in columns:
            value = r[c]
            if c in ("n_seeds", "n_items"):
                row.append(fmt.count(value))
            elif fmt.is_finite(value):
                row.append(fmt.general(fmt.scaled(value, scale if c in scaled else 1.0)))
            else:
                row.append(fmt.text(value))
        rows.append(row)
    return [*blocks, Table(columns, rows)]


def variance_brief(sources: Sources) -> list[Block]:
    """The Markdown's: what the table is and where (report.html, variance.csv)."""
    blocks = variance(sources)[1:]
    if "variance" in sources.problems:
        return blocks
    return [blocks[0], Paragraph(f"{len(sources.tables['variance'])} rows (task x model): report.html and "
                                 "analysis/variance.csv (there SG and BLiMP as fractions, as measured).")]


def regression(name: str, result: Any) -> list[Block]:
    blocks: list[Block] = [Heading(f"{name}", 3)]
    if not isinstance(result, dict):
        return [*blocks, Paragraph(f"{name}: malformed entry in regressions.json (not an object).")]
    if "skipped" in result:
        return [*blocks, Paragraph(f"{name}: skipped: {result['skipped']}.")]
    coefficients = result.get("coefficients")
    if not isinstance(coefficients, list):
        return [*blocks, Paragraph(f"{name}: malformed entry in regressions.json (no coefficient list).")]
    paper = published_regression(name)
    models = result.get("models") or {}
    ensemble = result.get("ensemble") or {}
    facts = [
        f"formula: {result.get('formula', 'n/a')}",
        f"response: {result.get('response', 'n/a')}",
        "models: " + (", ".join(f"{k} = {v} ({ensemble.get(k, '?')} seeds)" for k, v in models.items())
                      or "n/a"),
        f"data: {result.get('data', 'n/a')}",
        f"N: {fmt.count(result.get('n'))}",
        f"R²: {fmt.general(result.get('r2'))}; adjusted R²: {fmt.general(result.get('adj_r2'))}"
        + (f" (paper, different scale: {paper.adj_r2:.3f})" if paper else ""),
    ]
    dropped = result.get("dropped") or []
    if dropped:
        facts.append("dropped buckets: " + "; ".join(
            f"{d.get('name', '?')} ({d.get('reason', 'no reason given')})" if isinstance(d, dict) else str(d)
            for d in dropped))
    else:
        facts.append("dropped buckets: none")
    blocks.append(Bullets(facts))
    header = ["indicator", "count", "coef", "se", "t", "p"]
    if paper:
        header.append("paper coef (different scale)")
    rows = []
    for c in coefficients:
        c = c if isinstance(c, dict) else {}
        row = [str(c.get("name", "?")), fmt.count(c.get("count")), fmt.general(c.get("coef")),
               fmt.general(c.get("se")), fmt.general(c.get("t")), fmt.p_value(c.get("p"))]
        if paper:
            row.append(fmt.general(paper.coefficient(str(c.get("name", "")))))
        rows.append(row)
    for d in dropped:  # an empty bucket has no coefficient; the paper's, if any, still shows
        name = str(d.get("name", "?")) if isinstance(d, dict) else str(d)
        row = [name, "—", "dropped", "", "", ""]
        if paper:
            row.append(fmt.general(paper.coefficient(name)))
        rows.append(row)
    blocks.append(Table(header, rows))
    if paper:
        blocks.append(Paragraph(
            f"Paper ({paper.section}, {paper.formula}): adjusted R² {paper.adj_r2:.3f}, {paper.p_values}; "
            f"{paper.data}."))
    return blocks


def regressions(sources: Sources) -> list[Block]:
    blocks: list[Block] = [Heading("Regressions of log-probability differences (TG §4.2)")]
    if sources.regressions is None:
        return [*blocks, missing("regressions", sources, "regressions")]
    if not sources.regressions:
        return [*blocks, Paragraph("regressions: regressions.json lists no regression.")]
    for name, result in sources.regressions.items():
        blocks += regression(str(name), result)
    blocks += figure_block(sources, fig.REGRESSION_COEFFICIENTS,
                      "Regression coefficients ± 1.96 se; hollow diamonds: the paper's (different scale).")
    return blocks


def mdl(sources: Sources) -> list[Block]:
    blocks: list[Block] = [Heading("MDL probing: online code length (TG §4.3, Voita & Titov 2020)")]
    if "mdl" in sources.problems:
        return [*blocks, missing("MDL probing", sources, "mdl")]
    table = sources.tables["mdl"]
    blocks.append(Paragraph(
        "Online code length in kbits (bits, not nats; lower is better) and compression = uniform / online "
        "code length (higher is better), per layer; rows are model / representation / probe."))
    tasks = sorted(table["task"].astype(str).unique(),
                   key=lambda t: (fig.TASK_ORDER.index(t) if t in fig.TASK_ORDER else len(fig.TASK_ORDER), t))
    for task in tasks:
        rows = table[table["task"].astype(str) == task]
        blocks.append(Heading(f"task {task}", 3))
        facts = []
        for column, label in (("uniform_bits", "uniform code length (bits)"), ("n", "N"), ("n_classes", "K")):
            if column in rows.columns:
                values = sorted({fmt.general(v) for v in rows[column]})
                facts.append(f"{label}: {', '.join(values)}")
        if facts:
            blocks.append(Paragraph("; ".join(facts) + "."))
        layers = sorted(rows["layer"].unique())
        keys = rows[["model", "representation", "probe"]].astype(str).drop_duplicates()
        order = {m: i for i, m in enumerate(model_order(keys["model"].unique()))}
        keys = sorted(keys.itertuples(index=False, name=None), key=lambda k: (order[k[0]], k[1], k[2]))
        grouped = rows.groupby([rows["model"].astype(str), rows["representation"].astype(str),
                                rows["probe"].astype(str), "layer"])
        for column, title, scale in (("online_bits", "online code length (kbits)", 1000.0),
                                     ("compression", "compression", 1.0)):
            means = grouped[column].mean()
            header = ["model / representation / probe", *(f"layer {fmt.label(layer)}" for layer in layers)]
            body = [[" / ".join(key), *(fmt.fixed(fmt.scaled(means.get((*key, layer)), 1 / scale))
                                        for layer in layers)] for key in keys]
            blocks += [Paragraph(f"{title}:"), Table(header, body)]
    blocks += figure_block(sources, fig.MDL_CODE_LENGTH, "Online code length per task and layer (cf. TG Fig. 5); "
                      "solid: linear probes, dashed: MLP probes.")
    blocks += figure_block(sources, fig.MDL_COMPRESSION,
                      "Compression (uniform / online code length) per task and layer.")
    return blocks


def scoring(sources: Sources) -> list[Block]:
    """How each number was scored (exact, gold trees, proposals, beam, their union; one row per evaluation and
    method with its models) and, where one model's task was scored by several methods (labelled entries), how
    far each is from its gold-tree value."""
    scoring = sources.settings.get("scoring") or {}
    if not scoring:
        return []
    order = model_order({m for by_model in scoring.values() for m in by_model})
    grouped: dict[tuple[str, str], list[str]] = {}  # (evaluation, description) -> its models
    for folder in sorted(scoring):
        for model in (m for m in order if m in scoring[folder]):
            described = "; ".join(fmt.text(e.get("description")) for e in scoring[folder][model])
            grouped.setdefault((folder, sources.local(described)), []).append(model)
    rows = [[folder, ", ".join(models), described] for (folder, described), models in grouped.items()]
    blocks: list[Block] = [
        Heading("How each number was scored"),
        Paragraph("String models' numbers are exact. Joint models' perplexities are upper bounds (log p(x) >= log "
                  "Σ over a set of trees of p(x, y)): the more of the probability mass the set holds, the tighter; "
                  "a union of a beam's trees and proposals is never looser than either."),
        Table(["evaluation", "models", "method"], rows),
    ]
    cells = {}
    if "summary" not in sources.problems:
        cells = {(r.metric, r.model): r for r in sources.tables["summary"].itertuples(index=False)}
    tight = []
    for task in sorted({tasks.unlabelled(f) for f in scoring}):
        folders = sorted(f for f in scoring if tasks.unlabelled(f) == task)
        if task not in tasks.names() or len(folders) < 2:
            continue
        metric = tasks.get(task).headline[0]
        for model in order:
            used = [(f, scoring[f][model][0]["method"]) for f in folders if len(scoring[f].get(model, [])) == 1]
            if len({method for _, method in used}) < 2:
                continue
            gold = next((cells.get((labelled_metric(metric, f), model)) for f, method in used if method == "gold"),
                        None)
            for folder, method in used:
                r = cells.get((labelled_metric(metric, folder), model))
                if r is None:
                    continue
                gap = "—"
                if gold is not None and method != "gold" and fmt.is_finite(gold.mean) and gold.mean:
                    gap = fmt.signed_percent(100 * (r.mean - gold.mean) / abs(gold.mean))
                tight.append([model, metric_title(labelled_metric(metric, folder)), method,
                              fmt.mean_sd(r.mean, r.sd, percent_scale(metric)), gap])
    if tight:
        blocks += [Heading("One task, several methods", 3),
                   Paragraph("The same models and sentences scored by each method; the last column is the "
                             "difference to the value on the gold trees alone (a bound itself, from one tree)."),
                   Table(["model", "metric", "method", "mean ± sd", "vs gold trees"], tight)]
    return blocks


KNOWN_FIGURES = (fig.DISTRIBUTIONS, fig.SG_CIRCUITS, fig.REGRESSION_COEFFICIENTS, fig.MDL_CODE_LENGTH,
                 fig.MDL_COMPRESSION, *comparison_section.FIGURES, learning_curves_section.LEARNING_CURVES)


def proposals(sources: Sources) -> list[Block]:
    """The proposal sets joint models were scored over: the parser's 1-best and oracle F1 at each N."""
    sets = sources.settings.get("proposals") or []
    if not sets:
        return []
    ns = sorted({int(n) for s in sets for n in (s.get("oracle_f1") or {})})
    rows = []
    for s in sets:
        oracle = s.get("oracle_f1") or {}
        rows.append([fmt.text(s.get("parser_run")), fmt.text(s.get("set")), fmt.count(s.get("n")),
                     fmt.count(s.get("sentences")), fmt.fixed(s.get("one_best_f1")),
                     *(fmt.fixed(oracle.get(str(n))) for n in ns), fmt.text(s.get("problem", ""))])
    return [
        Heading("Proposal sets"),
        Paragraph("Joint models scored over proposals give an upper bound on perplexity (a lower bound on "
                  "log p(x)) that can be no tighter than the trees the parser proposes: the parser's 1-best "
                  "bracket F1 and the oracle F1 of its first N trees (EVALB COLLINS.prm, labeled, percent; n/a "
                  "where the set has no gold trees)."),
        Table(["parser run", "set", "N", "sentences", "1-best F1", *(f"oracle F1 @{n}" for n in ns), "problem"],
              rows),
    ]


def figures(sources: Sources) -> list[Block]:
    """SG per circuit, why a key figure was not written, any other figure, and the figures' notes."""
    blocks: list[Block] = [Heading("More figures")]
    blocks += figure_block(sources, fig.SG_CIRCUITS, "SG score per circuit, mean over seeds ± sd (cf. TG Fig. 4).")
    for stem, caption in headline_section.KEY_FIGURES:  # not written: why, where the analysis said why
        if not written(sources, stem) and any(note.startswith(stem) for note in why_not_written(sources)):
            blocks += figure_block(sources, stem, caption)
    folder = sources.analysis_dir / "figures"
    pngs = folder.glob("*.png") if folder.is_dir() else []
    for stem in sorted(p.stem for p in pngs if p.stem not in KNOWN_FIGURES):
        blocks += figure_block(sources, stem, stem)
    if sources.figure_notes:
        blocks += [Heading("Figure notes", 3), Bullets(sources.figure_notes)]
    return blocks


Section = Callable[[Sources], list[Block]]
TOP: tuple[tuple[str, Section], ...] = (
    ("headline", headline_section.headline), ("results", headline_section.results),
    ("claims", claims_section.verdicts), ("key figures", headline_section.key_figures),
)
# (name, section, the Markdown's brief or None): each section's first block is its heading
FOLDED: tuple[tuple[str, Section, Section | None], ...] = (
    ("setup", setup_section.setup, None), ("paper's numbers", paper_numbers, None),
    ("comparison", comparison_section.comparison, None),
    ("claims checked", claims_section.details, claims_section.details_brief),
    ("all metrics", all_metrics, all_metrics_brief), ("Welch tests", welch, welch_brief),
    ("variance components", variance, variance_brief), ("regressions", regressions, None), ("MDL probing", mdl, None),
    ("learning curves", learning_curves_section.learning_curves, None),
    ("scoring methods", scoring, None), ("proposal sets", proposals, None), ("figures", figures, None),
)


def _failed(name: str, error: Exception) -> Paragraph:
    return Paragraph(f"{name}: could not be rendered: {type(error).__name__}: {error}.")


def build_report(sources: Sources) -> list[Block]:
    """The report as blocks, in reading order: the first screen, then one ``Folded`` per further section.

    A file whose columns are right but whose values are not (text where numbers belong) must not cost the
    whole report: its section says it could not be rendered and why, and the other sections follow.
    """
    blocks: list[Block] = []
    for name, section in TOP:
        try:
            blocks += section(sources)
        except (TypeError, ValueError, KeyError, AttributeError) as error:
            blocks.append(_failed(name, error))
    for name, section, brief in FOLDED:
        try:
            found = section(sources)
            if not found:
                continue
            heading, *rest = found
            blocks.append(Folded(heading.text, rest, None if brief is None else brief(sources)))
        except (TypeError, ValueError, KeyError, AttributeError) as error:
            blocks.append(Folded(name, [_failed(name, error)]))
    return blocks
