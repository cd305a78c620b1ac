"""The report's sections (``analysis.report.sections``): skipped analyses give the pipeline's reason, a section
failing on its values costs only itself, each experiment gets the paper that describes its families, and the
scoring and proposal-set sections appear exactly when settings.json records them."""

from __future__ import annotations

import json

import pandas as pd
from report_folder import analysis_folder, with_families

from analysis import report
from analysis.report import Heading, Paragraph, Table, build_report, read_sources, sections
from analysis.report.render import _md, render_markdown


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
    assert "| perplexity (test) | txl-terminals | 3 | 70.00 (no sd) |" in md  # a text column: no sd, no crash
    assert "| HighFreq | 700 |" in md  # the sections around it are there


def test_pushdown_experiments_show_the_pushdown_papers_tables(tmp_path) -> None:
    folder = analysis_folder(tmp_path)
    with_families(folder, {"pushdown": "pushdown", "base-lm": "base-lm", "tg": "tg"})
    md = report.write_report(folder)[0].read_text()
    assert "beam 300 over attachment decisions" in md and "Paper numbers: Murty et al. (2023)" in md
    table = report.headline_table(folder).splitlines()
    assert [line.split(" | ")[0] for line in table[2:5]] == ["| pushdown", "| base-lm", "| tg"]
    assert table[0].startswith("| model | perplexity (test): ours | perplexity (test): paper (BLLIP-LG full")
    assert "| tg | 72.00 ± 0.50 | 30.3 (Table 2, BLLIP-LG perplexity, test) |" in table[4]


def test_an_experiment_no_paper_describes_has_no_paper_column(tmp_path) -> None:
    folder = analysis_folder(tmp_path)
    with_families(folder, {"lstm": "hf", "gpt": "hf"})  # no paper describes Hugging Face LMs
    md = report.write_report(folder)[0].read_text()
    assert "No registered paper describes these models' families: no published numbers are shown" in md
    assert "NOT comparable" not in md and "Paper numbers:" not in md and "Not in the paper" not in md
    assert "## Results (mean ± sd over seeds)\n" in md
    table = report.headline_table(folder)
    assert table.splitlines()[0] == ("| model | perplexity (test): ours | SG score (%): ours | "
                                     "BLiMP accuracy (%): ours |")
    assert "| gpt | 71.00 ± 0.50 | 61.00 ± 2.00 | 71.00 ± 1.00 |" in table


def test_som_experiments_show_labelled_metrics_after_their_task_with_tables_2_and_5(tmp_path) -> None:
    """A labelled evaluation's metric (``ppl@gum``: the same task on another corpus) follows its task's column
    in the headline table, with the paper's number for it (Shen et al. 2021, Table 5)."""
    folder = analysis_folder(tmp_path)
    with_families(folder, {"esom": "som", "dsom": "som", "dsom-left-branching": "som"})
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
    assert "| tg | perplexity (test) | beam | 71.00 ± 0.50 | -11.2 % |" in md  # (71 - 80) / 80
    assert "| tg | perplexity (test) on proposals | proposals | 90.00 ± 0.50 | +12.5 % |" in md
    assert "| tg | perplexity (test) on gold | gold | 80.00 ± 0.50 | — |" in md
    assert "| txl-terminals | perplexity" not in md  # one method only: nothing to compare


def test_no_scoring_record_no_section(tmp_path) -> None:
    md, _ = (p.read_text() for p in report.write_report(analysis_folder(tmp_path)))
    assert "How each number was scored" not in md


def test_build_report_gives_the_sections_in_reading_order(tmp_path) -> None:
    blocks = build_report(read_sources(analysis_folder(tmp_path)))
    headings = [b.text for b in blocks if isinstance(b, Heading) and b.level <= 2]
    assert headings[0] == "synbench report: tg-demo" and isinstance(blocks[0], Heading) and blocks[0].level == 1
    assert [h.split(" ")[0] for h in headings[1:]] == ["Results", "All", "Welch's", "Seed-level", "Regressions",
                                                       "MDL"]
    assert [name for name, _ in sections.SECTIONS] == [
        "headline", "results", "comparison", "claims", "all metrics", "Welch tests", "variance components",
        "regressions", "MDL probing", "scoring methods", "proposal sets", "other figures"]


def test_a_failing_section_is_one_paragraph(tmp_path, monkeypatch) -> None:
    def broken(sources):
        raise KeyError("column")

    monkeypatch.setattr(sections, "SECTIONS", (("headline", sections.headline), ("broken", broken),
                                               ("all metrics", sections.all_metrics)))
    blocks = build_report(read_sources(analysis_folder(tmp_path)))
    assert Paragraph("broken: could not be rendered: KeyError: 'column'.") in blocks
    assert blocks[-1].__class__ is Table  # the section after it is there


def test_the_headline_table_is_a_table_and_the_paper_s_notes(tmp_path) -> None:
    blocks = sections.headline_table(read_sources(analysis_folder(tmp_path)))
    assert isinstance(blocks[0], Table) and blocks[0].header[0] == "model"
    assert all(isinstance(b, Paragraph) for b in blocks[1:]) and len(blocks) == 3  # provenance, not in paper


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
    headings = [b.text for b in blocks if isinstance(b, Heading)]
    claims_at = headings.index("The papers' claims, checked on these runs")
    assert headings[claims_at + 1].startswith("All metrics")
    table = next(b for b in blocks if isinstance(b, Table) and b.header[0] == "paper")
    assert [row[1] for row in table.rows] == ["tg < txl-terminals", "tg > txl-terminals"]
    sg = table.rows[1]
    assert sg[4:6] == ["82.5 vs 69.5", "71 vs 56"] and sg[-1] == claims.HOLDS
    assert sg[3] == "§3.3, Table 1 (SG); suites: ours hu2020-31, paper's hu2020-31 vs hu2020-31"
    assert table.rows[0][-1] == claims.REVERSED  # 71 vs 70 with sd 0.01: significantly the other way
    md = render_markdown(blocks)
    assert "recursive syntactic composition benefits syntactic generalization" in md
    assert "holm correction over these claims only" in md and "adjusted p &lt; 0.05" in md


def test_no_claim_whose_models_ran_no_section(tmp_path) -> None:
    blocks = build_report(read_sources(analysis_folder(tmp_path)))  # the folder has no claims.csv
    assert not any(isinstance(b, Heading) and "claims" in b.text for b in blocks)
