"""The report (Markdown + HTML from one structure) with the published numbers of the experiment's paper beside
ours (the numbers themselves are tested in tests/experiments/papers)."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from analysis import figures, report
from analysis.statistics import NOT_COMPARED
from experiments.papers import tg
from lightning_modules.errors import InputError

EVIL = "<script>alert(1)</script>"
REDUCED = ["N = 10 proposals (paper: 300)", "3 seeds (paper: 100)", "4 layers, d_model 128 (paper: 16)"]


def write_csv(path: Path, rows: list[dict]) -> None:
    pd.DataFrame(rows).to_csv(path, index=False)


def analysis_folder(root: Path, with_figures: bool = False) -> Path:
    """A small but complete analysis folder: 3 models (one with an HTML label) x 3 seeds, MDL, regressions."""
    folder = root / "exp" / "analysis"
    folder.mkdir(parents=True)
    models = ["txl-terminals", "tg", "txl-trees", EVIL]
    settings = {
        "experiment": "tg-demo", "scale": "demo", "seeds": [0, 1, 2], "data": ["ptb-sample"], "created": "1",
        "models": {m: {"family": "tg", "level": "sentence", "parameters": 1234567} for m in models},
        "reduced": REDUCED, "runs": {"done": 11, "total": 12, "failed": ["tg-s2"], "missing": []},
        "skipped": {"probing txl-trees": "no finished run of txl-trees with seed 0"},
    }
    (folder / "settings.json").write_text(json.dumps(settings))
    summary = [
        {"metric": metric, "model": model, "n": 3, "mean": mean + i * step, "sd": sd, "sem": sd / 3 ** 0.5,
         "ci_low": mean + i * step - sd, "ci_high": mean + i * step + sd, "min": mean, "max": mean + sd}
        for metric, mean, sd, step in (("ppl", 70.0, 0.5, 1.0), ("sg", 0.6, 0.02, 0.01),
                                       ("blimp", 0.7, 0.01, 0.01), ("sg.circuit.Licensing", 0.5, 0.05, 0.01),
                                       ("best_val_loss", 3.0, 0.1, 0.1))
        for i, model in enumerate(models)
    ]
    write_csv(folder / "summary.csv", summary)
    write_csv(folder / "welch.csv", [
        {"metric": "ppl", "model_a": "tg", "model_b": "txl-trees", "n_a": 3, "n_b": 3, "mean_a": 71.0,
         "mean_b": 72.0, "diff": -1.0, "t": -2.449, "df": 4.0, "p": 0.0702, "p_adjusted": 0.2106,
         "correction": "holm", "note": ""},
        {"metric": "sg", "model_a": "tg", "model_b": EVIL, "n_a": 3, "n_b": 1, "mean_a": 0.61, "mean_b": 0.63,
         "diff": -0.02, "t": None, "df": None, "p": None, "p_adjusted": None, "correction": "holm",
         "note": "fewer than 2 values in b: the test is undefined"},
        {"metric": "ppl", "model_a": "tg", "model_b": "txl-terminals", "n_a": 3, "n_b": 3, "mean_a": 71.0,
         "mean_b": 70.0, "diff": None, "t": None, "df": None, "p": None, "p_adjusted": None, "correction": "holm",
         "note": f"{NOT_COMPARED}: tg on test, document level, 7 items; txl-terminals on test, sentence level"},
    ])
    write_csv(folder / "variance.csv", [
        {"task": "sg", "model": "tg", "n_seeds": 3, "n_items": 40, "mean": 0.61, "seed_sd": 0.02,
         "item_se": 0.07, "ci_low": 0.5, "ci_high": 0.72},
    ])
    (folder / "regressions.json").write_text(json.dumps({
        "frequency": {
            "name": "frequency", "formula": "delta ~ HighFreq + MediumFreq + LowFreq - 1",
            "response": "delta", "n": 812, "r2": 0.031, "adj_r2": 0.0297,
            "coefficients": [
                {"name": "HighFreq", "coef": -0.0512, "se": 0.011, "t": -4.65, "p": 3.9e-06, "count": 700},
                {"name": "MediumFreq", "coef": -0.3377, "se": 0.04, "t": -8.44, "p": 1.5e-16, "count": 112},
            ],
            "dropped": [{"name": "LowFreq", "reason": "no terminal in this bucket"}],
            "models": {"A": "tg", "B": "txl-trees"}, "ensemble": {"A": 3, "B": 3}, "data": "ptb-sample valid",
        },
        "copying": {"skipped": "no document-level models"},
    }))
    write_csv(folder / "mdl.csv", [
        {"model": model, "representation": rep, "task": task, "layer": layer, "probe": probe, "n": 300,
         "n_classes": 12, "uniform_bits": 1075.49, "online_bits": 900.0 - 100 * layer,
         "compression": 1075.49 / (900.0 - 100 * layer), "dev_accuracy": 0.4}
        for model, rep in (("tg", "compose"), ("tg", "stack"), ("txl-terminals", "first+last"))
        for task in ("pos", "grandparent") for layer in (0, 1) for probe in ("linear", "mlp")
    ])
    if with_figures:
        long = pd.DataFrame([{"model": row["model"], "seed": seed, "metric": row["metric"],
                              "value": row["mean"] + 0.01 * seed}
                             for row in summary for seed in range(3)])
        figures.write_figures(folder / "figures", long=long, mdl=pd.read_csv(folder / "mdl.csv"),
                              regressions=json.loads((folder / "regressions.json").read_text()))
    return folder


def test_report_has_every_section_with_the_reduced_settings_and_the_paper_numbers(tmp_path) -> None:
    folder = analysis_folder(tmp_path)
    md_path, html_path = report.write_report(folder)
    assert (md_path, html_path) == (folder / "report.md", folder / "report.html")
    md, page = md_path.read_text(), html_path.read_text()
    for text in (md, page):
        # the headline, before any table: scale, seeds, data and every reduced setting, not comparable
        headline = text[: text.index("<table>" if text is page else "| model |")]
        assert "tg-demo" in headline and "seeds: 3 (0, 1, 2)" in headline and "data: ptb-sample" in headline
        assert "NOT comparable" in headline and "runs: 11 done of 12; failed: tg-s2" in headline
        assert "probing txl-trees: no finished run of txl-trees with seed 0" in headline
        for setting in REDUCED:
            assert setting.replace("_", "\\_") in headline if text is md else setting in headline
    for heading in ("Results (mean ± sd over seeds)", "All metrics", "Welch", "Seed-level vs item-level",
                    "Regressions", "MDL probing", "task pos", "task grandparent"):
        assert heading in md and heading in page
    # the paper's numbers beside ours, marked as a different scale
    assert f"perplexity (test): {tg.SCALE}" in md
    assert "61.8 ± 0.2 (Table 1, PTB perplexity, test)" in md  # data ptb-sample: the PTB column only
    assert "30.3 ± 0.5" not in md
    assert "82.5 ± 1.6 (Table 1, SG (BLLIP sent.), test)" in md
    assert "| tg | 71.00 ± 0.50 | 61.8 ± 0.2" in md
    assert "Not in the paper: BLiMP accuracy (%)." in md
    # fractions shown in percent, Welch with adjusted p and the note of an undefined test
    assert "| SG score (%) | tg | 3 | 61.00 ± 2.00 |" in md
    assert "| tg | txl-trees | 3 | 3 | 71.00 | 72.00 | -1.00 | -2.449 | 4 | 0.0702 | 0.2106 |" in md
    assert "fewer than 2 values in b: the test is undefined" in md
    # a pair scored on different items: named in a sentence, not a row of the table
    assert "scored on different items (welch.csv says on what): perplexity (test): tg – txl-terminals." in md
    assert "| tg | txl-terminals |" not in md
    assert "| sg | tg | 3 | 40 | 61 | 2 | 7 | 50 | 72 |" in md
    # regressions: table, dropped bucket, the paper's coefficients and adjusted R²; skipped one said so
    assert "| HighFreq | 700 | -0.0512 | 0.011 | -4.65 | 3.9e-06 | -0.0488 |" in md
    assert "dropped buckets: LowFreq (no terminal in this bucket)" in md
    assert "| LowFreq | — | dropped |  |  |  | -0.5481 |" in md
    assert "adjusted R²: 0.0297 (paper, different scale: 0.039)" in md
    assert "copying: skipped: no document-level models." in md
    # MDL: rows model / representation / probe (paper order), columns layers, kbits and compression
    assert "| model / representation / probe | layer 0 | layer 1 |" in md
    assert "| tg / compose / linear | 0.90 | 0.80 |" in md
    assert "| txl-terminals / first+last / mlp | 1.19 | 1.34 |" in md
    assert md.index("tg / stack / mlp") < md.index("txl-terminals / first+last / linear")
    assert "uniform code length (bits): 1075; N: 300; K: 12." in md
    # no figures were made: each section says so
    assert "Figure metric\\_distributions: not written: no such file." in md
    assert sorted(p.name for p in folder.iterdir() if p.name.startswith(".")) == []  # no temp files


def test_figures_are_linked_relative_to_the_report(tmp_path) -> None:
    folder = analysis_folder(tmp_path, with_figures=True)
    md_path, html_path = report.write_report(folder, out_dir=tmp_path / "exp" / "report")
    md, page = md_path.read_text(), html_path.read_text()
    for stem in (figures.DISTRIBUTIONS, figures.SG_CIRCUITS, figures.MDL_CODE_LENGTH, figures.MDL_COMPRESSION,
                 figures.REGRESSION_COEFFICIENTS):
        assert all((folder / "figures" / f"{stem}.{fmt}").is_file() for fmt in ("png", "pdf"))
        assert f"](../analysis/figures/{stem}.png)" in md and f"[PDF](../analysis/figures/{stem}.pdf)" in md
        assert f'<img src="../analysis/figures/{stem}.png"' in page
        assert f'<a href="../analysis/figures/{stem}.pdf">PDF</a>' in page
    assert "regression\\_coefficients: copying: skipped: no document-level models" in md  # figure notes


def test_every_value_is_escaped(tmp_path) -> None:
    folder = analysis_folder(tmp_path)
    md, page = (p.read_text() for p in report.write_report(folder))
    assert EVIL not in page and EVIL not in md
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in md
    assert page.count("<script") == 0 and "<style>" in page  # inline CSS, nothing else active


def test_missing_and_unreadable_files_are_reported_not_raised(tmp_path) -> None:
    folder = analysis_folder(tmp_path)
    for name in ("summary.csv", "variance.csv", "mdl.csv", "settings.json"):
        (folder / name).unlink()
    (folder / "regressions.json").write_text("{not json")
    (folder / "welch.csv").write_text("metric,model_a\nppl,tg\n")
    md, page = (p.read_text() for p in report.write_report(folder))
    for text in (md, page):
        assert "settings: missing: settings.json not found. The scale, seeds and reduced settings" in text
        assert "results: missing: summary.csv not found." in text
        assert "variance components: missing: variance.csv not found." in text
        assert "MDL probing: missing: mdl.csv not found." in text
        assert "regressions: unreadable: regressions.json:" in text
    assert "Welch tests: malformed: welch.csv lacks the column(s) model\\_b, t, df, p, p\\_adjusted." in md
    assert report.headline_table(folder) == "results: missing: summary.csv not found.\n"
    with pytest.raises(InputError, match="not an analysis folder"):
        report.write_report(tmp_path / "nowhere")


def test_sections_the_pipeline_skipped_give_its_reason(tmp_path) -> None:
    folder = analysis_folder(tmp_path)
    settings = json.loads((folder / "settings.json").read_text())
    settings["skipped"] = {"regressions": "no document-level models", "probing": "no checkpoint to probe",
                           "figures": "sg_circuits: no sg.circuit.* metrics in the table, no figure"}
    (folder / "settings.json").write_text(json.dumps(settings))
    (folder / "regressions.json").unlink()
    (folder / "mdl.csv").unlink()
    (folder / "variance.csv").unlink()
    md, page = (p.read_text() for p in report.write_report(folder))
    assert "regressions: skipped: no document-level models." in md
    assert "Figure sg_circuits: not written: sg_circuits: no sg.circuit.* metrics in the table" in page
    assert "MDL probing: skipped: no checkpoint to probe." in md
    assert "variance components: missing: variance.csv not found." in md  # no reason given: the file


def test_headline_table_is_the_markdown_table_with_the_paper_numbers(tmp_path) -> None:
    table = report.headline_table(analysis_folder(tmp_path))
    lines = table.splitlines()
    assert lines[0].startswith("| model | perplexity (test): ours | perplexity (test): paper (BLLIP/PTB full")
    assert [line.split(" | ")[0] for line in lines[2:6]] == ["| tg", "| txl-trees", "| txl-terminals",
                                                             "| &lt;script&gt;alert(1)&lt;/script&gt;"]
    assert "| txl-terminals | 70.00 ± 0.50 | 62.6 ± 0.2 (Table 1, PTB perplexity, test) |" in table
    assert "Paper numbers: Sartran et al. (2022)" in table


def test_values_of_the_wrong_kind_cost_one_section_not_the_report(tmp_path) -> None:
    folder = analysis_folder(tmp_path)
    mdl = pd.read_csv(folder / "mdl.csv")
    mdl["online_bits"] = "lots"
    mdl.to_csv(folder / "mdl.csv", index=False)
    summary = pd.read_csv(folder / "summary.csv")
    summary["sd"] = summary["sd"].astype(object)
    summary.loc[0, "sd"] = "wide"
    summary.to_csv(folder / "summary.csv", index=False)
    md = report.write_report(folder)[0].read_text()
    assert "MDL probing: could not be rendered: TypeError:" in md
    assert "| perplexity (test) | txl-terminals | 3 | 70.00 (no sd) |" in md  # a text column: no sd, no crash
    assert "| HighFreq | 700 |" in md  # the sections around it are there


def _with_families(folder: Path, families: dict[str, str]) -> None:
    """Make the analysis folder's models those labels, of those families."""
    settings = json.loads((folder / "settings.json").read_text())
    settings["models"] = {label: {"family": family, "level": "sentence"} for label, family in families.items()}
    (folder / "settings.json").write_text(json.dumps(settings))
    summary = pd.read_csv(folder / "summary.csv")
    summary["model"] = summary["model"].map(dict(zip(summary["model"].unique(), families)))  # the rest: NaN
    summary.dropna(subset=["model"]).to_csv(folder / "summary.csv", index=False)


