"""benchmarks/packed_runs.py at a tiny size on CPU: solo runs and K runs packed in one task, each run trained to
DONE, rates printed against solo; the MPS variant is refused off CUDA with one line."""

from __future__ import annotations

import pytest

from benchmarks import packed_runs as bench


def test_packed_runs_are_measured_against_solo_runs(capsys) -> None:
    rate = bench.main(["--device", "cpu", "--tiny", "--runs-per-gpu", "1", "2", "--steps", "2", "--rounds", "1",
                       "--cpus", "2"])
    assert set(rate) == {("solo", 1), ("packed", 2)} and all(r > 0 for r in rate.values())
    out = capsys.readouterr().out
    assert "round 0: solo   K=1:" in out and "round 0: packed K=2:" in out
    assert f"packed           K=2: {rate[('packed', 2)]:8.1f} runs/hour -> " in out and "x solo" in out


def test_mps_is_refused_off_cuda(capsys) -> None:
    with pytest.raises(SystemExit) as stop:
        bench.main(["--device", "cpu", "--tiny", "--mps"])
    err = capsys.readouterr().err
    assert stop.value.code == 2 and err.count("\n") == 1
    assert err.startswith("synbench: error: --mps: MPS shares an NVIDIA GPU between processes; it needs --device cuda")
