"""Pushdown attention (Eq. 6): the block-causal gathered depth term vs the paper's Fig. 7 vs plain causal attention.

Attention cores on the same random q, k, v [B, H, T, d], depth table E [50, d], relative-position keys
[H, T, d] and tape [B, T, T] (lower-triangular random depths 0..54, so clamping is exercised), forward +
backward in float32:
  * ``gather``: ``pushdown_attention.block_causal_attention`` with the depth term only: per query block
    [a, b) of 128, ``softmax(q kᵀ + gather(q @ Eᵀ, tape)) v`` over the keys [0, b), the causal mask folded
    into the gather and the bias added inside ``baddbmm``;
  * ``fig7``: keys + E[tape] materialised as [B, H, T, T, d] (``materialised_depth_attention``);
  * ``causal``: ``SDPA(q, k, v, is_causal=True)``, no depth term (the floor: PyTorch's fused kernel, which
    also skips the blocks above the diagonal);
  * ``masked``: ``block_causal_attention`` with the causal mask as its only bias: the same block-causal
    algorithm as ``gather`` without the depth term, so ``gather/masked`` is the depth term's own cost;
  * ``layer``: ``block_causal_attention`` with the relative-position term (a matmul with the keys r(j - i)
    and a "rel shift") and the depth term: what every Pushdown Layer runs (a Base-LM layer: without depth).

Memory: each (core, T) runs in a fresh process with one torch thread. After one warm-up step, the kernel's
resident-set high-water mark is reset (``echo 5 > /proc/self/clear_refs``), one step runs, and the peak is
``VmHWM`` minus the ``VmRSS`` before the step (from ``/proc/self/status``): the real peak of every page the
step touched (tensors, autograd buffers, allocator slack), not a sum of tensor sizes. Linux only.
Time: median of ``--repeats`` further steps.

Usage: ``python benchmarks/pushdown_attention.py [--lengths 256 512 1024] [--batch 1] [--heads 4]
[--head-dim 64] [--repeats 3]``. Targets (issue 7): at T = 256, 512 and 1024 ``gather`` within 1.5x the time
of ``causal``, and at T = 512 >= 10x less peak memory than Fig. 7.

Measured (2-core x86 VM, ``--repeats 5``, peak MiB / ms):

      T   causal      masked      gather      layer       fig7         gather/causal time  fig7/gather peak
    256   0.8 / 2.7   2.5 / 2.2   1.5 / 3.1   2.4 / 4.3   144 / 166    1.11x               96x
    512   2.5 / 10.5  3.0 / 7.2   2.3 / 9.3   4.0 / 15.0  528 / 920    0.88x               232x
   1024   7.0 / 31.5  9.0 / 26.4  11.5 / 33.7 24.3 / 49.8 2112 / 5204  1.07x               184x

(The full T x T ``gather`` of before took 1.45x / 1.47x / 2.03x; peaks of a few MiB are noisy.)
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

CORES = ("causal", "masked", "gather", "layer", "fig7")
DEPTH_VOCAB = 50


def status_kib(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise RuntimeError(f"{field} not in /proc/self/status")


def measure(core: str, length: int, batch: int, heads: int, head_dim: int, repeats: int,
            device: str = "cpu") -> dict[str, float]:
    """Peak memory (MiB) and median time (ms) of one forward + backward of ``core`` (run in a fresh process).

    On CUDA the peak is ``max_memory_allocated`` above what is allocated before the step (the caching
    allocator's view), and each time ends with a device synchronisation."""
    import torch
    import torch.nn.functional as F

    from lightning_modules.families.pushdown.attention import (
        block_causal_attention,
        causal_mask,
        materialised_depth_attention,
    )

    torch.set_num_threads(1)
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(batch, heads, length, head_dim, generator=g).to(device).requires_grad_() for _ in range(3))
    table = torch.randn(DEPTH_VOCAB, head_dim, generator=g).to(device).requires_grad_()
    rel_keys = torch.randn(heads, length, head_dim, generator=g).to(device).requires_grad_()
    tape = torch.randint(0, DEPTH_VOCAB + 5, (batch, length, length), generator=g).tril().to(device)
    mask = causal_mask(torch.full((batch,), length), length).to(device)
    upstream = torch.randn(batch, heads, length, head_dim, generator=g).to(device)
    cuda = device == "cuda"
    scale = head_dim ** -0.5

    def step() -> None:
        if core == "causal":
            out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        elif core == "masked":
            out = block_causal_attention(q * scale, k, v, mask)
        elif core == "gather":
            out = block_causal_attention(q * scale, k, v, mask, depth_table=table, tape=tape)
        elif core == "layer":
            out = block_causal_attention(q * scale, k, v, mask, rel_keys, table, tape)
        else:
            out = materialised_depth_attention(q, k, v, table, tape, mask)
        out.backward(upstream)
        for t in (q, k, v, table, rel_keys):
            t.grad = None
        if cuda:
            torch.cuda.synchronize()

    step()  # warm-up
    if cuda:
        before = torch.cuda.memory_allocated()
        torch.cuda.reset_peak_memory_stats()
        step()
        peak = (torch.cuda.max_memory_allocated() - before) / 1024
    else:
        before = status_kib("VmRSS")
        Path("/proc/self/clear_refs").write_text("5")  # reset VmHWM to the current RSS
        step()
        peak = status_kib("VmHWM") - before
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        step()
        times.append(time.perf_counter() - start)
    return {"peak_mib": peak / 1024, "ms": 1000 * statistics.median(times)}


