"""benchmarks/marginalize.py at a tiny size on the CPU, with ``--bf16``: the trie path under bf16 autocast timed
against float32 in the same run, and the largest per-sentence gap printed."""

from __future__ import annotations

import re
import sys

from benchmarks.marginalize import main


def test_bf16_row_runs_against_the_float32_trie(prepared_data_dir, monkeypatch, capsys) -> None:
    monkeypatch.setenv("SYNBENCH_DATA", str(prepared_data_dir))
    monkeypatch.setattr(sys, "argv", ["marginalize.py", "--sentences", "2", "--proposals", "4", "--max-words", "8",
                                      "--repeats", "1", "--skip-one", "--skip-beam", "--bf16"])
    main()
    out = capsys.readouterr().out
    line = next(line for line in out.splitlines() if line.startswith("proposals trie bfloat16:"))
    gap = float(re.search(r"per sentence ([0-9.e+-]+) nats", line).group(1))
    assert 0 < gap < 1.0  # bf16 ran (rounding moved the scores) and stayed near float32
    assert re.search(r"bf16 / fp32 speed [0-9.]+x", line)