def test_pushdown_experiments_show_the_pushdown_papers_tables(tmp_path) -> None:
    folder = analysis_folder(tmp_path)
    _with_families(folder, {"pushdown": "pushdown", "base-lm": "base-lm", "tg": "tg"})
    md = report.write_report(folder)[0].read_text()
    assert "beam 300 over attachment decisions" in md and "Paper numbers: Murty et al. (2023)" in md
    table = report.headline_table(folder).splitlines()
    assert [line.split(" | ")[0] for line in table[2:5]] == ["| pushdown", "| base-lm", "| tg"]
    assert table[0].startswith("| model | perplexity (test): ours | perplexity (test): paper (BLLIP-LG full")
    assert "| tg | 72.00 ± 0.50 | 30.3 (Table 2, BLLIP-LG perplexity, test) |" in table[4]


def test_an_experiment_no_paper_describes_has_no_paper_column(tmp_path) -> None:
    folder = analysis_folder(tmp_path)
    _with_families(folder, {"lstm": "hf", "gpt": "hf"})  # no paper describes Hugging Face LMs
    md = report.write_report(folder)[0].read_text()
    assert "No registered paper describes these models' families: no published numbers are shown" in md
    assert "NOT comparable" not in md and "Paper numbers:" not in md and "Not in the paper" not in md
    assert "## Results (mean ± sd over seeds)\n" in md
    table = report.headline_table(folder)
    assert table.splitlines()[0] == ("| model | perplexity (test): ours | SG score (%): ours | "
                                     "BLiMP accuracy (%): ours |")
    assert "| gpt | 71.00 ± 0.50 | 61.00 ± 2.00 | 71.00 ± 1.00 |" in table


