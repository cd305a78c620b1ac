"""benchmarks/cag.py at a tiny size on the CPU, against the official osekilab/CAG code of the golden archive run
on its patched transformers 4.11.3 (fetched from PyPI by the benchmark, checked against pinned SHA-256s): the
first training step's losses and every sentence's beam log p(x) are equal (checked inside the benchmark), and
both tables are printed; a source that holds no official code is one located error."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from benchmarks import cag as bench

ROOT = Path(__file__).resolve().parents[2]


def _run(*argv: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    return subprocess.run([sys.executable, str(ROOT / "benchmarks" / "cag.py"), *argv], env=env, cwd=cwd,
                          capture_output=True, text=True, timeout=900)


def test_benchmark_runs_against_the_official_code(prepared_data_dir, tmp_path) -> None:
    checkout = tmp_path / "checkout"  # the cache inside a git checkout, named relative to it, as gpu_session.sh
    subprocess.run(["git", "init", "-q", str(checkout)], check=True)  # names .cache/ in ours
    site = checkout / ".cache" / "transformers-4.11.3"
    done = _run("--transformers", str(site.relative_to(checkout)), "--size", "16", "--layers", "1", "--heads", "2",
                "--batch", "4", "--steps", "2", "--sentences", "2", "--max-words", "8", "--beam", "4",
                "--word-beam", "2", "--shift-size", "1", "--beam-batch", "2", "--data-dir", str(prepared_data_dir),
                cwd=checkout)
    assert done.returncode == 0, done.stderr[-2000:]
    out = done.stdout
    assert f"the official osekilab/CAG code ({bench.ARCHIVE}, d870345; transformers 4.11.3 with its patch)" in out
    assert "first-step loss" in out and "log p(x) equal on every sentence" in out and out.count("x\n") == 2
    result = json.loads(out.strip().splitlines()[-1])
    assert set(result) == {"step_official_ms", "step_synbench_ms", "beam_official", "beam_synbench"}
    assert all(v > 0 for v in result.values())
    gpt2 = (site / "transformers" / "models" / "gpt2" / "modeling_gpt2.py").read_text()
    assert "# self.wte = nn.Embedding(" in gpt2  # the official patch applied
    assert [p.name for p in site.parent.iterdir()] == [site.name]  # built atomically: nothing else left beside it


def test_a_folder_without_the_official_code_is_refused(tmp_path) -> None:
    done = _run("--official", str(tmp_path))
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
    assert done.stderr.startswith(f"synbench: error: {tmp_path}: not an osekilab/CAG checkout")
