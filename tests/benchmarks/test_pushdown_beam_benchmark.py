"""benchmarks/pushdown_beam.py at toy sizes: sentences searched together, the same search one at a time and the
recomputing reference give the same totals and attachments (checked inside the benchmark), and the table is
printed with both ratios."""

from __future__ import annotations

from benchmarks import pushdown_beam as bench


def test_benchmark_runs_with_equal_results(capsys) -> None:
    times = bench.main(["--lengths", "6", "--beams", "4", "--sentences", "3"])
    assert set(times) == {(6, 4)} and set(times[6, 4]) == {"together", "alone", "recompute"}
    assert all(t > 0 for t in times[6, 4].values())
    out = capsys.readouterr().out
    assert "vs recompute" in out and "vs alone" in out
