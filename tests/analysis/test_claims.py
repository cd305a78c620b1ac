"""The papers' claimed directions checked on Welch tests over seeds (``analysis.claims``)."""

from __future__ import annotations

from fnmatch import fnmatchcase

import numpy as np
import pandas as pd
import pytest
from statsmodels.stats.multitest import multipletests

from analysis import claims, statistics
from experiments.evaluate import sg, tasks
from experiments.papers import PaperClaim, papers
from experiments.papers.tables import SG_SUITE_SETS

# Each paper's sections that state claims -> the metrics (ours) of the tables they discuss; read from the papers:
# TG §3.1 perplexity, §3.2 parse reranking, §3.3 SG, §4.1.1 the transformed trees (Table 2); DTG §4.1
# perplexity, §4.2 BLiMP and SG, §5.1 the arc representations (Table 4); SOM §4.1 language modelling (Tables 2,
# 5), §4.2 SG and Table 5's caption, §4.3 parsing (Table 2's UF1), §5 is the conclusion; PaLM §3 (every table);
# Pushdown Layers §4.1 Dyck (Table 1), §4.2 BLLIP-LG (Table 2)
SECTIONS = {
    "tg": {"§3.1": ("ppl",), "§3.2": ("f1",), "§3.3": ("sg",), "§4.1.1": ("ppl", "sg", "f1")},
    "dtg": {"§4.1": ("ppl",), "§4.2": ("blimp", "sg.all_34"), "§5.1": ("ppl", "blimp")},
    "som": {"§4.1": ("ppl",), "§4.2": ("ppl", "sg"), "§4.3": ("parse_f1",)},
    "palm": {"§3": ("ppl", "unsupervised_f1", "splits.*")},
    "pushdown": {"§4.1": ("dyck.*",), "§4.2": ("sg", "blimp", "ppl")},
}


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


def _claims() -> list[tuple[str, PaperClaim]]:
    return [(paper.key, claim) for paper in papers() for claim in paper.claims]


def test_against_metrics_are_summarized_and_claims_are_unique() -> None:
    rows = [(key, claim.text(), metric) for key, claim in _claims() for metric in claim.metrics]
    assert len(rows) == len(set(rows))
    assert all(tasks.is_summarized(claim.against) for _, claim in _claims() if claim.against)


def test_each_claim_names_the_section_that_states_it() -> None:
    """SOM's ablations are §4.1 (§5 is its conclusion), DTG's perplexities §4.1 (§4.2 is its SG and BLiMP)."""
    for key, claim in _claims():
        section = claim.where.split(",")[0]
        assert section in SECTIONS[key], (key, claim)
        for metric in claim.metrics:
            assert any(fnmatchcase(tasks.unlabelled(metric), m) for m in SECTIONS[key][section]), (key, claim)
    som = {claim.where.split(",")[0] for key, claim in _claims() if key == "som"}
    assert "§5" not in som and "§4.1" in som


def test_sg_claims_compare_one_suite_set() -> None:
    """An SG claim is checked on one suite set, the paper's own model's: DTG's on all 34 suites (``sg.all_34``),
    also against TG's and Pushdown's published numbers over Hu et al.'s 31, which the claim names."""
    assert set(SG_SUITE_SETS.values()) == set(sg.SUITE_SETS)
    sg_claims = [(key, c) for key, c in _claims() if any(m in SG_SUITE_SETS for m in c.metrics)]
    assert sg_claims
    for key, claim in sg_claims:
        assert {SG_SUITE_SETS[m] for m in claim.metrics} == {claim.suite_set}, claim
        assert claim.suite_set in claim.suites and claim.suites[0] == claim.suite_set, claim
        assert claim.suite_set == ("all-34" if key == "dtg" else "hu2020-31"), claim
    mixed = {c.text(): c.suites for key, c in sg_claims if len(set(c.suites)) > 1}
    assert mixed == {"dtg > tg": ("all-34", "hu2020-31"), "dtg > pushdown": ("all-34", "hu2020-31")}
    with pytest.raises(ValueError, match="one suite set"):
        PaperClaim("a", "b", ("sg", "sg.all_34"), False, "§1", (2.0, 1.0), "x", suites=("hu2020-31", "all-34"))
    with pytest.raises(ValueError, match="one suite set"):
        PaperClaim("a", "b", ("sg",), False, "§1", (2.0, 1.0), "x")  # no suite sets named
    with pytest.raises(ValueError, match="section"):
        PaperClaim("a", "b", ("ppl",), True, "Table 5", (1.0, 2.0), "x")


def _seeds(mean: float, spread: float) -> list[float]:
    return [mean - spread, mean, mean + spread]


def _row(table: pd.DataFrame, claim: PaperClaim, metric: str) -> pd.Series:
    found = table[(table["claim"] == claim.text()) & (table["metric"] == metric)]
    assert len(found) == 1, (claim, metric, table)
    return found.iloc[0]


def _batches(case: str) -> list[tuple[dict, list]]:
    """The registered claims packed into few synthetic aggregates (one ``check_claims`` each): a claim joins the
    first whose runs give its two series the values it needs (the paper's numbers, swapped when ``reversed``),
    with a spread of 1 % of their difference over three seeds; ``not tested``: each claim alone, without its
    second series."""
    batches: list[tuple[dict, list]] = []
    for key, claim in _claims():
        better, worse = claim.published[::-1] if case == "reversed" else claim.published
        for metric in claim.metrics:
            spread = abs(better - worse) * 0.01
            wanted = {(claim.better, metric): _seeds(better, spread)}
            if case != "not tested":
                wanted[(claim.worse, claim.against or metric)] = _seeds(worse, spread)
            fits = (b for b in batches if all(b[0].get(k, v) == v for k, v in wanted.items()))
            batch = None if case == "not tested" else next(fits, None)  # untested: each claim alone
            if batch is None:
                batch = ({}, [])
                batches.append(batch)
            batch[0].update(wanted)
            batch[1].append((key, claim, metric, better))
    return batches


