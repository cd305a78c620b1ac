"""The papers' claimed directions, checked on an experiment's runs (``claims.csv``).

Each paper states directions between its models ("TG and TXL (trees) achieve a lower perplexity than TXL
(terminals)"; ``experiments.papers``' ``PaperClaim``). Any experiment that has both models of a claim, one
paper's reproduction or the comparison of every family, checks it here from its Welch tests (``welch.csv``,
two-sided, over seeds): the claims are planned comparisons, so their p-values are corrected among
themselves (Holm over the claims tested in this experiment), not over every pair of the Welch table. A claim
against another metric of the runs (PaLM-U's F1 against the right-branching trees' F1 on the same sentences)
is a Welch test of the two metrics' values over the seeds. An SG claim is checked on one suite set, named in
the ``suite_set`` column beside the suite sets of the paper's numbers. Each row's verdict:

- ``holds``: our means are ordered as claimed and the corrected p is below ``alpha`` (a claim of no
  improvement: the second model is not significantly better);
- ``same direction, not significant`` / ``opposite direction, not significant`` (``equal means``: neither);
- ``reversed``: ordered the other way, significantly;
- ``not tested: ...``: the Welch test is undefined, the models were scored on different items (its note), or,
  for the claims of the experiment's own paper, the experiment has no results of a model or metric the claim
  needs (which ones: a paper's claim is never left out silently).

Nothing here names a family: the claims come from the paper registry, the models from the experiment. Units:
``mean_better`` and ``mean_worse`` are ours as measured (SG and BLiMP as fractions), ``published_better`` and
``published_worse`` the paper's in its units (percent); the report shows both in percent.
"""

from __future__ import annotations

import math
from typing import Any

from analysis import statistics
from experiments.papers import PaperClaim, papers

CLAIMS_FILE = "claims.csv"
ALPHA = 0.05
COLUMNS = ("paper", "claim", "metric", "where", "statement", "suite_set", "published_suite_sets",
           "published_better", "published_worse", "n_better", "n_worse", "mean_better", "mean_worse", "p",
           "p_adjusted", "correction", "alpha", "verdict")
HOLDS, REVERSED = "holds", "reversed"
SAME_NS, OPPOSITE_NS = "same direction, not significant", "opposite direction, not significant"
EQUAL = "equal means"
NOT_TESTED = "not tested"


def check_claims(welch: Any, long: Any = None, paper: str | None = None, alpha: float = ALPHA,
                 correction: str = "holm") -> Any:
    """One row per (registered claim, metric) whose two models and metric are in ``welch`` (the table of
    ``statistics.pairwise_welch``; its raw p-values), with the claims' own correction and a verdict.

    ``long`` (the aggregate's run-level metrics: ``model``, ``metric``, ``value``) gives the claims against
    another metric of the runs their values; ``paper``: the key of the experiment's own paper, whose every
    claim gets a row, ``not tested`` with what is missing when the experiment lacks it."""
    import pandas as pd

    pairs = {(r.metric, r.model_a, r.model_b): r for r in welch.itertuples(index=False)}
    values = {} if long is None else {key: g["value"].to_numpy(dtype=float)
                                      for key, g in long.groupby(["model", "metric"], sort=False)}
    rows = []
    for registered in papers():
        for claim in registered.claims:
            for metric in claim.metrics:
                found = _tested(claim, metric, pairs, values)
                if found is None and registered.key != paper:
                    continue
                row = {"paper": registered.key, "claim": claim.text(), "metric": metric, "where": claim.where,
                       "statement": claim.statement, "suite_set": claim.suite_set or "",
                       "published_suite_sets": " vs ".join(claim.suites), "published_better": claim.published[0],
                       "published_worse": claim.published[1], "correction": correction, "alpha": alpha,
                       "strict": claim.strict}
                if found is None:
                    rows.append({**row, "n_better": 0, "n_worse": 0, "mean_better": math.nan,
                                 "mean_worse": math.nan, "p": math.nan, "agrees": False,
                                 "note": _missing(claim, metric, values)})
                    continue
                better, worse, n_better, n_worse, p, note = found
                rows.append({**row, "n_better": n_better, "n_worse": n_worse, "mean_better": better,
                             "mean_worse": worse, "p": p, "note": note,
                             "agrees": (better < worse) if claim.lower_is_better else (better > worse)})
    table = _without_untested_twins(pd.DataFrame(rows, columns=[*COLUMNS, "strict", "agrees", "note"]))
    table["p_adjusted"] = statistics.adjusted_p(table["p"].to_numpy(dtype=float), correction)
    table["verdict"] = [_verdict(r, alpha) for r in table.itertuples(index=False)]
    return table[list(COLUMNS)]


def _without_untested_twins(table: Any) -> Any:
    """``table`` less the untested rows of a claim stated once for one model under two labels (a paper's
    baseline may carry its own specs' label and the comparison's): the same paper, metric, section, statement
    and published pair as a tested row, or as an earlier untested one."""
    twins = ["paper", "metric", "where", "statement", "published_better", "published_worse"]
    tested = table["n_better"].gt(0) & table["n_worse"].gt(0)
    has_tested = tested.groupby([table[c] for c in twins]).transform("any")
    first = ~table.duplicated(twins)
    return table[tested | (~has_tested & first)].reset_index(drop=True)


def _tested(claim: PaperClaim, metric: str, pairs: dict, values: dict) -> tuple | None:
    """(mean of the better side, of the worse, their n, raw p, note) of ``claim`` on ``metric``, or None when
    the experiment lacks a side."""
    if claim.against is not None:
        a, b = values.get((claim.better, metric)), values.get((claim.worse, claim.against))
        if a is None or b is None:
            return None
        r = statistics.welch(a, b)
        return r.mean_a, r.mean_b, r.n_a, r.n_b, r.p, r.note
    flipped = (metric, claim.better, claim.worse) not in pairs  # the Welch table has (worse, better)
    found = pairs.get((metric, claim.worse, claim.better) if flipped else (metric, claim.better, claim.worse))
    if found is None:
        return None
    if flipped:
        return found.mean_b, found.mean_a, found.n_b, found.n_a, found.p, found.note
    return found.mean_a, found.mean_b, found.n_a, found.n_b, found.p, found.note


def _missing(claim: PaperClaim, metric: str, values: dict) -> str:
    """What the experiment lacks to test ``claim`` on ``metric``: ``no ppl results of MODEL``."""
    sides = ((claim.better, metric), (claim.worse, claim.against or metric))
    absent = [f"{m} results of {model}" for model, m in dict.fromkeys(sides) if (model, m) not in values]
    return "this experiment has no " + " and no ".join(absent or [f"{metric} results of both models"])


def _verdict(row: Any, alpha: float) -> str:
    if not math.isfinite(row.p_adjusted):
        note = row.note if isinstance(row.note, str) and row.note else "the Welch test is undefined"
        return f"{NOT_TESTED}: {note}"
    if math.isclose(row.mean_better, row.mean_worse, rel_tol=1e-9):  # e.g. as many BLiMP pairs right
        return HOLDS if not row.strict else EQUAL
    significant = row.p_adjusted < alpha
    if row.agrees:
        return HOLDS if significant or not row.strict else SAME_NS
    if not row.strict:  # a claim of no improvement: refuted only by a significant improvement
        return REVERSED if significant else HOLDS
    return REVERSED if significant else OPPOSITE_NS
