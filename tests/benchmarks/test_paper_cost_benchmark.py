"""benchmarks/paper_cost.py --eval at toy settings: every evaluation of the protocol is timed on a sample of its
own sentences and extrapolated to its whole size (PTB test, all SyntaxGym suites, all of BLiMP, counted from
the prepared data), and the table is printed."""

from __future__ import annotations

import pytest

from benchmarks import paper_cost as bench


def test_eval_cost_times_every_evaluation_and_extrapolates(prepared_data_dir, capsys) -> None:
    rows = bench.main(["--eval", "--preset", "cpu-small", "--sample", "1", "--proposals", "4", "--beam", "3", "2",
                       "2", "--data-dir", str(prepared_data_dir), "--threads", "1"])
    assert [r.name for r in rows] == ["ppl N=4", "ppl beam", "sg", "blimp"]
    assert (rows[0].sentences, rows[0].words) == bench.PTB_TEST
    sg, blimp = rows[2], rows[3]
    assert sg.sentences == len(bench.sg_sentences(str(prepared_data_dir))) > 3000  # 34 suites' conditions
    assert blimp.sentences == 2 * 67 * 1000
    for r in rows:
        assert 0 < r.sample_words < r.words and r.seconds > 0
        assert r.minutes == pytest.approx(r.seconds / r.sample_words * r.words / 60)
    out = capsys.readouterr().out
    assert "full protocol (ppl N=4, sg, blimp)" in out and "beam 3/2, <= 2 actions" in out
