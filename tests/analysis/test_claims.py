"""The papers' claimed directions checked on Welch tests over seeds (``analysis.claims``)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from statsmodels.stats.multitest import multipletests

from analysis import claims, statistics
from experiments.evaluate import tasks
from experiments.papers import papers


def _long(values: dict[tuple[str, str], list[float]]) -> pd.DataFrame:
    return pd.DataFrame([{"run_id": f"{model}-s{seed}", "model": model, "family": model, "seed": seed,
                          "metric": metric, "value": value}
                         for (model, metric), seeds in values.items() for seed, value in enumerate(seeds)])


def _checked(values: dict[tuple[str, str], list[float]], **welch_options) -> pd.DataFrame:
    welch = statistics.pairwise_welch(_long(values), **welch_options)
    return claims.check_claims(welch).set_index(["claim", "metric"])


def test_each_verdict_from_the_seeds() -> None:
    table = _checked({
        ("tg", "ppl"): [60.0, 60.5, 61.0],             # TG < TXL (terminals), clearly: holds
        ("txl-terminals", "ppl"): [80.0, 80.5, 81.0],
        ("txl-trees", "ppl"): [90.0, 90.4, 91.0],      # TXL (trees) < TG claimed, clearly the other way: reversed
        ("tg", "sg"): [0.50, 0.60, 0.70],              # TG > TXL (trees) claimed, slightly so: same direction
        ("txl-trees", "sg"): [0.48, 0.58, 0.69],
        ("txl-terminals", "sg"): [0.52, 0.62, 0.71],   # TG > TXL (terminals) claimed, slightly lower: opposite
        ("pushdown", "blimp"): [0.6, 0.7, 0.8],        # equal means
        ("base-lm", "blimp"): [0.65, 0.7, 0.75],
    })
    assert table.loc[("tg < txl-terminals", "ppl"), "verdict"] == claims.HOLDS
    assert table.loc[("txl-trees < tg", "ppl"), "verdict"] == claims.REVERSED
    assert table.loc[("tg > txl-trees", "sg"), "verdict"] == claims.SAME_NS
    assert table.loc[("tg > txl-terminals", "sg"), "verdict"] == claims.OPPOSITE_NS
    assert table.loc[("pushdown > base-lm", "blimp"), "verdict"] == claims.EQUAL
    # the better model's mean is the claim's first, whichever order the Welch table has the pair in
    row = table.loc[("txl-trees < txl-terminals", "ppl")]
    assert row.mean_better == pytest.approx(90.4666, rel=1e-4) and row.mean_worse == pytest.approx(80.5)
    assert (row.published_better, row.published_worse) == (61.2, 62.6) and row.paper == "tg"
    # a claim whose model or metric the experiment lacks has no row (no Pushdown-LM ppl, no PaLM at all)
    assert ("pushdown < base-lm", "ppl") not in table.index
    assert not table.reset_index()["paper"].isin(["palm", "som"]).any()


def test_holm_over_the_claims_only() -> None:
    """The claims are planned comparisons: corrected among themselves, not over every pair of the Welch table."""
    values = {("tg", "ppl"): [60.0, 60.5, 61.0], ("txl-terminals", "ppl"): [61.0, 62.5, 61.5],
              ("txl-trees", "ppl"): [59.0, 61.0, 60.1]}
    values.update({(f"other-{i}", "ppl"): [50.0 + i, 51.0 + i, 52.5 + i] for i in range(6)})
    welch = statistics.pairwise_welch(_long(values))
    table = claims.check_claims(welch)
    assert len(table) == 3  # tg < txl-terminals, txl-trees < txl-terminals, txl-trees < tg
    expected = multipletests(table["p"].to_numpy(), method="holm")[1]
    np.testing.assert_allclose(table["p_adjusted"].to_numpy(), expected)
    whole_table = {frozenset((r.model_a, r.model_b)): r.p_adjusted for r in welch.itertuples()}
    for row in table.itertuples():  # 36 pairs in the whole table's family, 3 in the claims'
        pair = frozenset(row.claim.split(" < "))
        assert row.p_adjusted < whole_table[pair] or whole_table[pair] == 1.0
    assert set(table["correction"]) == {"holm"}


def test_pairs_scored_on_different_items_are_not_tested() -> None:
    values = {("pushdown", "ppl"): [20.0, 20.5, 21.0], ("base-lm", "ppl"): [22.0, 22.5, 23.0],
              ("pushdown", "sg"): [0.8, 0.82, 0.81], ("base-lm", "sg"): [0.7]}
    on = {"ppl": {"pushdown": "test, 100 sentences", "base-lm": "test, 50 sentences"}}
    table = _checked(values, evaluated_on=on)
    assert table.loc[("pushdown < base-lm", "ppl"), "verdict"].startswith(
        f"not tested: {statistics.NOT_COMPARED}")
    assert table.loc[("pushdown > base-lm", "sg"), "verdict"] == \
        "not tested: fewer than 2 values in b: the test is undefined"
    assert table["p_adjusted"].isna().all()


def test_every_claim_names_known_models_tested_metrics_and_its_published_direction() -> None:
    """The registry's claims are data: each names models some paper's tables order, metrics the Welch tests
    cover, and published numbers ordered as the claim says."""
    labels = {label for paper in papers() for label in paper.model_order}
    found = 0
    for paper in papers():
        for claim in paper.claims:
            found += 1
            assert {claim.better, claim.worse} <= labels, (paper.key, claim)
            assert all(tasks.is_tested(metric) for metric in claim.metrics), (paper.key, claim)
            better, worse = claim.published
            assert (better < worse) if claim.lower_is_better else (better > worse), (paper.key, claim)
    assert found >= 20
