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
[--head-dim 64] [--repeats 3]``. Targets (its budget): at T = 256, 512 and 1024 ``gather`` within 1.5x the time
of ``causal``, and at T = 512 >= 10x less peak memory than Fig. 7.

Measured (2-core x86 VM, ``--repeats 5``, peak MiB / ms):

      T   causal      masked      gather      layer       fig7         gather/causal time  fig7/gather peak
    256   0.8 / 2.7   2.5 / 2.2   1.5 / 3.1   2.4 / 4.3   144 / 166    1.11x               96x
    512   2.5 / 10.5  3.0 / 7.2   2.3 / 9.3   4.0 / 15.0  528 / 920    0.88x               232x
   1024   7.0 / 31.5  9.0 / 26.4  11.5 / 33.7 24.3 / 49.8 2112 / 5204  1.07x               184x

(The full T x T ``gather`` of before took 1.45x / 1.47x / 2.03x; peaks of a few MiB are noisy.)

FlexAttention, ``--flex``: one process per T times, in interleaved rounds (every round runs
each core once, in a rotated order, so load drift hits them alike), ``causal``, ``gather`` and ``layer`` (the
block loop) against
  * ``flex``: ``score_function.PushdownPattern`` on the flex path, depth term only: ``q @ Eᵀ`` then
    FlexAttention with the causal block mask and ``score_mod`` gathering the [B, H, T, V] table by the tape,
    through ``torch.compile`` (on CUDA dynamic, as the model runs it; on CPU static: the dynamic kernel of the
    depth gather fails to build there, and eager FlexAttention materialises the scores);
  * ``flex-layer``: the same with the relative-position term (the skewed [B, H, T, T] logits read in
    ``score_mod``): a whole Pushdown Layer's attention.
On CUDA a step is forward + backward and the peak memory of each core is printed; on CPU FlexAttention has no
backward, so every core is timed forward only (no_grad): the CPU figures check the script and the fused C++ kernel,
not the GPU target. Before timing, flex's output (and, on CUDA, every gradient)
is compared with the block loop's. The block mask is built once per T outside the timed step (the model
builds it once per forward for all layers); its build time is printed. Target: ``flex`` <= 1.5x ``causal``
at every T <= 2048. GPU command (one call):

    python benchmarks/pushdown_attention.py --flex --device cuda --lengths 512 1024 2048 --repeats 20
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

CORES = ("causal", "masked", "gather", "layer", "fig7")
FLEX_CORES = ("causal", "gather", "flex", "layer", "flex-layer")
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


def compare_flex(length: int, batch: int, heads: int, head_dim: int, repeats: int, device: str) -> dict[str, object]:
    """Median ms of every ``FLEX_CORES`` core at one T, timed in interleaved rounds (forward + backward on
    CUDA, forward only on CPU), their CUDA peaks (MiB), flex's largest difference to the block loop, and the
    block mask's build time."""
    import torch
    import torch.nn.functional as F
    from torch.nn.attention.flex_attention import flex_attention

    from lightning_modules.families.pushdown.attention import block_causal_attention, causal_mask
    from lightning_modules.families.pushdown.score_function import PushdownPattern

    torch.set_num_threads(1)
    cuda = device == "cuda"
    g = torch.Generator().manual_seed(0)
    scale = head_dim ** -0.5
    q, k, v = (torch.randn(batch, heads, length, head_dim, generator=g).to(device).requires_grad_(cuda)
               for _ in range(3))
    table = torch.randn(DEPTH_VOCAB, head_dim, generator=g).to(device).requires_grad_(cuda)
    rel_keys = torch.randn(heads, length, head_dim, generator=g).to(device).requires_grad_(cuda)
    tape = torch.randint(0, DEPTH_VOCAB + 5, (batch, length, length), generator=g).tril().to(device)
    mask = causal_mask(torch.full((batch,), length), length).to(device)
    upstream = torch.randn(batch, heads, length, head_dim, generator=g).to(device)
    leaves = (q, k, v, table, rel_keys)

    def sync() -> None:
        if cuda:
            torch.cuda.synchronize()

    pattern = PushdownPattern.build(mask, tape, DEPTH_VOCAB, flex=True, compiled=cuda)
    if not cuda:  # the dynamic CPU kernel of the depth gather does not build (score_function); shapes are fixed
        pattern = dataclasses.replace(pattern, flex_kernel=torch.compile(flex_attention, dynamic=False))
    sync()
    start = time.perf_counter()  # a second build: the first pays one-time costs
    PushdownPattern.build(mask, tape, DEPTH_VOCAB, flex=True)
    sync()
    build_ms = 1000 * (time.perf_counter() - start)
    forward = {
        "causal": lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True),
        "gather": lambda: block_causal_attention(q * scale, k, v, mask, depth_table=table, tape=tape),
        "flex": lambda: pattern.attend(q * scale, k, v, depth_table=table),
        "layer": lambda: block_causal_attention(q * scale, k, v, mask, rel_keys, table, tape),
        "flex-layer": lambda: pattern.attend(q * scale, k, v, rel_keys, table),
    }

    def step(core: str) -> tuple[torch.Tensor, list[torch.Tensor | None]]:
        with torch.set_grad_enabled(cuda):
            out = forward[core]()
            if cuda:
                out.backward(upstream)
                grads = [t.grad for t in leaves]
                for t in leaves:
                    t.grad = None
                return out, grads
        return out, []

    differences = {}
    for flex_core, loop_core in (("flex", "gather"), ("flex-layer", "layer")):
        (got, got_grads), (want, want_grads) = step(flex_core), step(loop_core)
        pairs = [(got, want)] + [(a, b) for a, b in zip(got_grads, want_grads, strict=True) if b is not None]
        differences[flex_core] = max(float((a - b).abs().max() / b.abs().max().clamp(min=1e-30)) for a, b in pairs)
    sync()
    for core in FLEX_CORES:  # warm-up (and compile)
        step(core)
    sync()
    peaks = {}
    for core in FLEX_CORES if cuda else ():  # each core's peak above its start
        before = torch.cuda.memory_allocated()
        torch.cuda.reset_peak_memory_stats()
        step(core)
        sync()
        peaks[core] = (torch.cuda.max_memory_allocated() - before) / 2 ** 20
    times: dict[str, list[float]] = {core: [] for core in FLEX_CORES}
    for r in range(repeats):
        for core in FLEX_CORES[r % len(FLEX_CORES):] + FLEX_CORES[:r % len(FLEX_CORES)]:
            sync()
            start = time.perf_counter()
            step(core)
            sync()
            times[core].append(time.perf_counter() - start)
    return {"ms": {c: 1000 * statistics.median(t) for c, t in times.items()}, "peak_mib": peaks,
            "max_rel_diff": differences, "block_mask_ms": build_ms}


