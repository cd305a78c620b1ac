"""benchmarks/dtg_beam.py on a tiny random DTG: the cached beam and the port of the official loop give equal
totals, and so do sentences searched together and one at a time (checked inside the benchmark); both speed
tables are printed; the port is arc-standard's."""

from __future__ import annotations

import pytest

from benchmarks import dtg_beam as bench
from experiments.families.dtg.reference_beam import OfficialBeamPort


def test_benchmark_runs_with_equal_totals(prepared_data_dir, capsys) -> None:
    rate = bench.main(["--tiny", "--vocab-split", "dev", "--sentences", "2", "--batch", "2", "--beam", "4",
                       "--word-beam", "2", "--max-actions", "9", "--max-words", "7",
                       "--data-dir", str(prepared_data_dir)])
    assert set(rate) == {"cached", "reference", "together", "alone"} and all(v > 0 for v in rate.values())
    out = capsys.readouterr().out
    assert out.count("speed-up") == 2 and "2 UD EWT dev sentences" in out
    assert "2 together" in out and "one at a time" in out


def test_port_refuses_other_systems(prepared_data_dir) -> None:
    model = bench.random_dtg("eager", data_dir=str(prepared_data_dir), split="dev",
                             overrides={"d_model": 16, "n_layers": 1, "n_heads": 2, "d_ff": 32})
    with pytest.raises(ValueError, match="arc-standard"):
        OfficialBeamPort(model, 4, 2, 3, 0)
