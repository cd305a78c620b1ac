"""benchmarks/seed_group.py --kernels at a tiny size on CPU: per S, the folded attention's kernels per training step
and attention time are printed against the math path it replaced, measured in the same run."""

from __future__ import annotations

import math

from benchmarks import seed_group as bench

TINY = ["model.d_model=32", "model.n_layers=1", "model.n_heads=2", "model.d_ff=64"]


def test_kernels_per_step_and_attention_time_are_measured_against_the_math_path(capsys) -> None:
    results = bench.main(["--kernels", "--sizes", "1", "2", "--batch-size", "2", "--repeats", "1", "--length", "16",
                          "--threads", "1", "--override", *TINY])
    assert set(results) == {1, 2}
    for row in results.values():
        assert set(row) == {"math", "folded"}
        for measured in row.values():
            assert measured["kernels"] > 0 and measured["step_ms"] > 0 and measured["attn_ms"] > 0
            assert math.isnan(measured["attn_mib"])  # peak memory is a CUDA measurement
    out = capsys.readouterr().out
    assert "x 2 heads x 16 queries and keys x 16, a bias needing a gradient, dropout 0.1" in out
    for size in (1, 2):
        ratio = results[size]["folded"]["kernels"] / results[size]["math"]["kernels"]
        assert f"{size:>4} {'ratio':>7} {ratio:>12.2f}x " in out and out.count(f"{size:>4}  folded ") == 1
    # the Transformer-XL position bias needs a gradient: on the CPU SDPA runs its math kernel on either path
    assert "_scaled_dot_product_attention_math x" in out


def test_groups_are_timed_against_solo_loops_with_no_host_sync_inside_a_group_step(capsys) -> None:
    """The main measurement (each mode in a fresh process): seed-steps/s and memory of a group against solo loops,
    the group's steps run under ``no_host_sync`` (a sync inside would fail the child and the run)."""
    bench.main(["--sizes", "5", "--steps", "1", "--batch-size", "2", "--repeats", "1", "--threads", "1",
                "--sync-check", "--override", *TINY])
    out = capsys.readouterr().out
    assert "group steps under no_host_sync" in out
    line = next(row for row in out.splitlines() if row.startswith(f"{5:>4} "))  # on a CPU: slices of 4 and 1
    solo, group, ratio = (float(v.rstrip("x")) for v in line.split()[1:4])
    assert solo > 0 and group > 0 and abs(ratio - group / solo) < 0.01