def device_description(device: str) -> str:
    """The device in words: the GPU's name, or the CPU model, core count and load average (shared machines)."""
    import os
    import platform

    import torch

    if device == "cuda":
        return f"{torch.cuda.get_device_name()} (torch {torch.__version__}, CUDA {torch.version.cuda})"
    model = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                  if line.startswith("model name")), platform.processor())
    load = " / ".join(f"{x:.1f}" for x in os.getloadavg())
    return f"{model}, {os.cpu_count()} cores, load average {load} (torch {torch.__version__}, 1 thread)"


def main_flex(args: argparse.Namespace) -> None:
    """The ``--flex`` table: ms per core and T, ratios, flex's difference to the block loop, the target."""
    what = "forward + backward" if args.device == "cuda" else "forward only (FlexAttention has no CPU backward)"
    print(f"device: {device_description(args.device)}")
    print(f"B={args.batch} H={args.heads} d_head={args.head_dim} depth table {DEPTH_VOCAB}, fp32, {what}, "
          f"median of {args.repeats} interleaved rounds (one process per T)")
    print(f"{'T':>5} " + " ".join(f"{c + ' ms':>14}" for c in FLEX_CORES)
          + f" {'flex/causal':>12} {'flex/gather':>12} {'flex-layer/causal':>18} {'flex-layer/layer':>17}"
          + f" {'flex diff':>10} {'mask ms':>8}")
    ok = True
    for length in args.lengths:
        cmd = [sys.executable, __file__, "--one-flex", str(length), "--batch", str(args.batch), "--heads",
               str(args.heads), "--head-dim", str(args.head_dim), "--repeats", str(args.repeats), "--device",
               args.device]
        done = subprocess.run(cmd, capture_output=True, text=True)
        if done.returncode:  # e.g. a kernel that does not compile on this device: say so, go on with the next T
            ok = False
            print(f"{length:>5} FAILED (exit {done.returncode}):\n" + "\n".join(done.stderr.splitlines()[-15:]))
            continue
        r = json.loads(done.stdout.strip().splitlines()[-1])
        ms = r["ms"]
        ok &= ms["flex"] <= 1.5 * ms["causal"]
        diff = max(r["max_rel_diff"].values())
        print(f"{length:>5} " + " ".join(f"{ms[c]:>14.2f}" for c in FLEX_CORES)
              + f" {ms['flex'] / ms['causal']:>11.2f}x {ms['flex'] / ms['gather']:>11.2f}x"
              + f" {ms['flex-layer'] / ms['causal']:>17.2f}x {ms['flex-layer'] / ms['layer']:>16.2f}x"
              + f" {diff:>10.1e} {r['block_mask_ms']:>8.1f}", flush=True)
        if r["peak_mib"]:
            print("      peak MiB: " + ", ".join(f"{c} {r['peak_mib'][c]:.1f}" for c in FLEX_CORES))
    print(f"\nTarget (FlexAttention budget): flex <= 1.5x causal SDPA at every T: {'met' if ok else 'MISSED'}"
          + ("" if args.device == "cuda" else " (CPU, forward only: not the target's GPU measurement)"))


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
    parser.add_argument("--flex", action="store_true",
                        help="time FlexAttention against causal SDPA and the block loop (interleaved)")
    parser.add_argument("--one", nargs=2, metavar=("CORE", "T"), help=argparse.SUPPRESS)
    parser.add_argument("--one-flex", type=int, metavar="T", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one_flex:
        print(json.dumps(compare_flex(args.one_flex, args.batch, args.heads, args.head_dim, args.repeats,
                                      args.device)))
        return
    if args.flex:
        main_flex(args)
        return
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
