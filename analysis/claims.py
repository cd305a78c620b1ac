"""The papers' claimed directions, checked on an experiment's runs (``claims.csv``).

Each paper states directions between its models ("TG and TXL (trees) achieve a lower perplexity than TXL
(terminals)"; ``experiments.papers``' ``PaperClaim``). Any experiment that has both models of a claim, one
paper's reproduction or the comparison of every family, checks it here from its Welch tests (``welch.csv``,
two-sided, over seeds): the claims are planned comparisons, so their p-values are corrected among
themselves (Holm over the claims tested in this experiment), not over every pair of the Welch table. Each
row's verdict:

- ``holds``: our means are ordered as claimed and the corrected p is below ``alpha``;
- ``same direction, not significant`` / ``opposite direction, not significant`` (``equal means``: neither);
- ``reversed``: ordered the other way, significantly;
- ``not tested: ...``: the Welch test is undefined or the models were scored on different items (its note).

Nothing here names a family: the claims come from the paper registry, the models from the experiment.
"""

from __future__ import annotations

import math
from typing import Any

from analysis import statistics
from experiments.papers import papers

CLAIMS_FILE = "claims.csv"
ALPHA = 0.05
COLUMNS = ("paper", "claim", "metric", "where", "statement", "published_better", "published_worse", "n_better",
           "n_worse", "mean_better", "mean_worse", "p", "p_adjusted", "correction", "alpha", "verdict")
HOLDS, REVERSED = "holds", "reversed"
SAME_NS, OPPOSITE_NS = "same direction, not significant", "opposite direction, not significant"
EQUAL = "equal means"


def check_claims(welch: Any, alpha: float = ALPHA, correction: str = "holm") -> Any:
    """One row per (registered claim, metric) whose two models and metric are in ``welch`` (the table of
    ``statistics.pairwise_welch``; its raw p-values), with the claims' own correction and a verdict."""
    import pandas as pd

    pairs = {(r.metric, r.model_a, r.model_b): r for r in welch.itertuples(index=False)}
    rows = []
    for paper in papers():
        for claim in paper.claims:
            for metric in claim.metrics:
                flipped = (metric, claim.better, claim.worse) not in pairs  # the Welch table has (worse, better)
                found = pairs.get((metric, claim.worse, claim.better) if flipped else (metric, claim.better,
                                                                                       claim.worse))
                if found is None:
                    continue
                better, worse = (found.mean_b, found.mean_a) if flipped else (found.mean_a, found.mean_b)
                n_better, n_worse = (found.n_b, found.n_a) if flipped else (found.n_a, found.n_b)
                rows.append({
                    "paper": paper.key, "claim": claim.text(), "metric": metric, "where": claim.where,
                    "statement": claim.statement, "published_better": claim.published[0],
                    "published_worse": claim.published[1], "n_better": n_better, "n_worse": n_worse,
                    "mean_better": better, "mean_worse": worse, "p": found.p, "correction": correction,
                    "alpha": alpha,
                    "agrees": (better < worse) if claim.lower_is_better else (better > worse),
                    "note": found.note,
                })
    table = pd.DataFrame(rows, columns=[*COLUMNS, "agrees", "note"])
    table["p_adjusted"] = statistics.adjusted_p(table["p"].to_numpy(dtype=float), correction)
    table["verdict"] = [_verdict(r, alpha) for r in table.itertuples(index=False)]
    return table[list(COLUMNS)]


def _verdict(row: Any, alpha: float) -> str:
    if not math.isfinite(row.p_adjusted):
        note = row.note if isinstance(row.note, str) and row.note else "the Welch test is undefined"
        return f"not tested: {note}"
    if math.isclose(row.mean_better, row.mean_worse, rel_tol=1e-9):  # e.g. as many BLiMP pairs right
        return EQUAL
    significant = row.p_adjusted < alpha
    if row.agrees:
        return HOLDS if significant else SAME_NS
    return REVERSED if significant else OPPOSITE_NS
