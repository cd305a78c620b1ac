"""Seed statistics: summaries, bootstrap CIs, Welch tests (= scipy), corrections (= statsmodels), variance."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pandas as pd
import pytest
from scipy import stats
from statsmodels.stats.multitest import multipletests

from analysis import statistics
from analysis.statistics import pairwise_welch, summarize, variance_components, welch
from lightning_modules.errors import InputError

# Fixed samples (e.g. perplexities of 5-7 seeds); unequal sizes and variances.
A = [61.8, 62.1, 61.5, 61.9, 62.4, 61.7]
B = [61.2, 60.8, 61.6, 61.0, 61.5]
C = [62.6, 62.9, 62.3, 62.5, 62.8, 62.7, 62.4]


def long_table(samples: dict[str, dict[str, list[float]]]) -> pd.DataFrame:
    """A long table {metric: {model: values}}, one row per (seed, metric, model)."""
    rows = [
        {"run_id": f"{model}-s{seed}", "model": model, "seed": seed, "metric": metric, "value": value}
        for metric, by_model in samples.items()
        for model, values in by_model.items()
        for seed, value in enumerate(values)
    ]
    return pd.DataFrame(rows)


# ---------------------------------------------------------------------------------------------- summarize


def test_summarize_moments_and_order():
    table = long_table({"sg": {"txl": B, "tg": A}, "ppl": {"tg": C, "txl": A[:3], "solo": [5.0]}})
    summary = summarize(table, n_boot=2000)
    assert list(summary.columns) == list(statistics.SUMMARY_COLUMNS)
    # Metrics, then models, in order of first appearance (txl before tg, solo last).
    assert list(zip(summary.metric, summary.model)) == [
        ("sg", "txl"), ("sg", "tg"), ("ppl", "txl"), ("ppl", "tg"), ("ppl", "solo")
    ]
    row = summary.set_index(["metric", "model"]).loc[("sg", "txl")]
    assert row["n"] == len(B)
    assert row["mean"] == pytest.approx(np.mean(B))
    assert row["sd"] == pytest.approx(np.std(B, ddof=1))
    assert row["sem"] == pytest.approx(np.std(B, ddof=1) / math.sqrt(len(B)))
    assert (row["min"], row["max"]) == (min(B), max(B))
    assert min(B) <= row["ci_low"] < row["mean"] < row["ci_high"] <= max(B)
    solo = summary.iloc[-1]
    assert solo.n == 1 and solo["mean"] == 5.0
    assert all(math.isnan(solo[c]) for c in ("sd", "sem", "ci_low", "ci_high"))


def test_summarize_bootstrap_ci_matches_normal_theory():
    values = np.random.default_rng(3).normal(10.0, 2.0, size=60)
    row = summarize(long_table({"m": {"x": list(values)}}), n_boot=20000).iloc[0]
    # The percentile bootstrap of a mean approaches mean ± z·sd_plugin/sqrt(n) for a large normal sample.
    half = stats.norm.ppf(0.975) * values.std(ddof=0) / math.sqrt(len(values))
    assert row.ci_low == pytest.approx(values.mean() - half, abs=0.06 * half)
    assert row.ci_high == pytest.approx(values.mean() + half, abs=0.06 * half)


def test_summarize_is_seeded_and_rows_independent():
    base = long_table({"sg": {"tg": A, "txl": B}})
    first, again = summarize(base, n_boot=500, seed=1), summarize(base, n_boot=500, seed=1)
    pd.testing.assert_frame_equal(first, again)
    assert not np.allclose(first.ci_low, summarize(base, n_boot=500, seed=2).ci_low)
    bigger = summarize(long_table({"ppl": {"z": C}, "sg": {"tg": A, "txl": B}}), n_boot=500, seed=1)
    pd.testing.assert_frame_equal(bigger[bigger.metric == "sg"].reset_index(drop=True), first)


def test_summarize_metric_selection():
    table = long_table({"sg": {"tg": A}, "ppl": {"tg": C}, "best_val_loss": {"tg": B}})
    assert list(summarize(table, metrics=["ppl", "sg"], n_boot=10).metric) == ["ppl", "sg"]
    with pytest.raises(InputError, match="not in the table: f1"):
        summarize(table, metrics=["f1"])


@pytest.mark.parametrize(
    ("table", "match"),
    [
        (pd.DataFrame({"model": ["a"], "value": [1.0]}), "missing column.*metric"),
        (pd.DataFrame(columns=["metric", "model", "value"]), "empty"),
        (pd.DataFrame({"metric": ["m", "m"], "model": ["a", "a"], "value": [1.0, math.nan]}), "1 value"),
        (pd.DataFrame({"metric": ["m"], "model": ["a"], "value": ["x"]}), "not numbers"),
        (pd.DataFrame({"metric": ["m", "m"], "model": ["a", "a"], "seed": [1, 1], "value": [1.0, 2.0]}),
         "one run per seed"),
        (pd.DataFrame({"metric": ["m", None], "model": ["a", "a"], "value": [1.0, 2.0]}), "without a metric"),
        ([1, 2, 3], "DataFrame"),
    ],
)
def test_summarize_rejects_bad_tables(table, match):
    with pytest.raises(InputError, match=match) as error:
        summarize(table)
    assert error.value.location == "long"


def test_summarize_rejects_bad_bootstrap_settings():
    table = long_table({"sg": {"tg": A}})
    with pytest.raises(InputError, match="ci must be"):
        summarize(table, ci=95)
    with pytest.raises(InputError, match="n_boot"):
        summarize(table, n_boot=0)


# ---------------------------------------------------------------------------------------------- welch


@pytest.mark.filterwarnings("ignore:Precision loss:RuntimeWarning")  # scipy's, on the zero-variance sample
@pytest.mark.parametrize(("a", "b"), [(A, B), (A, C), (B, C), ([1.0, 1.0, 1.0], [2.0, 2.5, 3.5, 2.0])])
def test_welch_equals_scipy(a, b):
    ours = welch(a, b)
    theirs = stats.ttest_ind(a, b, equal_var=False)
    assert ours.t == pytest.approx(theirs.statistic, rel=1e-12)
    assert ours.df == pytest.approx(theirs.df, rel=1e-12)
    assert ours.p == pytest.approx(theirs.pvalue, rel=1e-10)
    assert (ours.n_a, ours.n_b, ours.note) == (len(a), len(b), "")
    assert ours.sd_a == pytest.approx(np.std(a, ddof=1)) and ours.mean_b == pytest.approx(np.mean(b))


def test_welch_df_is_welch_satterthwaite():
    va, vb = np.var(A, ddof=1) / len(A), np.var(C, ddof=1) / len(C)
    expected = (va + vb) ** 2 / (va**2 / (len(A) - 1) + vb**2 / (len(C) - 1))
    assert welch(A, C).df == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize(
    ("a", "b", "note"),
    [([1.0], B, "fewer than 2 values in a"), (A, [], "fewer than 2 values in b"),
     ([2.0], [3.0], "in a and b"), ([2.0, 2.0], [3.0, 3.0, 3.0], "zero variance")],
)
def test_welch_degenerate_cases_are_nan_with_a_note(a, b, note):
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # not a single RuntimeWarning
        result = welch(a, b)
    assert math.isnan(result.t) and math.isnan(result.df) and math.isnan(result.p)
    assert note in result.note


def test_welch_rejects_non_finite_values():
    with pytest.raises(InputError, match="non-finite") as error:
        welch([1.0, math.inf], B)
    assert error.value.location == "a"


# ---------------------------------------------------------------------------------------------- pairwise


def test_pairwise_welch_rows_and_values():
    table = long_table({
        "ppl": {"tg": A, "txl-trees": B, "txl-terminals": C}, "f1": {"tg": B, "txl-trees": A}
    })
    result = pairwise_welch(table, correction="none")
    assert list(result.columns) == list(statistics.WELCH_COLUMNS)
    # Every pair of models that report the metric (txl-terminals has no f1).
    assert list(zip(result.metric, result.model_a, result.model_b)) == [
        ("ppl", "tg", "txl-trees"), ("ppl", "tg", "txl-terminals"), ("ppl", "txl-trees", "txl-terminals"),
        ("f1", "tg", "txl-trees"),
    ]
    row = result.iloc[1]
    expected = stats.ttest_ind(A, C, equal_var=False)
    assert (row.t, row.df, row.p) == pytest.approx((expected.statistic, expected.df, expected.pvalue))
    assert row["diff"] == pytest.approx(np.mean(A) - np.mean(C))
    assert (row.n_a, row.n_b) == (len(A), len(C))
    np.testing.assert_array_equal(result.p_adjusted, result.p)
    assert set(result.correction) == {"none"}


@pytest.mark.parametrize("correction", ["bonferroni", "holm", "fdr_bh"])
def test_pairwise_welch_corrections_equal_statsmodels_over_the_whole_table(correction):
    table = long_table({
        "ppl": {"tg": A, "txl-trees": B, "txl-terminals": C},
        "sg": {"tg": [0.80, 0.82, 0.85, 0.79], "txl-trees": [0.78, 0.81, 0.80, 0.80], "one-seed": [0.7]},
    })
    result = pairwise_welch(table, correction=correction)
    finite = result.p.notna().to_numpy()
    assert finite.sum() == 4 and (~finite).sum() == 2  # one-seed's two pairs are undefined
    expected = multipletests(result.p[finite], method=correction)[1]
    np.testing.assert_allclose(result.p_adjusted[finite], expected, rtol=1e-12)
    assert result.p_adjusted[~finite].isna().all()
    assert result.note[~finite].str.contains("fewer than 2 values").all()


def test_pairwise_welch_tests_only_models_scored_on_the_same_items():
    """Sentence- and document-level perplexity (other items) are not tested against each other, and stay out of
    the correction's family; the pairs scored on the same items are tested as without the mapping."""
    table = long_table({"ppl": {"tg": A, "txl": B, "tg-doc": C}})
    on = {"ppl": {"tg": "test, sentence level, 100 items", "txl": "test, sentence level, 100 items",
                  "tg-doc": "test, document level, 7 items"}}
    result = pairwise_welch(table, correction="holm", evaluated_on=on)
    assert list(zip(result.model_a, result.model_b)) == [("tg", "txl"), ("tg", "tg-doc"), ("txl", "tg-doc")]
    tested = result.iloc[0]
    expected = stats.ttest_ind(A, B, equal_var=False).pvalue
    assert tested.p == pytest.approx(expected) and tested.p_adjusted == pytest.approx(expected)  # a family of one
    apart = result.iloc[1:]
    assert apart[["diff", "t", "df", "p", "p_adjusted"]].isna().all().all()
    assert apart.mean_b.tolist() == pytest.approx([np.mean(C)] * 2)  # the means stay, for the reader
    assert apart.note.iloc[0] == (f"{statistics.NOT_COMPARED}: tg on test, sentence level, 100 items; "
                                  "tg-doc on test, document level, 7 items")
    # a model the mapping does not describe is compared as before
    unknown = pairwise_welch(table, correction="none", evaluated_on={"ppl": {"tg": "x"}})
    assert unknown.p.notna().all()


