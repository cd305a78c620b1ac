"""benchmarks/seed_group.py --phases at a tiny size on CPU: the full-logits loss against the chunked one on the
same batches (rates, the logits avoided per seed), and the optimizer phase per parameter against the flat
buffers (operators counted by torch.profiler)."""

from __future__ import annotations

import re
import sys

from benchmarks import seed_group as bench

TINY = ["model.d_model=16", "model.n_layers=1", "model.n_heads=2", "model.d_ff=32"]


def test_phases_compare_the_loss_and_the_optimizer_with_their_references(capsys, monkeypatch):
    monkeypatch.setattr(sys, "argv", ["seed_group.py", "--phases", "--sizes", "2", "--steps", "1", "--repeats", "1",
                                      "--batch-size", "2", "--threads", "1", "--override", *TINY])
    bench.main()
    out = capsys.readouterr().out
    assert re.search(r"^\s+2\s+full\s+[\d.]+\s+n/a \(CPU\)\s+[\d.]+$", out, re.M), out
    assert re.search(r"^\s+2\s+chunked\s+[\d.]+\s+n/a \(CPU\)\s+[\d.]+$", out, re.M), out
    saved = re.search(r"loss S=2: chunked [\d.]+x full's seed-steps/s, logits ([\d.]+) -> ([\d.]+) MiB/seed", out)
    assert saved and float(saved.group(2)) < float(saved.group(1))  # only labelled rows, one chunk at a time
    ops = re.search(r"optimizer\+clip S=2 \((\d+) parameters, 1 flat buffers, fused True\): per-parameter (\d+) "
                    r"top-level aten operators, [\d.]+ ms; flat (\d+) top-level aten operators", out)
    assert ops, out
    parameters, before, after = map(int, ops.groups())
    assert after < parameters < before  # a few operators, not one or more per parameter
