"""The report's sections (``analysis.report.sections``): the first screen, then the folded sections; skipped
analyses give the pipeline's reason, a section failing on its values costs only itself, each experiment gets
the paper that describes its families, and the scoring and proposal-set sections appear exactly when
settings.json records them."""

from __future__ import annotations

import json

import pandas as pd
from report_folder import analysis_folder, with_families

from analysis import report
from analysis.report import Folded, Heading, Paragraph, Table, build_report, read_sources, sections
from analysis.report.headline_section import headline_table
from analysis.report.render import _md, render_html, render_markdown


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
    assert "| txl-terminals | 70.00 (no sd) [69.5, 70.5] |" in md  # a text column: no sd, no crash
    assert "| HighFreq | 700 |" in md  # the sections around it are there


def test_pushdown_experiments_show_the_pushdown_papers_tables(tmp_path) -> None:
    folder = analysis_folder(tmp_path)
    with_families(folder, {"pushdown": "pushdown", "base-lm": "base-lm", "tg": "tg"})
    md = report.write_report(folder)[0].read_text()
    assert "beam 300 over attachment decisions" in md and "Paper numbers: Murty et al. (2023)" in md
    table = report.headline_table(folder).splitlines()
    assert [line.split(" | ")[0] for line in table[2:5]] == ["| pushdown", "| base-lm", "| tg"]
    assert table[0].startswith("| model | perplexity (test) | paper (BLLIP-LG full")
    assert "| tg | 72.00 ± 0.50 [71.5, 72.5] | 30.3 |" in table[4]
    assert "| tg | 72.00 ± 0.50 | 30.3 (Table 2, BLLIP-LG perplexity, test) |" in md  # the sources, below


def test_an_experiment_no_paper_describes_has_no_paper_column(tmp_path) -> None:
    folder = analysis_folder(tmp_path)
    with_families(folder, {"lstm": "hf", "gpt": "hf"})  # no paper describes Hugging Face LMs
    md = report.write_report(folder)[0].read_text()
    assert "No registered paper describes these models' families: no published numbers are shown" in md
    assert "NOT comparable" not in md and "Paper numbers:" not in md and "Not in the paper" not in md
    assert "## Results (mean ± sd over seeds, [95% CI])\n" in md and "The paper's published numbers" not in md
    table = report.headline_table(folder)
    assert table.splitlines()[0] == "| model | perplexity (test) | SG score (%) | BLiMP accuracy (%) |"
    assert "| gpt | 71.00 ± 0.50 [70.5, 71.5] | 61.00 ± 2.00 [59, 63] | 71.00 ± 1.00 [70, 72] |" in table


def test_som_experiments_show_labelled_metrics_after_their_task_with_tables_2_and_5(tmp_path) -> None:
    """A labelled evaluation's metric (``ppl@gum``: the same task on another corpus) follows its task's column
    in the headline table, with the paper's number for it (Shen et al. 2021, Table 5)."""
    folder = analysis_folder(tmp_path)
    with_families(folder, {"esom": "som", "dsom": "som", "dsom-left-branching": "som"})
    summary = pd.read_csv(folder / "summary.csv")
    gum = summary[summary["metric"] == "ppl"].assign(metric="ppl@gum", mean=400.0, ci_low=399.5, ci_high=400.5)
    pd.concat([gum, summary]).to_csv(folder / "summary.csv", index=False)  # ppl@gum listed first
    md = report.write_report(folder)[0].read_text()
    assert "Paper numbers: Shen et al. (2021)" in md
    table = report.headline_table(folder).splitlines()
    assert table[0].startswith("| model | perplexity (test) | paper (PTB full scale, one model) | "
                               "perplexity (test) on gum | paper (PTB full scale, one model) |")
    assert [line.split(" | ")[0] for line in table[2:5]] == ["| esom", "| dsom", "| dsom-left-branching"]
    assert "| 400.00 ± 0.50 [399.5, 400.5] | 375.5 |" in table[4]
    assert "| esom | 70.00 ± 0.50 [69.5, 70.5] | 77.7 |" in table[2]  # two tables' same number: once
    # below, each number with its source
    assert "| 400.00 ± 0.50 | 375.5 (Table 5, GUM perplexity, test) |" in md
    assert "77.7 (Table 2, PTB test perplexity, test); 77.7 (Table 3, PTB perplexity, test)" in md


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
    assert f"| ppl | tg | {_md(union)} |" in md and "| ppl | txl-terminals | exact |" in md
    assert "<= 8 actions per word" in md  # as written: no HTML entity
    assert "| tg | perplexity (test) | beam | 71.00 ± 0.50 | -11.2 % |" in md  # (71 - 80) / 80
    assert "| tg | perplexity (test) on proposals | proposals | 90.00 ± 0.50 | +12.5 % |" in md
    assert "| tg | perplexity (test) on gold | gold | 80.00 ± 0.50 | — |" in md
    assert "| txl-terminals | perplexity" not in md  # one method only: nothing to compare


