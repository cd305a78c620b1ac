"""The report's entry points: ``write_report`` (report.md and report.html, every section, figures linked
relative to the output folder) and ``headline_table`` (the Markdown table ``synbench reproduce`` prints), with
the published numbers of the experiment's paper beside ours (the numbers themselves are tested in
tests/experiments/papers)."""

from __future__ import annotations

from report_folder import REDUCED, analysis_folder

from analysis import figures, report
from experiments.papers import tg


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


def test_headline_table_is_the_markdown_table_with_the_paper_numbers(tmp_path) -> None:
    table = report.headline_table(analysis_folder(tmp_path))
    lines = table.splitlines()
    assert lines[0].startswith("| model | perplexity (test): ours | perplexity (test): paper (BLLIP/PTB full")
    assert [line.split(" | ")[0] for line in lines[2:6]] == ["| tg", "| txl-trees", "| txl-terminals",
                                                             "| &lt;script&gt;alert(1)&lt;/script&gt;"]
    assert "| txl-terminals | 70.00 ± 0.50 | 62.6 ± 0.2 (Table 1, PTB perplexity, test) |" in table
    assert "Paper numbers: Sartran et al. (2022)" in table
