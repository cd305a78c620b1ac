"""The report's sections, in reading order: one function per section, each from ``Sources`` to blocks.

headline (scale, seeds, data, models, every reduced setting, skipped analyses), results (the headline table
with the paper's numbers beside ours, and its figures), the comparison across models (``comparison_section``),
the papers' claims checked on the runs (``claims.csv``), all metrics, Welch tests, variance components,
regressions, MDL probing, scoring methods, proposal sets and other figures. A section whose file is
missing says why (the pipeline's reason for skipping it, or the file's problem); a section that fails on
its values says so in one paragraph and costs nothing else (``build_report``).

The published numbers come from the paper whose tables describe the experiment's model families
(``experiments.papers``); sections ask that registry and never name a family themselves.
"""

from __future__ import annotations

import math
from typing import Any

from analysis import figures as fig
from analysis.report import comparison_section
from analysis.report import formatting as fmt
from analysis.report.blocks import Block, Bullets, Heading, Paragraph, Table
from analysis.report.figure_block import figure_block, skipped_reasons
from analysis.report.sources import Sources
from analysis.statistics import NOT_COMPARED
from experiments.evaluate import tasks
from experiments.papers import Paper, metric_title, model_order, paper_for, percent_scale, published_regression

# the file -> the analysis step whose reason ``settings.json["skipped"]`` gives when it was not run
SKIP_KEYS = {"summary": "statistics", "welch": "statistics", "variance": "variance",
             "regressions": "regressions", "mdl": "probing"}


def _missing(section: str, sources: Sources, name: str) -> Paragraph:
    """Why ``name``'s section is empty: the pipeline's reason for skipping it if the file is absent, else
    the problem with the file."""
    problem = sources.problems.get(name, "missing")
    reason = skipped_reasons(sources).get(SKIP_KEYS.get(name, name))
    if reason and problem.startswith("missing"):
        return Paragraph(f"{section}: skipped: {reason}.")
    return Paragraph(f"{section}: {problem}.")


def _data(settings: dict[str, Any]) -> str | None:
    """``settings["data"]``, a name or a list of names, as one string (None when absent)."""
    data = settings.get("data")
    if isinstance(data, list):
        return ", ".join(str(d) for d in data) or None
    return None if data is None else str(data)


def _paper(settings: dict[str, Any]) -> Paper | None:
    """The paper whose numbers stand beside this experiment's (by the families of its models), or None."""
    models = settings.get("models") or {}
    return paper_for(info.get("family", "") for info in models.values() if isinstance(info, dict))


def headline(sources: Sources) -> list[Block]:
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
    paper = _paper(settings)
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
    seeds = settings.get("seeds") or []
    models = settings.get("models") or {}
    facts = [
        f"experiment: {experiment}",
        f"scale: {scale}",
        f"seeds: {len(seeds)} ({', '.join(str(s) for s in seeds)})" if seeds else "seeds: unknown",
        f"data: {_data(settings) or 'unknown'}",
    ]
    if settings.get("description"):
        facts.insert(1, f"description: {settings['description']}")
    runs = settings.get("runs")
    if isinstance(runs, dict):
        line = f"runs: {runs.get('done', '?')} done of {runs.get('total', '?')}"
        for key in ("failed", "missing"):
            if runs.get(key):
                line += f"; {key}: {', '.join(str(r) for r in runs[key])}"
        facts.append(line)
    for label in model_order(models):
        info = models[label] if isinstance(models[label], dict) else {}
        details = ", ".join(f"{key} {fmt.readable(info[key])}" for key in ("family", "level", "parameters")
                            if key in info)
        facts.append(f"model {label}: {details}" if details else f"model {label}")
    if "created" in settings:
        facts.append(f"created: {settings['created']}")
    blocks.append(Bullets(facts))
    blocks.append(Heading("Reduced settings (vs the paper)", 3))
    blocks.append(Bullets([str(r) for r in reduced]) if reduced else Paragraph("None recorded."))
    skipped = skipped_reasons(sources)
    if skipped:
        blocks += [Heading("Skipped analyses", 3), Bullets([f"{k}: {v}" for k, v in skipped.items()])]
    notes = settings.get("notes")
    if isinstance(notes, list) and notes:
        blocks += [Heading("Notes", 3), Bullets([str(n) for n in notes])]
    return blocks