def test_pairwise_welch_unknown_correction_names_the_option():
    with pytest.raises(InputError, match="'sidak'.*none, bonferroni, holm, fdr_bh") as error:
        pairwise_welch(long_table({"sg": {"tg": A, "txl": B}}), correction="sidak")
    assert error.value.location == "correction"


def test_pairwise_welch_checks_the_table():
    with pytest.raises(InputError, match="one run per seed"):
        pairwise_welch(long_table({"sg": {"tg": A, "txl": B}, "ppl": {"tg": A}}).assign(seed=0))


def test_pairwise_welch_single_model_gives_an_empty_table():
    result = pairwise_welch(long_table({"sg": {"tg": A}}))
    assert result.empty and list(result.columns) == list(statistics.WELCH_COLUMNS)


# ---------------------------------------------------------------------------------------------- variance


def items_table(task: str, model: str, outcomes: list[list[float]]) -> pd.DataFrame:
    """Item-level rows of one (task, model): ``outcomes[s][i]`` for seed s and item i."""
    return pd.DataFrame([
        {"model": model, "seed": seed, "run_id": f"{model}-{seed}", "task": task, "item": f"i{i}", "value": v}
        for seed, row in enumerate(outcomes)
        for i, v in enumerate(row)
    ])


def test_variance_components_values():
    x = np.array([[1, 1, 0, 1, 0, 1], [1, 0, 0, 1, 1, 1], [0, 1, 0, 1, 0, 0]], dtype=float)
    table = pd.concat([items_table("sg", "tg", x.tolist()), items_table("blimp", "tg", [[1.0, 0.0]] * 2)])
    result = variance_components(table, n_boot=2000)
    assert list(result.columns) == list(statistics.VARIANCE_COLUMNS)
    assert list(zip(result.task, result.model)) == [("sg", "tg"), ("blimp", "tg")]
    row = result.iloc[0]
    assert (row.n_seeds, row.n_items) == (3, 6)
    assert row["mean"] == pytest.approx(x.mean())
    assert row.seed_sd == pytest.approx(np.std(x.mean(axis=1), ddof=1))
    assert row.item_se == pytest.approx(math.sqrt(np.mean(x.var(axis=1, ddof=1)) / 6))
    assert row.ci_low <= row["mean"] <= row.ci_high
    # Two identical seeds: no training spread, only item error.
    assert result.iloc[1].seed_sd == 0.0 and result.iloc[1].item_se == pytest.approx(0.5)


