"""The papers' claims checked on the runs (``claims.csv``, ``analysis.claims``): their verdicts on the first
screen, how each was checked and what each says in a section below.

The verdicts' table gives each claim, the paper's numbers (its scale and data, its units), our means in the
report's units (SG and BLiMP in percent), the corrected p-value and the verdict, under one line counting the
verdicts. The section below says how they were checked and has the raw p-values, where each claim is stated,
the SG suite sets and each claim's statement (in the Markdown only how they were checked). An experiment
without a claim whose models ran has neither.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from analysis import claims as checked
from analysis.report import formatting as fmt
from analysis.report.blocks import Block, Bullets, Heading, Paragraph, Table
from analysis.report.sources import Sources
from experiments.papers import metric_title, percent_scale

HOW = (
    "Each direction a paper states between two of its models, wherever this experiment has both: the paper's "
    "numbers (its scale and data, its units), our means over seeds, the two-sided Welch test and its p-value "
    "with the {correction} over these claims only (they are planned comparisons). Verdicts: holds (ordered as "
    "claimed, adjusted p < {alpha}), same or opposite direction without significance, equal means, reversed "
    "(significantly the other way), or not tested (and why: for the claims of this experiment's own paper, also "
    "a model or metric the experiment does not have). A claim with <= or >= says only that the second model is "
    "no better: it holds unless the second is significantly better. An SG claim compares our numbers on one "
    "suite set, named beside the paper's.")


def _ours(row: dict[str, Any]) -> str:
    scale = percent_scale(str(row["metric"]))
    return (f"{fmt.compact(fmt.scaled(row['mean_better'], scale))} vs "
            f"{fmt.compact(fmt.scaled(row['mean_worse'], scale))}")


def _published(row: dict[str, Any]) -> str:
    return f"{fmt.general(row['published_better'])} vs {fmt.general(row['published_worse'])}"


def _correction(table: Any) -> tuple[str, str]:
    """``(holm correction, 0.05)`` as the claims table states them."""
    corrections = sorted({fmt.text(c) for c in table.get("correction", [])} - {""})
    alphas = sorted({fmt.general(a) for a in table.get("alpha", [])} - {"n/a"})
    return (f"{', '.join(corrections)} correction" if corrections else "correction"), (" / ".join(alphas) or "alpha")


def _counted(verdicts: list[str]) -> str:
    """``2 hold, 1 reversed, 3 not tested`` in the order of first appearance."""
    counts = Counter(checked.NOT_TESTED if v.startswith(checked.NOT_TESTED) else v for v in verdicts)
    return "; ".join(f"{n} {'hold' if v == checked.HOLDS and n > 1 else v}" for v, n in counts.items())


def verdicts(sources: Sources) -> list[Block]:
    """The claims' verdicts: one line counting them and a row per claim (nothing without claims.csv)."""
    heading = Heading("The papers' claims: verdicts on these runs")
    if "claims" in sources.problems:
        return [heading, Paragraph(f"claims: {sources.problems['claims']}.")]
    if "claims" not in sources.tables:
        return []
    records = sources.tables["claims"].to_dict("records")
    correction, alpha = _correction(sources.tables["claims"])
    rows = [[fmt.text(r["paper"]), fmt.text(r["claim"]), metric_title(str(r["metric"])), _published(r), _ours(r),
             fmt.p_value(r["p_adjusted"]), fmt.text(r["verdict"])] for r in records]
    return [heading, Paragraph(
        f"{len(records)} claims whose models ran here: {_counted([fmt.text(r['verdict']) for r in records])} "
        f"(two-sided Welch tests over seeds, {correction} over the claims, alpha {alpha}; how each was checked "
        "and what each says: below)."),
        Table(["paper", "claim", "metric", "paper's", "ours", "p adjusted", "verdict"], rows)]


def _where(row: dict[str, Any]) -> str:
    """The claim's section and table, with the SG suite sets: ours, and those of the paper's two numbers."""
    ours, published = fmt.text(row.get("suite_set")), fmt.text(row.get("published_suite_sets"))
    where = fmt.text(row["where"])
    return f"{where}; suites: ours {ours}, paper's {published}" if ours else where


def _statements(table: Any) -> Bullets:
    return Bullets([f"{fmt.text(r['claim'])} ({fmt.text(r['where'])}): {fmt.text(r['statement'])}"
                    for r in table.drop_duplicates(["claim", "where"]).to_dict("records")])


def details(sources: Sources) -> list[Block]:
    """How each claim was checked (the full table: raw and adjusted p, where it is stated) and its statement."""
    heading = Heading("The papers' claims, checked on these runs")
    if "claims" not in sources.tables:
        return []
    table = sources.tables["claims"]
    correction, alpha = _correction(table)
    rows = [[fmt.text(r["paper"]), fmt.text(r["claim"]), metric_title(str(r["metric"])), _where(r), _published(r),
             _ours(r), fmt.p_value(r["p"]), fmt.p_value(r["p_adjusted"]), fmt.text(r["verdict"])]
            for r in table.to_dict("records")]
    return [heading, Paragraph(HOW.format(correction=correction, alpha=alpha)),
            Table(["paper", "claim", "metric", "where", "paper's", "ours", "p", "p adjusted", "verdict"], rows),
            _statements(table)]


def details_brief(sources: Sources) -> list[Block]:
    """The Markdown's: how the claims were checked (the verdicts are above; where each claim is stated and
    what it says: report.html and claims.csv)."""
    if "claims" not in sources.tables:
        return []
    correction, alpha = _correction(sources.tables["claims"])
    return [Paragraph(HOW.format(correction=correction, alpha=alpha) + " Where each claim is stated, what it "
                      "says and the raw p-values: report.html and analysis/claims.csv.")]