def headline_table(sources: Sources) -> list[Block]:
    """Mean ± sd per model x headline metric, the paper's numbers beside (or why there is no table)."""
    if "summary" in sources.problems:
        return [_missing("results", sources, "summary")]
    summary = sources.tables["summary"]
    headline = tasks.headline_metrics()
    present = list(dict.fromkeys(str(m) for m in summary["metric"]))
    # each headline metric, then its labelled variants (the same task on other corpora: ppl@gum, ...)
    metrics = [m for h in headline
               for m in sorted((m for m in present if tasks.unlabelled(m) == h), key=lambda m: m != h)]
    if not metrics:
        wanted = ", ".join(headline)
        return [Paragraph(f"results: summary.csv has none of the headline metrics {wanted}.")]
    cells = {(r.metric, r.model): r for r in summary.itertuples(index=False)}
    # models without any headline metric (e.g. the proposal parser) get no row
    models = [m for m in model_order(summary["model"].unique()) if any((x, m) in cells for x in metrics)]
    data = _data(sources.settings)
    paper = _paper(sources.settings)
    n_seeds = len(sources.settings.get("seeds") or [])
    header = ["model"]
    columns = []
    for metric in metrics:
        with_paper = paper is not None and any(paper.numbers_for(m, metric, data) for m in models)
        header.append(f"{metric_title(metric)}: ours")
        if with_paper:
            header.append(f"{metric_title(metric)}: {paper.column}")
        columns.append((metric, with_paper))
    rows = []
    for model in models:
        row = [model]
        for metric, with_paper in columns:
            r = cells.get((metric, model))
            if r is None:
                row.append("—")
            else:
                n = f" (n={fmt.count(r.n)})" if not n_seeds or r.n != n_seeds else ""
                row.append(fmt.mean_sd(r.mean, r.sd, percent_scale(metric)) + n)
            if with_paper:
                numbers = paper.numbers_for(model, metric, data)
                row.append("; ".join(f"{p.text()} ({p.table}, {p.column.title}, {p.split})" for p in numbers)
                           or "—")
        rows.append(row)
    if paper is None:
        return [Table(header, rows)]
    notes = [paper.provenance]
    without = [metric_title(m) for m, with_paper in columns if not with_paper]
    if without:
        notes.append(f"Not in the paper: {', '.join(without)}.")
    return [Table(header, rows), *(Paragraph(n) for n in notes)]


def all_metrics(sources: Sources) -> list[Block]:
    blocks: list[Block] = [Heading("All metrics (mean ± sd over seeds, 95% bootstrap CI)")]
    if "summary" in sources.problems:
        return [*blocks, _missing("all metrics", sources, "summary")]
    summary = sources.tables["summary"]
    order = {m: i for i, m in enumerate(model_order(summary["model"].unique()))}
    rows = []
    for r in sorted(summary.itertuples(index=False), key=lambda r: (str(r.metric), order[r.model])):
        scale = percent_scale(str(r.metric))
        ci_low, ci_high = getattr(r, "ci_low", math.nan), getattr(r, "ci_high", math.nan)
        ci = "n/a"
        if fmt.is_finite(ci_low):
            ci = f"{fmt.fixed(fmt.scaled(ci_low, scale))} – {fmt.fixed(fmt.scaled(ci_high, scale))}"
        rows.append([metric_title(str(r.metric)), str(r.model), fmt.count(r.n), fmt.mean_sd(r.mean, r.sd, scale),
                     ci])
    return [*blocks, Table(["metric", "model", "n", "mean ± sd", "95% CI"], rows)]


