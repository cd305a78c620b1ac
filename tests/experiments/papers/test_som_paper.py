"""Syntactic Ordered Memory's published numbers (Shen et al. 2021) mapped to our models and metrics: Table 2
(and 3) in domain, Table 5 out of domain through labelled evaluations, Table 8 for constituency-trained models
and the Γ-trained stand-ins, with the oracle binary ceiling."""

from __future__ import annotations

from experiments import papers
from experiments.papers import som


def _one(model: str, metric: str) -> tuple[str, str, float]:
    numbers = som.numbers_for(model, metric)
    assert len({(n.table, n.mean) for n in numbers}) == 1, (model, metric, numbers)
    return numbers[0].table, numbers[0].row, numbers[0].mean


def test_table2_and_3_rows_in_domain():
    assert {(n.table, n.mean) for n in som.numbers_for("esom", "ppl")} == {("Table 2", 77.68), ("Table 3", 77.68)}
    assert _one("dsom", "decision_accuracy.p") == ("Table 2", "dSOM", 0.922)
    assert _one("dsom", "decision_accuracy.p_prime") == ("Table 2", "dSOM", 0.864)
    assert _one("esom", "parse_f1") == ("Table 2", "eSOM", 87.96)
    assert _one("dsom-teacher-forcing", "ppl")[2] == 129.27
    assert _one("dsom-no-prediction-network", "parse_f1")[2] == 87.09
    assert som.numbers_for("dsom-no-prediction-network", "decision_accuracy.p_prime") == []  # "–" in the paper
    assert _one("dsom-left-branching", "ppl")[2] == 82.01 and som.numbers_for("dsom-left-branching", "parse_f1") == []
    assert som.numbers_for("esom-no-lm-loss", "ppl") == [] and _one("esom-no-lm-loss", "parse_f1")[2] == 86.26
    number = som.numbers_for("esom", "decision_accuracy.p")[0]
    assert number.text() == "0.927" and number.sd is None and number.seeds == 1 and not number.upper_bound
    assert som.numbers_for("gpt2", "ppl") == []


def test_table5_out_of_domain_through_labelled_metrics():
    assert _one("esom", "ppl@gum") == ("Table 5", "eSOM", 351.5)
    assert _one("dsom", "parse_f1@pud") == ("Table 5", "dSOM", 75.1)
    assert _one("dsom-left-branching", "ppl@pronouns") == ("Table 5", "LB", 620.4)
    assert som.numbers_for("dsom-left-branching", "parse_f1@ewt") == []  # LB has perplexities only
    assert som.numbers_for("dsom-teacher-forcing", "ppl@gum") == []  # not in Table 5
    assert {n.column.metric for n in som.table_numbers() if n.table == "Table 5"} == {
        f"{m}@{s}" for m in ("ppl", "parse_f1") for s in ("gum", "ewt", "partut", "lines", "pronouns", "pud")}


def test_table8_constituency_models_and_the_gamma_trained_stand_ins():
    assert _one("esom-ptb-trees", "parse_f1") == ("Table 8", "eSOM", 67.27)
    assert _one("dsom-ptb-trees", "parse_f1_oracle") == ("Table 8", "dSOM", 82.5)
    assert som.numbers_for("dsom-ptb-trees", "ppl") == []
    assert _one("dsom", "parse_f1@ptb-trees") == ("Table 8", "dSOM", 66.83)
    assert _one("esom", "parse_f1_oracle@ptb-trees") == ("Table 8", "eSOM", 82.5)


def test_registered_with_its_reproductions_and_model_order():
    paper = papers.get("som")
    assert paper.reproductions == {"demo": "reproduce-som-demo", "cpu-small": "reproduce-som-cpu-small",
                                   "paper": "reproduce-som-paper"}
    assert papers.paper_for(["som"]) is paper
    assert papers.model_order(["dsom-left-branching", "dsom", "esom", "zz"]) == [
        "esom", "dsom", "dsom-left-branching", "zz"]