def test_no_scoring_record_no_section(tmp_path) -> None:
    md, _ = (p.read_text() for p in report.write_report(analysis_folder(tmp_path)))
    assert "How each number was scored" not in md


def test_build_report_gives_the_first_screen_then_the_folded_sections(tmp_path) -> None:
    blocks = build_report(read_sources(analysis_folder(tmp_path)))
    top = blocks[:next(i for i, b in enumerate(blocks) if isinstance(b, Folded))]
    assert isinstance(top[0], Heading) and top[0].level == 1 and top[0].text == "synbench report: tg-demo"
    assert [b.text for b in top if isinstance(b, Heading)][1:] == ["Results (mean ± sd over seeds, [95% CI])"]
    assert isinstance(top[-1], Paragraph) and isinstance(top[-2], Table) and top[-2].compact  # table, legend
    folded = [b.title.split(" ")[0] for b in blocks if isinstance(b, Folded)]
    assert folded == ["Setup:", "The", "All", "Welch's", "Seed-level", "Regressions", "MDL", "More"]
    assert all(isinstance(b, Folded) for b in blocks[len(top):])
    assert [name for name, _ in sections.TOP] == ["headline", "results", "claims", "key figures"]
    assert [name for name, _, _ in sections.FOLDED] == [
        "setup", "paper's numbers", "comparison", "claims checked", "all metrics", "Welch tests",
        "variance components", "regressions", "MDL probing", "learning curves", "scoring methods", "proposal sets",
        "figures"]


def test_a_failing_section_is_one_paragraph(tmp_path, monkeypatch) -> None:
    def broken(sources):
        raise KeyError("column")

    monkeypatch.setattr(sections, "TOP", (("headline", broken),))
    monkeypatch.setattr(sections, "FOLDED", (("broken", broken, None), ("all metrics", sections.all_metrics, None)))
    blocks = build_report(read_sources(analysis_folder(tmp_path)))
    assert blocks[0] == Paragraph("headline: could not be rendered: KeyError: 'column'.")
    assert blocks[1] == Folded("broken", [Paragraph("broken: could not be rendered: KeyError: 'column'.")])
    assert isinstance(blocks[2], Folded) and isinstance(blocks[2].blocks[-1], Table)  # the section after it


def test_the_headline_table_is_a_compact_table_and_its_legend(tmp_path) -> None:
    blocks = headline_table(read_sources(analysis_folder(tmp_path)))
    assert isinstance(blocks[0], Table) and blocks[0].header[0] == "model" and blocks[0].compact
    assert [type(b) for b in blocks[1:]] == [Paragraph]
    assert blocks[0].rows[0][1] == "71.00 ± 0.50\n[70.5, 71.5]"  # the CI on its own line (HTML) or beside