def test_proposal_sets_give_the_parsers_one_best_and_oracle_f1(tmp_path) -> None:
    folder = analysis_folder(tmp_path)
    settings = json.loads((folder / "settings.json").read_text())
    settings["proposals"] = [
        {"parser_run": "rnng-s0", "set": "ptb-test-n10", "n": 10, "sentences": 40, "trees": 400,
         "one_best_f1": 48.51, "oracle_f1": {"1": 48.51, "10": 57.42}},
        {"parser_run": "rnng-s0", "set": "sg-n10", "n": 10, "sentences": 12, "trees": 120},
        {"parser_run": "rnng-s0", "set": "broken", "problem": "broken.meta.json: not a JSON object"},
    ]
    (folder / "settings.json").write_text(json.dumps(settings))
    md, _ = (p.read_text() for p in report.write_report(folder))
    assert "## Proposal sets" in md
    assert "| parser run | set | N | sentences | 1-best F1 | oracle F1 @1 | oracle F1 @10 | problem |" in md
    assert "| rnng-s0 | ptb-test-n10 | 10 | 40 | 48.51 | 48.51 | 57.42 |  |" in md
    assert "| rnng-s0 | sg-n10 | 10 | 12 | n/a | n/a | n/a |  |" in md
    assert "not a JSON object |" in md


