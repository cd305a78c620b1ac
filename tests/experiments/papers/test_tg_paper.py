"""Transformer Grammars' published numbers: as in the paper's text, and mapped to our labels and metrics."""

from __future__ import annotations

import re

from experiments.papers import metric_title, percent_scale, published_regression, tg
from tests.conftest import SHARED_DATA

PAPER_TEXT = SHARED_DATA.parent / "papers" / "transformer-grammars.txt"


def test_numbers_match_the_paper_text() -> None:
    lines = PAPER_TEXT.read_text().splitlines()
    heads = [i for i, line in enumerate(lines) if "Perplexity" in line and "BLLIP doc." in line]
    cell = re.compile(r"n/a|(\d+\.\d+)\s*(?:\}\s*)?\\pm\s*(?:\\textbf\{\s*)?(\d+\.\d+)")
    assert len(heads) == 2
    for head, table in zip(heads, (tg.TABLE1_TEST, tg.TABLE2_VALIDATION), strict=True):
        for k, (row, cells) in enumerate(table.items()):
            line = lines[head + 1 + k]
            assert all(word in line.lower() for word in re.findall(r"[a-z]+", row.lower())), (row, line)
            parsed = tuple(None if m.group(0) == "n/a" else (float(m.group(1)), float(m.group(2)))
                           for m in cell.finditer(line))
            assert parsed == cells, row
    text = PAPER_TEXT.read_text()
    for regression in tg.REGRESSIONS:
        assert f"adjusted  $R^2$  value of {regression.adj_r2:.3f}" in text
        for name, coef in regression.coefficients.items():
            assert re.search(re.escape(name) + r"\W*=\s*" + re.escape(f"{coef:.4f}"), text), name


def test_our_labels_and_metrics_map_to_the_right_numbers() -> None:
    def cells(model, metric, data=None):
        return [(n.table, n.column.key, n.split, n.text()) for n in tg.PAPER.numbers_for(model, metric, data)]

    assert cells("tg", "ppl") == [("Table 1", "ptb_ppl", "test", "61.8 ± 0.2"),
                                  ("Table 1", "bllip_sent_ppl", "test", "30.3 ± 0.5")]
    assert cells("tg", "ppl", "ptb-sample") == [("Table 1", "ptb_ppl", "test", "61.8 ± 0.2")]
    assert cells("txl-trees", "ppl", "bllip-lg") == [("Table 1", "bllip_sent_ppl", "test", "29.8 ± 0.4")]
    assert cells("txl-trees-doc", "ppl") == [("Table 1", "bllip_doc_ppl", "test", "22.1 ± 0.1")]
    assert cells("tg", "val_ppl", "ptb") == [("Table 2", "ptb_ppl", "validation", "76.1 ± 0.3")]
    assert cells("tg-reversed", "f1") == []  # Table 2 has F1 but our f1 is the test split: Table 1 only
    assert cells("txl-terminals", "sg") == [("Table 1", "sg", "test", "69.5 ± 2.1")]
    for model, metric in (("txl-terminals", "f1"), ("tg", "blimp"), ("tg-doc", "sg"), ("gpt", "ppl")):
        assert cells(model, metric) == []
    [bound] = tg.PAPER.numbers_for("tg", "ppl", "ptb")
    assert bound.upper_bound and bound.source == "Table 1, PTB, test, 12M params, 100 seeds, upper bound"
    [exact] = tg.PAPER.numbers_for("txl-terminals", "ppl", "bllip")
    assert not exact.upper_bound and exact.source == "Table 1, BLLIP-LG, test, 252M params, 100 seeds"


def test_regressions_and_metric_display() -> None:
    assert tg.PAPER.regression("frequency").coefficient("medium_freq") == -0.2419
    assert published_regression("copying") is tg.PAPER.regression("copying") and published_regression("x") is None
    assert percent_scale("sg.circuit.Agreement") == 100.0 and percent_scale("f1") == 1.0
    assert metric_title("parse_f1") == "unlabeled F1 (%)"
    assert metric_title("blimp.phenomenon.x") == "blimp.phenomenon.x (%)"
