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
    assert {n.column.metric for n in som.table_numbers() if n.table == "Table 5"} == {"sg"} | {
        f"{m}@{s}" for m in ("ppl", "ppl_end_counted", "parse_f1")
        for s in ("gum", "ewt", "partut", "lines", "pronouns", "pud")}


def test_table2_gold_tree_row_table5_sg_and_both_perplexity_conventions():
    # "– Predicted tree + Gold tree": our dsom evaluated with the gold decisions (label gold-tree)
    assert _one("dsom", "ppl@gold-tree") == ("Table 2", som.GOLD_TREE_ROW, 60.87)
    assert _one("dsom", "decision_accuracy.p_prime@gold-tree")[2] == 0.884
    assert som.numbers_for("esom", "ppl@gold-tree") == [] and som.numbers_for("dsom", "parse_f1@gold-tree") == []
    # Table 5's SG column, in percent as the report shows our sg fraction
    assert _one("esom", "sg") == ("Table 5", "eSOM", 61.4) and _one("dsom-left-branching", "sg")[2] == 51.3
    assert som.numbers_for("dsom-teacher-forcing", "sg") == []
    # the paper's perplexities sit beside both of ours: <eos> summed, and summed and counted (Kim et al. 2019)
    for metric in ("ppl", "ppl@gum", "ppl@gold-tree"):
        counted = metric.replace("ppl", "ppl_end_counted", 1)
        assert [n.mean for n in som.numbers_for("dsom", counted)] == [n.mean for n in som.numbers_for("dsom", metric)]
    assert "Kim et al. (2019)" in som.PAPER.provenance


def test_specs_plan_the_gold_tree_perplexity_and_sg(tmp_path):
    from experiments.evaluation_plan import Planner
    from experiments.experiment_runs import experiment_runs
    from experiments.experiment_spec import load_spec

    for scale in ("demo", "cpu-small", "paper"):
        spec = load_spec(f"reproduce-som-{scale}")
        runs = experiment_runs(spec)
        model = {r.run_id: r.model for r in runs}
        argv = [t.argv for t in Planner(spec, runs, tmp_path, python="py").eval_tasks()]
        gold = [a for a in argv if a[a.index("--out") + 1].endswith("ppl@gold-tree")]
        assert {model[a[5].split("/")[-3]] for a in gold} == {"dsom"} and len(gold) == len(spec.seeds)
        assert all(a[a.index("--method") + 1] == "gold" for a in gold)
        # and its p / p' accuracies: the parsers' predictions under the gold decisions
        parse = [a for a in argv if a[a.index("--out") + 1].endswith("parse@gold-tree")]
        assert len(parse) == len(spec.seeds) and all(a[a.index("--method") + 1] == "gold" for a in parse)
        sg = {model[a[5].split("/")[-3]] for a in argv if a[4] == "sg"}
        assert sg == (set() if scale == "demo" else {"esom", "dsom", "dsom-left-branching"})
        # Table 6's models train on Universal Dependencies (the paper's scheme)
        assert {r.config["data"]["corpus"] for r in runs if "ptb-trees" not in r.model} == {
            "paper": {"ptb-ud"}}.get(scale, {"ptb-sample-ud"})


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