def welch(sources: Sources) -> list[Block]:
    blocks: list[Block] = [Heading("Welch's t-tests between models (two-sided, over seeds)")]
    if "welch" in sources.problems:
        return [*blocks, _missing("Welch tests", sources, "welch")]
    table = sources.tables["welch"]
    corrections = sorted({fmt.text(c) for c in table.get("correction", [])} - {""})
    if corrections:
        blocks.append(Paragraph(f"Adjusted p-values: {', '.join(corrections)} correction over the whole "
                                "table."))
    records = table.to_dict("records")
    apart = [r for r in records if fmt.text(r.get("note")).startswith(NOT_COMPARED)]
    if apart:
        pairs = "; ".join(f"{metric_title(str(r['metric']))}: {r['model_a']} – {r['model_b']}" for r in apart)
        blocks.append(Paragraph("Only models scored on the same items are tested (same corpus, level and item "
                                "count; for the validation loss, the same validation tokens). Not tested, "
                                f"scored on different items (welch.csv says on what): {pairs}."))
    rows = []
    for r in (r for r in records if r not in apart):
        scale = percent_scale(str(r["metric"]))
        rows.append([
            metric_title(str(r["metric"])), str(r["model_a"]), str(r["model_b"]),
            fmt.count(r.get("n_a")), fmt.count(r.get("n_b")),
            fmt.fixed(fmt.scaled(r.get("mean_a"), scale)), fmt.fixed(fmt.scaled(r.get("mean_b"), scale)),
            fmt.fixed(fmt.scaled(r.get("diff"), scale)), fmt.general(r["t"]), fmt.general(r["df"]),
            fmt.p_value(r["p"]), fmt.p_value(r["p_adjusted"]), fmt.text(r.get("note")),
        ])
    header = ["metric", "A", "B", "n A", "n B", "mean A", "mean B", "A − B", "t", "df", "p", "p adjusted",
              "note"]
    return [*blocks, Table(header, rows)]


def claims(sources: Sources) -> list[Block]:
    """Each paper's claimed directions whose models this experiment has, checked on our seeds (``claims.csv``);
    nothing for an experiment without such a pair."""
    heading = Heading("The papers' claims, checked on these runs")
    if "claims" in sources.problems:
        return [heading, Paragraph(f"claims: {sources.problems['claims']}.")]
    if "claims" not in sources.tables:
        return []
    table = sources.tables["claims"]
    corrections = sorted({fmt.text(c) for c in table.get("correction", [])} - {""})
    alphas = sorted({fmt.general(a) for a in table.get("alpha", [])} - {"n/a"})
    rows = []
    for r in table.to_dict("records"):
        scale = percent_scale(str(r["metric"]))
        rows.append([
            fmt.text(r["paper"]), fmt.text(r["claim"]), metric_title(str(r["metric"])), _claim_where(r),
            f"{fmt.general(r['published_better'])} vs {fmt.general(r['published_worse'])}",
            f"{fmt.general(fmt.scaled(r['mean_better'], scale))} vs "
            f"{fmt.general(fmt.scaled(r['mean_worse'], scale))}",
            fmt.p_value(r["p"]), fmt.p_value(r["p_adjusted"]), fmt.text(r["verdict"]),
        ])
    correction = f"{', '.join(corrections)} correction" if corrections else "correction"
    alpha = " / ".join(alphas) or "alpha"
    return [heading, Paragraph(
        "Each direction a paper states between two of its models, wherever this experiment has both: the "
        "paper's numbers (its scale and data, its units), our means over seeds, the two-sided Welch test and "
        f"its p-value with the {correction} over these claims only (they are planned comparisons). "
        f"Verdicts: holds (ordered as claimed, adjusted p < {alpha}), same or opposite direction without "
        "significance, equal means, reversed (significantly the other way), or not tested (and why: for "
        "the claims of this experiment's own paper, also a model or metric the experiment does not have). A "
        "claim with <= or >= says only that the second model is no better: it holds unless the second is "
        "significantly better. An SG claim compares our numbers on one suite set, named beside the paper's."),
        Table(["paper", "claim", "metric", "where", "paper's", "ours", "p", "p adjusted", "verdict"], rows),
        Bullets([f"{fmt.text(r['claim'])} ({fmt.text(r['where'])}): {fmt.text(r['statement'])}"
                 for r in table.drop_duplicates(["claim", "where"]).to_dict("records")])]


def _claim_where(row: dict[str, Any]) -> str:
    """The claim's section and table, with the SG suite sets: ours, and those of the paper's two numbers."""
    ours, published = fmt.text(row.get("suite_set")), fmt.text(row.get("published_suite_sets"))
    where = fmt.text(row["where"])
    return f"{where}; suites: ours {ours}, paper's {published}" if ours else where


