"""benchmarks/rnng.py at a tiny size on the CPU, against the official rnng-pytorch code of the golden archive:
the first training step's losses and every sentence's beam log p(x) are equal (checked inside the benchmark),
and both tables are printed; a source that holds no official code is one located error."""

from __future__ import annotations

import pytest
import torch

from benchmarks import rnng as bench
from lightning_modules.errors import InputError


def test_benchmark_runs_against_the_official_code(prepared_data_dir, capsys) -> None:
    threads = torch.get_num_threads()
    result = bench.main(["--size", "16", "--layers", "1", "--batch", "4", "--steps", "2", "--sentences", "2",
                         "--max-words", "8", "--beam", "4", "--word-beam", "2", "--beam-batch", "2",
                         "--data-dir", str(prepared_data_dir)])
    torch.set_num_threads(threads)
    assert set(result) == {"step_official_ms", "step_synbench_ms", "beam_official", "beam_synbench"}
    assert all(v > 0 for v in result.values())
    out = capsys.readouterr().out
    assert f"the official rnng-pytorch code ({bench.ARCHIVE}, f30c0ed)" in out
    assert "first-step loss" in out and "log p(x) equal on every sentence" in out and out.count("x\n") == 2


def test_a_folder_without_the_official_code_is_refused(tmp_path) -> None:
    with pytest.raises(InputError) as e:
        bench.main(["--official", str(tmp_path)])
    assert e.value.location == str(tmp_path)
