"""PaLM span attention (§2.1): the vectorised layer vs the loop formulations it replaces.

One forward + backward of the whole span-attention step (both rational RNNs, the m span representations per
position, the MLP scores, softmax and context) on the same random input [B, T, D] with the same weights:
  * ``vectorised``: ``layers.span_attention.SpanAttention`` — Alg. 1 (forward spans) and the per-start
    accumulation (backward spans) over all positions and all m lengths at once; the only loop is Eq. 1c's
    recurrence over time;
  * ``per-position``: the official code's formulation (``span_parser.py``), re-written here: a Python loop over
    the end positions, each computing its m spans from cumulative log-forget sums, the backward spans by one
    right-to-left RRNN over the whole window minus the decayed state after the span (reads the future; the
    same numbers in exact arithmetic);
  * ``direct``: the definition, a loop over positions and lengths running Eq. 1c over every span (n·m spans,
    each from scratch).
All three give the same context (checked, 1e-4) before timing.

Time: median over ``--repeats`` rounds, the cores interleaved within each round (one process, one thread).
Memory: each (core, T) in a fresh process; after a warm-up step the resident-set high-water mark is reset
(``/proc/self/clear_refs``) and the peak of one step above the RSS before it is reported (Linux only).

Usage: ``python benchmarks/palm_span_attention.py [--lengths 35 70 140] [--batch 20] [--d-in 1020]
[--d-rrnn 200] [--d-mlp 100] [--max-span 20] [--repeats 3] [--direct-max 70]`` (defaults: PaLM's PTB sizes,
one BPTT window of 70 at 20 streams).

Measured (2-core x86 VM shared with other jobs, so absolute times are noisy; the ratios come from interleaved
rounds; defaults, ``--repeats 3``), peak MiB / ms:

      T   vectorised      per-position     direct            per-position/vectorised time   direct/vectorised time
     35   147 / 790       68 / 1217        116 / 4812        1.5x                           6.1x
     70   288 / 1208      171 / 4314       128 / 22349       3.6x                           18.5x
    140   523 / 10503     305 / 53884      (not run)         5.1x                           -

The vectorised layer is faster by a factor growing with T but holds 1.7–2.2x the peak memory of the loops: it
materialises the [B, T, m, d] windows of gates, decays and partial sums (start- and end-anchored) for autograd,
where the loops keep one position's spans at a time (a fused kernel or custom backward would remove that).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

CORES = ("vectorised", "per-position", "direct")
_spec = importlib.util.spec_from_file_location("pushdown_benchmark", Path(__file__).with_name("pushdown_attention.py"))
_pushdown = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_pushdown)
status_kib = _pushdown.status_kib


def attend(layer, h, g):
    """Eq. 3 from span representations g [B, T, m, 2r] (spans ending before each query), no span before 0."""
    import torch

    m = g.shape[2]
    t = torch.arange(h.shape[1])[:, None]
    exists = (t - 1 - torch.arange(m)[None, :]) >= 0
    scores = layer.span_scores(h, g).masked_fill(~exists, float("-inf"))
    weights = torch.softmax(scores.masked_fill(~exists.any(-1, keepdim=True), 0.0), -1).masked_fill(~exists, 0.0)
    return torch.einsum("btm,btmd->btd", weights, g)


def per_position(layer, h):
    """The official formulation: a loop over end positions (module docstring)."""
    import torch

    from lightning_modules.families.palm.rational_rnn import run

    m, (batch, length, _) = layer.max_span, h.shape
    log_f, u = layer.forward_rrnn.gates(h)
    c = run(log_f, u)
    cum = log_f.cumsum(1)
    blog_f, bu = layer.backward_rrnn.gates(h)
    back = run(blog_f.flip(1), bu.flip(1)).flip(1)  # right to left over the whole window
    bcum = blog_f.flip(1).cumsum(1).flip(1)  # Σ_{l >= i} log f_l
    zero = h.new_zeros(batch, c.shape[-1])
    rows = []
    for p in range(length):
        end = p - 1  # spans ending before the query
        spans = []
        for i in range(m):
            start = end - i
            if start < 0:
                spans.append(torch.cat([zero, zero], -1))
                continue
            before = c[:, start - 1] if start > 0 else zero
            decay = (cum[:, end] - (cum[:, start - 1] if start > 0 else 0)).exp()
            fw = c[:, end] - before * decay
            after = back[:, end + 1] if end + 1 < length else zero
            bdecay = (bcum[:, start] - (bcum[:, end + 1] if end + 1 < length else 0)).exp()
            spans.append(torch.cat([fw, back[:, start] - after * bdecay], -1))
        rows.append(torch.stack(spans, 1))
    return attend(layer, h, torch.stack(rows, 1))


def direct(layer, h):
    """Every span run from scratch with Eq. 1c, both directions."""
    import torch

    m, (batch, length, _) = layer.max_span, h.shape
    fw, bw = layer.forward_rrnn.gates(h), layer.backward_rrnn.gates(h)
    zero = h.new_zeros(batch, 2 * fw[1].shape[-1])
    rows = []
    for p in range(length):
        spans = []
        for i in range(m):
            start, end = p - 1 - i, p - 1
            if start < 0:
                spans.append(zero)
                continue
            cf = cb = h.new_zeros(batch, fw[1].shape[-1])
            for k in range(start, end + 1):
                cf = fw[0][:, k].exp() * cf + fw[1][:, k]
                kb = end - (k - start)
                cb = bw[0][:, kb].exp() * cb + bw[1][:, kb]
            spans.append(torch.cat([cf, cb], -1))
        rows.append(torch.stack(spans, 1))
    return attend(layer, h, torch.stack(rows, 1))


def setup(length: int, args: argparse.Namespace):
    import torch

    from lightning_modules.families.palm.span_attention import SpanAttention

    torch.set_num_threads(1)
    torch.manual_seed(0)
    layer = SpanAttention(args.d_in, args.d_rrnn, args.d_mlp, args.max_span)
    h = torch.randn(args.batch, length, args.d_in).requires_grad_()
    upstream = torch.randn(args.batch, length, 2 * args.d_rrnn)
    cores = {"vectorised": lambda: layer(h).context, "per-position": lambda: per_position(layer, h),
             "direct": lambda: direct(layer, h)}

    def step(core: str) -> None:
        cores[core]().backward(upstream)
        h.grad = None
        layer.zero_grad(set_to_none=True)

    return cores, step


def measure_memory(core: str, length: int, args: argparse.Namespace) -> float:
    _, step = setup(length, args)
    step(core)  # warm-up
    before = status_kib("VmRSS")
    Path("/proc/self/clear_refs").write_text("5")
    step(core)
    return (status_kib("VmHWM") - before) / 1024


def measure_times(length: int, cores: list[str], args: argparse.Namespace) -> dict[str, float]:
    import torch

    outputs, step = setup(length, args)
    with torch.no_grad():
        reference = outputs["vectorised"]()
        for core in cores:
            torch.testing.assert_close(outputs[core](), reference, atol=1e-4, rtol=1e-4)
    for core in cores:
        step(core)  # warm-up
    times: dict[str, list[float]] = {core: [] for core in cores}
    for _ in range(args.repeats):
        for core in cores:
            start = time.perf_counter()
            step(core)
            times[core].append(time.perf_counter() - start)
    return {core: 1000 * statistics.median(t) for core, t in times.items()}


def child(args: argparse.Namespace, *what: str) -> dict:
    cmd = [sys.executable, __file__, *what, "--batch", str(args.batch), "--d-in", str(args.d_in), "--d-rrnn",
           str(args.d_rrnn), "--d-mlp", str(args.d_mlp), "--max-span", str(args.max_span), "--repeats",
           str(args.repeats)]
    done = subprocess.run(cmd, capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lengths", type=int, nargs="+", default=[35, 70, 140])
    parser.add_argument("--batch", type=int, default=20)
    parser.add_argument("--d-in", type=int, default=1020)
    parser.add_argument("--d-rrnn", type=int, default=200)
    parser.add_argument("--d-mlp", type=int, default=100)
    parser.add_argument("--max-span", type=int, default=20)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--direct-max", type=int, default=70, help="longest T the direct loop is run at")
    parser.add_argument("--memory", nargs=2, metavar=("CORE", "T"), help=argparse.SUPPRESS)
    parser.add_argument("--times", nargs="+", metavar="T_AND_CORES", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.memory:
        print(json.dumps({"peak_mib": measure_memory(args.memory[0], int(args.memory[1]), args)}))
        return
    if args.times:
        print(json.dumps(measure_times(int(args.times[0]), args.times[1:], args)))
        return

    print(f"B={args.batch} D={args.d_in} RRNN {args.d_rrnn}x2 MLP {args.d_mlp} m={args.max_span}, fp32, "
          "forward+backward, 1 thread; time = median of interleaved rounds; peak = RSS high-water mark above the "
          "step's start (fresh process per cell)")
    print(f"{'T':>5} {'core':>13} {'peak MiB':>10} {'ms':>10} {'time / vectorised':>18} {'peak / vectorised':>18}")
    for length in args.lengths:
        cores = [c for c in CORES if c != "direct" or length <= args.direct_max]
        times = child(args, "--times", str(length), *cores)
        peaks = {c: child(args, "--memory", c, str(length))["peak_mib"] for c in cores}
        for core in cores:
            print(f"{length:>5} {core:>13} {peaks[core]:>10.1f} {times[core]:>10.1f} "
                  f"{times[core] / times['vectorised']:>17.2f}x {peaks[core] / max(peaks['vectorised'], 0.1):>17.2f}x",
                  flush=True)


if __name__ == "__main__":
    main()