def run(core: str, length: int, args: argparse.Namespace) -> dict[str, float]:
    cmd = [sys.executable, __file__, "--one", core, str(length), "--batch", str(args.batch), "--heads",
           str(args.heads), "--head-dim", str(args.head_dim), "--repeats", str(args.repeats), "--device", args.device]
    done = subprocess.run(cmd, capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lengths", type=int, nargs="+", default=[256, 512, 1024])
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--head-dim", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    parser.add_argument("--one", nargs=2, metavar=("CORE", "T"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        core, length = args.one
        print(json.dumps(measure(core, int(length), args.batch, args.heads, args.head_dim, args.repeats,
                                args.device)))
        return

    peak = ("max_memory_allocated above the step's start" if args.device == "cuda"
            else "resident-set high-water mark above the step's start")
    print(f"B={args.batch} H={args.heads} d_head={args.head_dim} depth table {DEPTH_VOCAB}, fp32, forward+backward, "
          f"device {args.device}, 1 thread; peak = {peak} (fresh process per cell)")
    print(f"{'T':>5} {'core':>7} {'peak MiB':>10} {'ms':>9}")
    results = {}
    for length in args.lengths:
        for core in CORES:
            r = results[length, core] = run(core, length, args)
            print(f"{length:>5} {core:>7} {r['peak_mib']:>10.1f} {r['ms']:>9.1f}", flush=True)
    print()
    print(f"{'T':>5} {'fig7/gather peak':>17} {'gather/causal peak':>19} {'gather/causal time':>19} "
          f"{'gather/masked time':>19} {'layer/causal time':>18} {'fig7/gather time':>17}")
    for length in args.lengths:
        c, m, g, layer, f = (results[length, k] for k in CORES)
        for r in (c, g):  # a step below the measurable resolution (tiny T) must not divide by zero
            r["peak_mib"] = max(r["peak_mib"], 1e-3)
        print(f"{length:>5} {f['peak_mib'] / g['peak_mib']:>16.1f}x {g['peak_mib'] / c['peak_mib']:>18.2f}x "
              f"{g['ms'] / c['ms']:>18.2f}x {g['ms'] / m['ms']:>18.2f}x {layer['ms'] / c['ms']:>17.2f}x "
              f"{f['ms'] / g['ms']:>16.2f}x")
    time_ok = all(results[n, "gather"]["ms"] <= 1.5 * results[n, "causal"]["ms"] for n in args.lengths)
    print(f"\nTargets: gather time <= 1.5x causal at every T: {'met' if time_ok else 'MISSED'}", end="")
    if 512 in args.lengths:
        g, f = results[512, "gather"], results[512, "fig7"]
        print(f"; T=512 memory >= 10x below Fig. 7: {'met' if f['peak_mib'] >= 10 * g['peak_mib'] else 'MISSED'}",
              end="")
    print()


if __name__ == "__main__":
    main()
