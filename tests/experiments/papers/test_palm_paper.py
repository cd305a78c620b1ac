"""PaLM's published numbers (Tables 1, 3 and 4): as in the paper's text, and mapped to our models and metrics."""

from __future__ import annotations

from experiments.papers import palm
from tests.conftest import SHARED_DATA

PAPER_TEXT = SHARED_DATA.parent / "papers" / "palm-hybrid-parser-lm.txt"


def test_numbers_match_the_paper_text() -> None:
    lines = PAPER_TEXT.read_text().splitlines()
    for row, (dev, test) in palm.TABLE1.items():
        assert f"{row} 24M {dev} {test}" in lines
    assert f"Right Branching {palm.TABLE3['Right Branching']}" in lines and f"PaLM-U {palm.TABLE3['PaLM-U']}" in lines
    (left, left_sd), (right, right_sd) = palm.TABLE4["Random"][0]
    assert any(line.startswith(f"Random {left} ±{left_sd}") and f"{right} ±{right_sd}" in line for line in lines)
    assert "PaLM-U 1.1 85.6" in lines and "Gold 6.5 52.7" in lines
    assert "averaging over 25 differently randomly initialized PaLM models" in PAPER_TEXT.read_text()


def cells(model: str, metric: str) -> list[tuple[str, str, str]]:
    return [(n.table, n.row, n.text()) for n in palm.PAPER.numbers_for(model, metric)]


def test_our_labels_and_metrics_map_to_tables_1_3_and_4() -> None:
    # like with like: our awd-lstm is not finetuned, PaLM's AWD-LSTM row is (Merity et al. give both)
    assert cells("awd-lstm", "ppl_stream") == [("Merity et al. 2018 Table 1", "AWD-LSTM (no finetuning)", "58.8")]
    assert cells("awd-lstm", "val_ppl") == [("Merity et al. 2018 Table 1", "AWD-LSTM (no finetuning)", "60.7")]
    assert cells("awd-lstm-finetuned", "ppl_stream") == [("Table 1", "AWD-LSTM", "57.3")]
    assert cells("palm-s", "val_ppl") == [("Table 1", "PaLM-S", "57.9")]
    assert cells("palm-rb", "ppl_stream") == [("Table 1", "PaLM-RB", "57.5")]
    assert cells("palm-u", "ppl") == []  # the shared sentence-level protocol: not the paper's convention
    assert cells("palm-u", "unsupervised_f1") == [("Table 3", "PaLM-U", "42.0")]
    assert cells("palm-s", "unsupervised_f1") == []
    assert cells("palm-s", "unsupervised_f1_right_branching") == [("Table 3", "Right Branching", "40.7")]
    assert cells("palm-u-init", "splits.left") == [("Table 4", "Random", "39.3 ± 10.5"), ("Table 4", "Gold", "6.5")]
    assert cells("palm-u-init", "splits.right") == [("Table 4", "Random", "41.2 ± 8.8"), ("Table 4", "Gold", "52.7")]
    assert cells("palm-u", "splits.right") == [("Table 4", "PaLM-U", "85.6"), ("Table 4", "Gold", "52.7")]
    assert cells("palm-s", "splits.left") == [("Table 4", "Gold", "6.5")]
    assert cells("palm-rb", "gold_splits.left") == [("Table 4", "Gold", "6.5")]
    assert cells("awd-lstm", "gold_splits.left") == [] and cells("tg", "ppl_stream") == []
    [random, _] = palm.PAPER.numbers_for("palm-u-init", "splits.left")
    assert random.seeds == 25 and random.source == "Table 4, WSJ-40 test, test, 24M params, 25 seeds"


def test_wikitext2_numbers_are_table_2s_palm_rows() -> None:
    lines = PAPER_TEXT.read_text().splitlines()
    for row, (dev, test) in palm.TABLE2.items():
        assert f"{row} 36M {dev} {test}" in lines
    found = [(n.table, n.row, n.text()) for n in palm.PAPER.numbers_for("palm-u", "ppl_stream", "wikitext-2")]
    assert found == [("Table 2", "PaLM-U", "65.4")]
    assert palm.PAPER.numbers_for("awd-lstm", "ppl_stream", "wikitext-2") == []  # Table 2's is finetuned
