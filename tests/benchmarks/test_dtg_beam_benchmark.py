"""benchmarks/dtg_beam.py on a tiny random DTG: the cached beam and the re-encoding reference give equal totals
(checked inside the benchmark) and the speed table is printed."""

from __future__ import annotations

import pytest

from benchmarks import dtg_beam as bench
from experiments.families.dtg.reference_beam import ReencodingDTGBeamScorer


@pytest.mark.parametrize("system", ["standard", "swift"])
def test_benchmark_runs_with_equal_totals(system: str, prepared_data_dir, capsys) -> None:
    rate = bench.main(["--system", system, "--tiny", "--vocab-split", "dev", "--sentences", "2", "--batch", "1",
                       "--beam", "4", "--word-beam", "2", "--max-actions", "3", "--max-words", "7",
                       "--data-dir", str(prepared_data_dir)])
    assert set(rate) == {"cached", "reference"} and all(v > 0 for v in rate.values())
    out = capsys.readouterr().out
    assert "speed-up" in out and "2 UD EWT dev sentences" in out


def test_reference_refuses_txl_trans(prepared_data_dir) -> None:
    model = bench.random_dtg("standard", data_dir=str(prepared_data_dir), split="dev",
                             overrides={"d_model": 16, "n_layers": 1, "n_heads": 2, "d_ff": 32})
    model.family = "txl-trans"
    with pytest.raises(ValueError, match="txl-trans"):
        ReencodingDTGBeamScorer(model, 4, 2, 3)
