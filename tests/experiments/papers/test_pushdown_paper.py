"""Pushdown Layers' published numbers (Tables 2 and 4): as in the paper's text, and mapped to our models."""

from __future__ import annotations

from experiments.papers import pushdown
from tests.conftest import SHARED_DATA

PAPER_TEXT = SHARED_DATA.parent / "papers" / "pushdown-layers.txt"


def test_numbers_match_the_paper_text() -> None:
    lines = PAPER_TEXT.read_text().splitlines()
    blimp, sg, ppl, f1 = ({n.row: n.mean for n in pushdown.table_numbers() if n.column.metric == m}
                          for m in ("blimp", "sg", "ppl", "parse_f1"))
    assert f"Pushdown-LM (ours) {blimp['Pushdown-LM']} {sg['Pushdown-LM']} {ppl['Pushdown-LM']}" in lines
    assert f"Base-LM {blimp['Base-LM']} {sg['Base-LM']} {ppl['Base-LM']}" in lines
    assert f"TG {sg['TG']} {ppl['TG']}" in lines and "TG" not in blimp
    assert any(line.startswith(f"Pushdown-LM {f1['Pushdown-LM']} ") for line in lines) and len(f1) == 1


def test_our_labels_and_metrics_map_to_table_2_and_table_4() -> None:
    def cells(model, metric):
        return [(n.table, n.column.key, n.text()) for n in pushdown.PAPER.numbers_for(model, metric)]

    assert cells("pushdown", "blimp") == [("Table 2", "pd_blimp", "75.6")]
    assert cells("base-lm", "sg") == [("Table 2", "pd_sg", "69.5")]
    assert cells("tg", "sg") == [("Table 2", "pd_sg", "82.5")] and cells("tg", "blimp") == []
    assert cells("pushdown", "parse_f1") == [("Table 4", "pd_parse_f1", "95.3")] and cells("base-lm", "parse_f1") == []
    assert cells("txl-trees", "ppl") == []
    [bound] = pushdown.PAPER.numbers_for("pushdown", "ppl")
    [exact] = pushdown.PAPER.numbers_for("base-lm", "ppl")
    assert bound.upper_bound and not exact.upper_bound and bound.source.endswith("3 seeds, upper bound")
    assert pushdown.PAPER.regressions == ()