def test_variance_components_resamples_the_same_items_for_all_seeds():
    # Each item is right for exactly one seed: every item's seed-average is 0.5, so resampling items (the
    # same ones for both seeds) cannot move the seed-averaged score, although each seed's score would move.
    table = items_table("sg", "tg", [[1, 0] * 10, [0, 1] * 10])
    row = variance_components(table, n_boot=500).iloc[0]
    assert row.ci_low == row.ci_high == 0.5
    assert row.item_se > 0.1 and row.seed_sd == 0.0


def test_variance_components_chunked_bootstrap_is_the_same(monkeypatch):
    outcomes = np.random.default_rng(0).integers(0, 2, size=(3, 50)).astype(float).tolist()
    table = items_table("blimp", "txl", outcomes)
    whole = variance_components(table, n_boot=300, seed=4)
    monkeypatch.setattr(statistics, "_BOOTSTRAP_CHUNK", 7 * 50)  # 7 bootstrap replicates per chunk
    pd.testing.assert_frame_equal(variance_components(table, n_boot=300, seed=4), whole)


def test_variance_components_rejects_incomplete_or_duplicated_items():
    table = items_table("sg", "tg", [[1.0, 0.0, 1.0], [1.0, 1.0, 0.0]])
    with pytest.raises(InputError, match="1 \\(seed, item\\) outcome\\(s\\) missing.*seed 1, item 'i2'"):
        variance_components(table.iloc[:-1])
    with pytest.raises(InputError, match="share task, model, seed, item"):
        variance_components(pd.concat([table, table.iloc[:1]]))
    with pytest.raises(InputError, match="missing column.*item") as error:
        variance_components(table.drop(columns="item"))
    assert error.value.location == "items"
