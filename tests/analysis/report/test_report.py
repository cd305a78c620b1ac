"""The report's entry points: ``write_report`` (report.md and report.html, every section, figures linked
relative to the output folder) and ``headline_table`` (the Markdown table ``synbench reproduce`` prints), with
the published numbers of the experiment's paper beside ours (the numbers themselves are tested in
tests/experiments/papers)."""

from __future__ import annotations

from report_folder import REDUCED, analysis_folder

from analysis import figures, report
from experiments.papers import tg


def test_report_opens_with_the_headline_table_and_has_every_section_below(tmp_path) -> None:
    folder = analysis_folder(tmp_path)
    md_path, html_path = report.write_report(folder)
    assert (md_path, html_path) == (folder / "report.md", folder / "report.html")
    md, page = md_path.read_text(), html_path.read_text()
    for text in (md, page):
        # before the headline table: the experiment, not comparable, and the context in one line
        top = text[: text.index("<table" if text is page else "| model |")]
        assert "tg-demo" in top and "NOT comparable" in top
        assert "seeds: 3 (0, 1, 2); data: ptb-sample; runs: 11 done of 12; failed: tg-s2; 3 reduced settings" in top
        # below: the setup with every reduced setting and the skipped analyses
        setup = text[text.index("Setup: scale, seeds"):]
        assert "probing txl-trees: no finished run of txl-trees with seed 0" in setup
        assert all(setting in setup for setting in REDUCED)
    assert md.index("## Setup") > md.index("## Results") and "<details>\n<summary><h2>Setup: scale" in page
    assert page.index("<details>") > page.index('<table class="compact">')  # nothing folded above the headline
    for heading in ("Results (mean ± sd over seeds", "All metrics", "Welch", "Seed-level vs item-level",
                    "Regressions", "MDL probing", "task pos", "task grandparent"):
        assert heading in md and heading in page
    # the headline: ours with the CI, the paper's number beside; its sources in their own section
    assert "| tg | 71.00 ± 0.50 [70.5, 71.5] | 61.8 ± 0.2 | 61.00 ± 2.00 [59, 63] | 82.5 ± 1.6 |" in md
    assert "<td>71.00 ± 0.50<br>[70.5, 71.5]</td>" in page  # the CI under the mean in the HTML
    assert f"perplexity (test): {tg.SCALE}" in md
    assert "61.8 ± 0.2 (Table 1, PTB perplexity, test)" in md  # data ptb-sample: the PTB column only
    assert "30.3 ± 0.5" not in md
    assert "82.5 ± 1.6 (Table 1, SG (BLLIP sent.), test)" in md
    assert "| tg | 71.00 ± 0.50 | 61.8 ± 0.2 (Table 1, PTB perplexity, test)" in md
    assert "Not in the paper: BLiMP accuracy (%)." in md
    # every metric and every Welch test in the HTML; the Markdown says where they are
    assert "<tr><td>SG score (%)</td><td>tg</td><td>3</td><td>61.00 ± 2.00</td><td>[59, 63]</td></tr>" in page
    assert "20 rows (5 metrics x 4 models" in md and "analysis/summary.csv" in md
    assert ("<tr><td>perplexity (test)</td><td>tg</td><td>txl-trees</td><td>3</td><td>3</td><td>71.00</td>"
            "<td>72.00</td><td>-1.00</td><td>-2.449</td><td>4</td><td>0.0702</td><td>0.2106</td>") in page
    assert "fewer than 2 values in b: the test is undefined" in page
    assert "2 tests, none with an adjusted p below 0.05 (1 pair scored on different items is not tested)" in md
    # a pair scored on different items: named in a sentence, not a row of the table
    assert "scored on different items (welch.csv says on what): perplexity (test): tg – txl-terminals." in page
    assert "<td>tg</td><td>txl-terminals</td>" not in page
    assert "<tr><td>sg</td><td>tg</td><td>3</td><td>40</td><td>61</td><td>2</td><td>7</td><td>50</td>" in page
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
    # no figures were made: said where they would be; no key figure, so no such heading
    assert "Figure sg_circuits: not written: no such file." in md and "## Key figures" not in md
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
    assert "regression_coefficients: copying: skipped: no document-level models" in md  # figure notes
    assert md.index("## Key figures") < md.index("## Setup")  # the distributions at the top, the rest below


def test_headline_table_is_the_markdown_table_with_the_paper_numbers(tmp_path) -> None:
    table = report.headline_table(analysis_folder(tmp_path))
    lines = table.splitlines()
    assert lines[0] == (f"| model | perplexity (test) | {tg.SCALE} | SG score (%) | {tg.SCALE} | "
                        "BLiMP accuracy (%) |")
    assert [line.split(" | ")[0] for line in lines[2:6]] == ["| tg", "| txl-trees", "| txl-terminals",
                                                             "| \\<script>alert(1)\\</script>"]
    assert "| txl-terminals | 70.00 ± 0.50 [69.5, 70.5] | 62.6 ± 0.2 | 60.00 ± 2.00 [58, 62] | 69.5 ± 2.1 |" in table
    assert "the numbers Sartran et al. (2022)" in table and "100 seeds" in table