@pytest.mark.parametrize("case", ["holds", "reversed", "not tested"])
def test_every_claim_on_a_synthetic_aggregate(case: str) -> None:
    """Every claim on runs ordered as the paper's numbers (holds), the other way (reversed), or without its
    second model (not tested, saying what is missing, when the experiment is its paper's)."""
    for values, members in _batches(case):
        long = _long(values)
        table = claims.check_claims(statistics.pairwise_welch(long), long, paper=members[0][0])
        for key, claim, metric, better in members:
            if case == "not tested":
                twins = table[(table["metric"] == metric) & (table["where"] == claim.where)
                              & (table["statement"] == claim.statement)
                              & (table["published_better"] == claim.published[0])
                              & (table["published_worse"] == claim.published[1])]
                assert len(twins) == 1, (claim, twins)  # a claim stated under two labels is reported once
                verdict = twins.iloc[0]["verdict"]
                assert verdict.startswith("not tested: this experiment has no ") and \
                    f"{claim.against or metric} results of " in verdict and np.isnan(twins.iloc[0]["p"]), claim
                continue
            row = _row(table, claim, metric)
            assert row["paper"] == key and row["mean_better"] == pytest.approx(better)
            assert row["verdict"] == (claims.HOLDS if case == "holds" else claims.REVERSED), (claim, row)
            assert _suite(row["suite_set"]) == (claim.suite_set or "")


def _suite(value: object) -> str:
    """A suite_set cell as text (empty for a claim that is not SG's)."""
    return "" if pd.isna(value) else str(value)


def test_a_claim_of_no_improvement_holds_without_a_significant_difference() -> None:
    """PaLM-RB "yields no improvement over" AWD-LSTM: a small difference either way holds; a significant
    improvement refutes it."""
    claim = next(c for _, c in _claims() if not c.strict)
    assert claim.text() == "awd-lstm-finetuned <= palm-rb"
    for rb in ([57.0, 58.0, 57.2], [57.6, 58.5, 57.1], [60.0, 60.1, 60.2]):  # better, worse, clearly worse
        long = _long({("awd-lstm-finetuned", "ppl"): [57.5, 57.1, 57.9], ("palm-rb", "ppl"): rb})
        table = claims.check_claims(statistics.pairwise_welch(long), long)
        assert _row(table, claim, "ppl")["verdict"] == claims.HOLDS


def test_claims_against_another_metric_of_the_runs() -> None:
    """PaLM-U's F1 against the right-branching trees' F1 of the same sentences (one value for every seed)."""
    long = _long({("palm-u", "unsupervised_f1"): [41.0, 42.0, 43.5],
                  ("palm-u", "unsupervised_f1_right_branching"): [30.0, 30.0, 30.0],
                  ("palm-u", "splits.right"): [60.0, 61.0, 59.0], ("palm-u", "gold_splits.right"): [52.7] * 3})
    table = claims.check_claims(statistics.pairwise_welch(long), long, paper="palm")
    f1 = table[table["metric"] == "unsupervised_f1"].iloc[0]
    assert f1["claim"] == "palm-u > palm-u's unsupervised_f1_right_branching" and f1["verdict"] == claims.HOLDS
    assert f1["mean_worse"] == 30.0 and (f1["published_better"], f1["published_worse"]) == (42.0, 40.7)
    right = table[(table["metric"] == "splits.right") & table["claim"].str.contains("gold")].iloc[0]
    assert right["verdict"] == claims.HOLDS
    left = table[table["metric"] == "splits.left"].iloc[0]  # no splits of palm-u at all here
    assert left["verdict"] == "not tested: this experiment has no splits.left results of palm-u and no " \
                              "gold_splits.left results of palm-u"
    # without long, a claim against another metric cannot be tested, and other papers' claims are left out
    assert claims.check_claims(statistics.pairwise_welch(long)).empty


def test_the_own_papers_claims_all_get_a_row_and_twins_one() -> None:
    """The DTG reproduction names TXL (tokens) ``txl-tokens``: the claims stated for its comparison label
    ``txl-terminals`` are not reported again as untested; a claim whose model the spec lacks says which."""
    long = _long({("dtg", "ppl"): [14.0, 14.5, 15.0], ("txl-trans", "ppl"): [14.1, 14.3, 14.5],
                  ("txl-tokens", "ppl"): [15.0, 15.4, 15.8]})
    table = claims.check_claims(statistics.pairwise_welch(long), long, paper="dtg")
    assert set(table["paper"]) == {"dtg"}
    ppl = table[table["metric"] == "ppl"].set_index("claim")["verdict"]
    assert "txl-trans < txl-tokens" in ppl.index and "txl-trans < txl-terminals" not in ppl.index
    assert ppl["dtg < dtg-eager"] == "not tested: this experiment has no ppl results of dtg-eager"
    assert ppl["dtg < dtg-w"] == "not tested: this experiment has no ppl results of dtg-w"
    assert len(table) == len({(r.where, r.statement, r.metric, r.published_better, r.published_worse)
                              for r in table.itertuples()})
    assert table["p_adjusted"].notna().sum() == 1 and table.loc[table["p"].notna(), "claim"].tolist() == \
        ["txl-trans < txl-tokens"]