def test_no_proposal_sets_no_section(tmp_path) -> None:
    md, _ = (p.read_text() for p in report.write_report(analysis_folder(tmp_path)))
    assert "Proposal sets" not in md


def test_som_experiments_show_labelled_metrics_after_their_task_with_tables_2_and_5(tmp_path) -> None:
    """A labelled evaluation's metric (``ppl@gum``: the same task on another corpus) follows its task's column
    in the headline table, with the paper's number for it (Shen et al. 2021, Table 5)."""
    folder = analysis_folder(tmp_path)
    _with_families(folder, {"esom": "som", "dsom": "som", "dsom-left-branching": "som"})
    summary = pd.read_csv(folder / "summary.csv")
    gum = summary[summary["metric"] == "ppl"].assign(metric="ppl@gum", mean=400.0)
    pd.concat([gum, summary]).to_csv(folder / "summary.csv", index=False)  # ppl@gum listed first
    md = report.write_report(folder)[0].read_text()
    assert "Paper numbers: Shen et al. (2021)" in md
    table = report.headline_table(folder).splitlines()
    assert table[0].startswith("| model | perplexity (test): ours | perplexity (test): paper (PTB full scale, one "
                               "model) | perplexity (test) on gum: ours | perplexity (test) on gum: paper")
    assert [line.split(" | ")[0] for line in table[2:5]] == ["| esom", "| dsom", "| dsom-left-branching"]
    assert "| 400.00 ± 0.50 | 375.5 (Table 5, GUM perplexity, test) |" in table[4]
    assert "77.7 (Table 2, PTB test perplexity, test); 77.7 (Table 3, PTB perplexity, test)" in table[2]


