"""benchmarks/tg_beam.py's sentence choice: the first validation sentences of the PTB sample within the length
range (``--min-words`` / ``--max-words``), so ratios can be measured by sentence length."""

from __future__ import annotations

import sys

import pytest

from benchmarks.tg_beam import gold_trees, main
from lightning_modules.data.corpora import load_corpus
from lightning_modules.data.tree import clean


def test_sentences_are_the_first_within_the_length_range(prepared_data_dir, monkeypatch) -> None:
    monkeypatch.setenv("SYNBENCH_DATA", str(prepared_data_dir))
    valid = [clean(t) for doc in load_corpus("ptb-sample").splits["valid"] for _, t in doc.sentences]
    long = gold_trees(3, 40, min_words=21)
    assert long == [t for t in valid if 21 <= len(t.leaves()) <= 40][:3]
    assert all(21 <= len(t.leaves()) <= 40 for t in long) and len(long) == 3
    assert all(5 <= len(t.leaves()) <= 20 for t in gold_trees(4, 20))


def test_an_empty_length_range_is_a_usage_error(prepared_data_dir, monkeypatch, capsys) -> None:
    monkeypatch.setenv("SYNBENCH_DATA", str(prepared_data_dir))
    monkeypatch.setattr(sys, "argv", ["tg_beam.py", "--min-words", "30", "--max-words", "20"])
    with pytest.raises(SystemExit) as exit_:
        main()
    assert exit_.value.code == 2
    assert "error: no validation sentence has 30 to 20 words" in capsys.readouterr().err