def test_the_papers_claims_are_checked_on_the_runs_that_have_their_models(tmp_path) -> None:
    """claims.csv (``analysis.claims``) becomes a section after the comparison: the claim, the paper's numbers,
    ours in the report's units (SG in percent), the p-values and the verdict, then each claim's statement."""
    from analysis import claims, statistics

    folder = analysis_folder(tmp_path)
    long = pd.DataFrame([{"run_id": f"{model}-{seed}", "model": model, "family": "tg", "seed": seed,
                          "metric": metric, "value": value + 0.01 * seed}
                         for model, metric, value in (("tg", "sg", 0.70), ("txl-terminals", "sg", 0.55),
                                                      ("tg", "ppl", 71.0), ("txl-terminals", "ppl", 70.0))
                         for seed in range(3)])
    claims.check_claims(statistics.pairwise_welch(long)).to_csv(folder / claims.CLAIMS_FILE, index=False)
    blocks = build_report(read_sources(folder))
    # the verdicts on the first screen, after the headline table
    headings = [b.text for b in blocks if isinstance(b, Heading)]
    assert headings[1:3] == ["Results (mean ± sd over seeds, [95% CI])", "The papers' claims: verdicts on these runs"]
    verdicts = next(b for b in blocks if isinstance(b, Table) and b.header[0] == "paper")
    assert verdicts.header == ["paper", "claim", "metric", "paper's", "ours", "p adjusted", "verdict"]
    assert [row[1] for row in verdicts.rows] == ["tg < txl-terminals", "tg > txl-terminals"]
    assert verdicts.rows[1][3:5] == ["82.5 vs 69.5", "71 vs 56"] and verdicts.rows[1][-1] == claims.HOLDS
    assert "2 claims whose models ran here: 1 reversed; 1 holds (" in render_markdown(blocks)
    # how each was checked, folded after the comparison
    folded = [b for b in blocks if isinstance(b, Folded)]
    checked = next(b for b in folded if b.title == "The papers' claims, checked on these runs")
    assert folded[folded.index(checked) + 1].title.startswith("All metrics")
    table = next(b for b in checked.blocks if isinstance(b, Table))
    sg = table.rows[1]
    assert sg[4:6] == ["82.5 vs 69.5", "71 vs 56"] and sg[-1] == claims.HOLDS
    assert sg[3] == "§3.3, Table 1 (SG); suites: ours hu2020-31, paper's hu2020-31 vs hu2020-31"
    assert table.rows[0][-1] == claims.REVERSED  # 71 vs 70 with sd 0.01: significantly the other way
    md = render_markdown(blocks)
    assert "recursive syntactic composition benefits syntactic generalization" not in md  # report.html has it
    assert "recursive syntactic composition benefits syntactic generalization" in render_html(blocks, "r")
    assert "holm correction over these claims only" in md and "adjusted p < 0.05" in md


def test_no_claim_whose_models_ran_no_section(tmp_path) -> None:
    blocks = build_report(read_sources(analysis_folder(tmp_path)))  # the folder has no claims.csv
    assert not any(isinstance(b, Heading) and "claims" in b.text for b in blocks)


def test_reduced_settings_are_one_table_of_settings_with_the_models_that_share_them() -> None:
    from analysis.report.setup_section import reduced_settings

    lines = ["2 seeds per model (full protocol: 3)",
             "tg: data.corpus ptb-sample (full protocol: ptb), train.max_steps 20 (full protocol: 100000)",
             "txl-trees: data.corpus ptb-sample (full protocol: ptb), train.max_steps 40 (full protocol: 100000)",
             "lstm: data.corpus ptb-sample (full protocol: ptb), model.d_hidden 32 (full protocol: 1150)",
             "evaluation ppl (tg, txl-trees): limit 10 (full protocol: all), n 4 (full protocol: 300)",
             "evaluation sg: items_per_suite 1 (full protocol: all)",
             "evaluation blimp (tg): paradigms ['a_1', 'b'] (full protocol: all)",
             "model esom-no-lm-loss: not trained", "probing: not run"]
    blocks = reduced_settings(lines, ["tg", "txl-trees", "lstm"])
    assert blocks[0].items == ["2 seeds per model (full protocol: 3)", "model esom-no-lm-loss: not trained",
                               "probing: not run"]
    assert blocks[2].rows == [
        ["data.corpus", "ptb-sample", "ptb", "every model"],
        ["train.max_steps", "20", "100000", "tg"], ["train.max_steps", "40", "100000", "txl-trees"],
        ["model.d_hidden", "32", "1150", "lstm"],
        ["eval ppl: limit", "10", "all", "every model but lstm"], ["eval ppl: n", "4", "300", "every model but lstm"],
        ["eval sg: items_per_suite", "1", "all", "every model"],
        ["eval blimp: paradigms", "['a_1', 'b']", "all", "tg"]]
    assert render_markdown(blocks).count("\n| ") == 9  # the header and eight rows
