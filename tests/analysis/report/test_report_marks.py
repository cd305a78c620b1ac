"""The marks beside the headline's numbers (``analysis.report.marks``): an upper bound (†), one far from the same
model's gold-tree value (‡), a model that did not converge (✗); exact numbers and older analysis folders
(without the scoring or convergence records) unmarked."""

from __future__ import annotations

import json

import pandas as pd
from report_folder import EVIL, analysis_folder, edit_settings

from analysis.report import headline_table, marks, read_sources


def _folder(tmp_path):
    """tg: a bound over proposals with a gold-tree value 4 times smaller; txl-trees: a bound without one;
    txl-terminals: exact, and it did not converge."""
    folder = analysis_folder(tmp_path)
    summary = pd.read_csv(folder / "summary.csv")
    tg_ppl = summary[(summary["metric"] == "ppl") & (summary["model"] == "tg")]  # mean 71
    gold = tg_ppl.assign(metric="ppl@gold-tree", mean=17.75, ci_low=17.25, ci_high=18.25)
    pd.concat([summary, gold]).to_csv(folder / "summary.csv", index=False)
    edit_settings(folder, scoring={
        "ppl": {"tg": [{"method": "proposals"}], "txl-trees": [{"method": "beam"}],
                "txl-terminals": [{"method": "exact"}]},
        "ppl@gold-tree": {"tg": [{"method": "gold"}]}},
        not_converged={"txl-terminals": "validation perplexity per token above the vocabulary size (seed 0)"})
    return folder


def test_bounds_loose_bounds_and_models_that_did_not_converge_are_marked(tmp_path) -> None:
    folder = _folder(tmp_path)
    table = headline_table(folder)
    rows = {line.split(" | ")[0][2:]: line for line in table.splitlines()[2:6]}
    assert rows["tg"].startswith("| tg | 71.00 ± 0.50‡ [70.5, 71.5] | 61.8 ± 0.2 | 17.75 ± 0.50† [17.2, 18.2] |")
    assert rows["txl-trees"].startswith("| txl-trees | 72.00 ± 0.50† [")  # no gold-tree value to compare with
    assert rows["txl-terminals ✗"].startswith("| txl-terminals ✗ | 70.00 ± 0.50 [")  # exact: no mark
    assert rows[EVIL.replace("<", "\\<")].startswith("| \\<script>alert(1)\\</script> | 73.00 ± 0.50 [")  # no record
    for mark in (marks.BOUND, marks.FAR_BOUND, marks.NOT_CONVERGED):
        assert f"{mark} {marks.MEANINGS[mark]}" in table


def test_a_bound_within_twice_its_gold_tree_value_is_only_a_bound(tmp_path) -> None:
    folder = _folder(tmp_path)
    sources = read_sources(folder)
    cells = {(str(r.metric), str(r.model)): r for r in sources.tables["summary"].itertuples(index=False)}
    assert marks.perplexity_mark(sources, cells, "ppl", "tg") == marks.FAR_BOUND
    cells[("ppl@gold-tree", "tg")] = cells[("ppl@gold-tree", "tg")]._replace(mean=40.0)  # 71 < 2 x 40
    assert marks.perplexity_mark(sources, cells, "ppl", "tg") == marks.BOUND
    assert marks.perplexity_mark(sources, cells, "sg", "tg") == ""  # only perplexities are bounds
    assert marks.gold_value(sources, cells, "ppl", "txl-trees") is None


def test_an_analysis_without_the_records_has_no_marks_and_no_legend(tmp_path) -> None:
    folder = analysis_folder(tmp_path)
    settings = json.loads((folder / "settings.json").read_text())
    assert "scoring" not in settings and "not_converged" not in settings
    table = headline_table(folder)
    assert not any(mark in table for mark in (marks.BOUND, marks.FAR_BOUND, marks.NOT_CONVERGED))