def variance(sources: Sources) -> list[Block]:
    blocks: list[Block] = [Heading("Seed-level vs item-level variance")]
    if "variance" in sources.problems:
        return [*blocks, _missing("variance components", sources, "variance")]
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
        return [*blocks, _missing("regressions", sources, "regressions")]
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
        return [*blocks, _missing("MDL probing", sources, "mdl")]
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
    """How each number was scored (exact, gold trees, proposals, beam, their union) and, where one model's
    task was scored by several methods (labelled entries), how far each is from its gold-tree value."""
    scoring = sources.settings.get("scoring") or {}
    if not scoring:
        return []
    order = model_order({m for by_model in scoring.values() for m in by_model})
    rows = [[folder, model, "; ".join(fmt.text(e.get("description")) for e in scoring[folder][model])]
            for folder in sorted(scoring) for model in order if model in scoring[folder]]
    blocks: list[Block] = [
        Heading("How each number was scored"),
        Paragraph("String models' numbers are exact. Joint models' perplexities are upper bounds (log p(x) >= log "
                  "Σ over a set of trees of p(x, y)): the more of the probability mass the set holds, the tighter; "
                  "a union of a beam's trees and proposals is never looser than either."),
        Table(["evaluation", "model", "method"], rows),
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
            gold = next((cells.get((_labelled_metric(metric, f), model)) for f, method in used if method == "gold"),
                        None)
            for folder, method in used:
                r = cells.get((_labelled_metric(metric, folder), model))
                if r is None:
                    continue
                gap = "—"
                if gold is not None and method != "gold" and fmt.is_finite(gold.mean) and gold.mean:
                    gap = f"{100 * (r.mean - gold.mean) / abs(gold.mean):+.1f} %"
                tight.append([model, metric_title(_labelled_metric(metric, folder)), method,
                              fmt.mean_sd(r.mean, r.sd, percent_scale(metric)), gap])
    if tight:
        blocks += [Heading("One task, several methods", 3),
                   Paragraph("The same models and sentences scored by each method; the last column is the "
                             "difference to the value on the gold trees alone (a bound itself, from one tree)."),
                   Table(["model", "metric", "method", "mean ± sd", "vs gold trees"], tight)]
    return blocks


def _labelled_metric(metric: str, folder: str) -> str:
    """The name of a task's ``metric`` in the results of its (possibly labelled) folder: ``ppl@gold``."""
    return tasks.labelled(metric, folder.split(tasks.LABEL_SEPARATOR, 1)[1] if tasks.LABEL_SEPARATOR in folder
                          else None)


KNOWN_FIGURES = (fig.DISTRIBUTIONS, fig.SG_CIRCUITS, fig.REGRESSION_COEFFICIENTS, fig.MDL_CODE_LENGTH,
                 fig.MDL_COMPRESSION, *comparison_section.FIGURES)


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


def other_figures(sources: Sources) -> list[Block]:
    folder = sources.analysis_dir / "figures"
    pngs = folder.glob("*.png") if folder.is_dir() else []
    others = sorted(p.stem for p in pngs if p.stem not in KNOWN_FIGURES)
    blocks: list[Block] = []
    if others:
        blocks.append(Heading("Other figures"))
        for stem in others:
            blocks += figure_block(sources, stem, stem)
    if sources.figure_notes:
        blocks += [Heading("Figure notes", 3), Bullets(sources.figure_notes)]
    return blocks


def results(sources: Sources) -> list[Block]:
    beside = "" if _paper(sources.settings) is None else " beside the paper's published numbers"
    return [
        Heading(f"Results (mean ± sd over seeds){beside}"),
        *headline_table(sources),
        *figure_block(sources, fig.DISTRIBUTIONS, "Metrics over seeds per model (cf. TG Fig. 3)."),
        *figure_block(sources, fig.SG_CIRCUITS, "SG score per circuit, mean over seeds ± sd (cf. TG Fig. 4)."),
    ]


SECTIONS = (
    ("headline", headline), ("results", results), ("comparison", comparison_section.comparison),
    ("claims", claims), ("all metrics", all_metrics), ("Welch tests", welch),
    ("variance components", variance), ("regressions", regressions), ("MDL probing", mdl),
    ("scoring methods", scoring), ("proposal sets", proposals), ("other figures", other_figures),
)


def build_report(sources: Sources) -> list[Block]:
    """The report as blocks, in reading order.

    A file whose columns are right but whose values are not (text where numbers belong) must not cost the
    whole report: its section says it could not be rendered and why, and the other sections follow.
    """
    blocks: list[Block] = []
    for name, section in SECTIONS:
        try:
            blocks += section(sources)
        except (TypeError, ValueError, KeyError, AttributeError) as error:
            blocks.append(Paragraph(f"{name}: could not be rendered: {type(error).__name__}: {error}."))
    return blocks