def test_the_report_says_how_each_number_was_scored_and_how_far_bounds_are_from_the_gold_trees(tmp_path) -> None:
    folder = analysis_folder(tmp_path)
    settings = json.loads((folder / "settings.json").read_text())
    union = "union of the beam's trees (beam 20/5, <= 8 actions per word) and N = 10 proposals from parser"
    settings["scoring"] = {
        "ppl": {"tg": [{"method": "beam", "description": union}],
                "txl-terminals": [{"method": "exact", "description": "exact"}]},
        "ppl@proposals": {"tg": [{"method": "proposals", "description": "N = 10 proposals from parser"}]},
        "ppl@gold": {"tg": [{"method": "gold", "description": "gold trees, log p(x, y_gold)"}]},
        "sg": {"tg": [{"method": "beam", "description": union}]},
    }
    (folder / "settings.json").write_text(json.dumps(settings))
    summary = pd.read_csv(folder / "summary.csv")
    tg_ppl = summary[(summary["metric"] == "ppl") & (summary["model"] == "tg")]  # mean 71.0
    extra = [tg_ppl.assign(metric="ppl@proposals", mean=90.0), tg_ppl.assign(metric="ppl@gold", mean=80.0)]
    pd.concat([summary, *extra]).to_csv(folder / "summary.csv", index=False)
    md = report.write_report(folder)[0].read_text()
    assert "## How each number was scored" in md
    assert f"| ppl | tg | {report._md(union)} |" in md and "| ppl | txl-terminals | exact |" in md
    assert "| tg | perplexity (test) | beam | 71.00 ± 0.50 | -11.2 % |" in md  # (71 - 80) / 80
    assert "| tg | perplexity (test) on proposals | proposals | 90.00 ± 0.50 | +12.5 % |" in md
    assert "| tg | perplexity (test) on gold | gold | 80.00 ± 0.50 | — |" in md
    assert "| txl-terminals | perplexity" not in md  # one method only: nothing to compare


def test_no_scoring_record_no_section(tmp_path) -> None:
    md, _ = (p.read_text() for p in report.write_report(analysis_folder(tmp_path)))
    assert "How each number was scored" not in md
