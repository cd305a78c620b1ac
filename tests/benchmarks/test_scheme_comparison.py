"""benchmarks/scheme_comparison.py: the reduced specs read each scheme's corpus and plan through the normal
harness, and the table is the mean ± sd over seeds with Welch's test between the schemes."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
import yaml
from scipy.stats import ttest_ind

from benchmarks import scheme_comparison as bench
from experiments.evaluation_plan import Planner
from experiments.experiment_runs import experiment_runs
from experiments.experiment_spec import load_spec


@pytest.mark.parametrize(("paper", "scheme"), [("dtg", "sd"), ("dtg", "collins"), ("som", "ud"), ("som", "collins")])
def test_reduced_specs_train_on_the_scheme_and_plan(tmp_path: Path, paper: str, scheme: str) -> None:
    args = bench.arguments(["--seeds", "2", "--sg-items", "1", "--ood-sets", "gum", "pud"])
    path = tmp_path / f"{paper}-{scheme}.yaml"
    path.write_text(yaml.safe_dump(bench.reduced_spec(paper, scheme, args), sort_keys=False))
    spec = load_spec(str(path))
    runs = experiment_runs(spec)
    assert {r.config["data"]["corpus"] for r in runs} == {bench.CORPUS[scheme]}
    assert sorted({r.model for r in runs}) == sorted(bench.MODELS[paper])
    steps = {r.model: r.config["train"]["max_steps"] for r in runs}
    tasks = Planner(spec, runs, tmp_path, python="py").eval_tasks()
    out = sorted({t.argv[t.argv.index("--out") + 1].rsplit("/", 1)[1] for t in tasks})
    if paper == "dtg":
        assert len(runs) == 2 * 2 + 1 and steps == {"dtg": 80, "txl-trans": 80, "dep-parser": 80}
        assert out == ["ppl", "sg", "uas-rerank"]
        assert all(t.argv[t.argv.index("-n") + 1] == "5" for t in tasks if "-n" in t.argv)
    else:
        assert len(runs) == 2 * 2 and set(steps.values()) == {30}
        assert out == ["parse", "parse@gum", "parse@pud", "ppl"]  # no gold-decision rows, no OOD perplexity


def test_table_is_mean_sd_and_welch_between_schemes(tmp_path: Path) -> None:
    values = {("som", "ud"): [30.0, 32.0], ("som", "collins"): [20.0, 21.0]}
    for (paper, scheme), f1 in values.items():
        folder = tmp_path / f"schemes-{paper}-{scheme}" / "aggregate"
        folder.mkdir(parents=True)
        rows = [{"model": "dsom", "seed": seed, "metric": metric, "value": value}
                for seed, v in enumerate(f1)
                for metric, value in (("parse_f1", v), ("parse_f1@gum", v - 10), ("parse_f1@ewt", v - 20))]
        pd.DataFrame(rows).to_csv(folder / "metrics_long.csv", index=False)
    text = bench.table(tmp_path, ["gum", "ewt"])
    welch = ttest_ind([30.0, 32.0], [20.0, 21.0], equal_var=False).pvalue
    assert f"| dsom (UD / Collins) | test UF1 vs Γ | 31.00 ± 1.41 (n=2) | 20.50 ± 0.71 (n=2) | {welch:.3f} |" in text
    assert "| dsom (UD / Collins) | OOD UF1 (gum, ewt) | 16.00 ± 1.41 (n=2) | 5.50 ± 0.71 (n=2) |" in text
    assert "esom" not in text and "dtg" not in text  # nothing measured, no row


def test_the_table_names_the_reductions_of_the_runs_not_its_own_defaults(tmp_path: Path) -> None:
    ran = bench.arguments(["--out", str(tmp_path), "--seeds", "3", "--dtg-steps", "300", "--ood-sets", "gum"])
    written = bench.reductions(ran)
    assert "seeds 3; DTG/TXL 300 steps" in written and "sentences of gum" in written
    table_only = bench.arguments(["--out", str(tmp_path), "--table"])  # its own flags: the defaults
    assert bench.reductions(table_only) == written
    elsewhere = bench.arguments(["--out", str(tmp_path / "other"), "--table"])
    assert bench.reductions(elsewhere).startswith("reductions vs cpu-small: unknown")
