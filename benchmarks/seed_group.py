"""Seed groups vs solo runs: seed-steps per second and peak memory per seed for groups of S seeds.

For each S, two measurements, each in a fresh process (so its peak memory is its own), interleaved
(solo, group, solo, group, ... ``--repeats`` times each, so a change of load on a shared machine hits both;
the best of the repeats is reported, and the load average before and after is printed): ``solo``, S modules
(seeds 0..S-1) each trained for ``--steps`` steps one after another, as S solo processes would (forward,
backward, clipping, Adam; the step loop alone: no process start-up, data loading or Lightning bookkeeping,
which a group shares too); ``group``, the same S seeds trained together as one ``SeedStack`` (one vmapped
forward and backward, per-seed clipping, one stacked Adam). One warm-up step precedes the timed steps.
Seed-steps/s = S × steps / seconds. Peak memory per seed: on CUDA ``max_memory_allocated`` / S; on the CPU
the growth of the process's peak RSS over training / S (allocator caching makes it coarse).

On the CPU this checks correctness of the plumbing more than speed (CPU matrix products are already large
enough at one seed: expect groups at or below solo speed). The GPU rows (``ptb``, ``bllip``) and the
``reproduce-tg-paper`` H100-hour estimate need a CUDA device; without one they are printed as not measured.

    python benchmarks/seed_group.py                       # CPU, cpu-small, S in 1 4 16, batch 4, 1 timed step
    python benchmarks/seed_group.py --device cuda --preset ptb --sizes 1 4 16 64 --steps 20 --batch-size 32

``--padding`` builds no model: for the same seeds' batches of the measured steps (warm-up included) it prints
how much a group pads, per seed: the group's chunks are padded to the largest seed's (``SeedStack.stack_chunks``),
so the longest of S × batch sentences sets every seed's chunk count and lengths. Printed are the tokens and the
attention area (Σ over chunks of L × (L + memory)) per seed, grouped against solo, which is what the group's
memory per seed follows.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from pathlib import Path

from lightning_modules.models.compiled import COMPILE_MODES

REPO = Path(__file__).resolve().parents[1]


def measure(mode: str, size: int, args: argparse.Namespace) -> dict[str, float]:
    """Train ``size`` seeds (``mode``: solo | group) for ``args.steps`` timed steps in this process."""
    import pytorch_lightning as pl
    import torch

    from experiments.batching import StepBatches
    from experiments.config import resolve_train_config
    from experiments.families import get_family
    from lightning_modules.models.compiled import compile_module
    from lightning_modules.models.seed_stack import SeedStack

    torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    cfg = resolve_train_config(args.family, args.preset, args.override)
    family = get_family(args.family)
    data = family.build_data(cfg)
    modules = []
    for seed in range(size):
        pl.seed_everything(seed, verbose=False)
        module = family.build_module(cfg, data).to(device).train()
        modules.append(compile_module(module, args.compile) if mode == "solo" else module)
    batch_size = args.batch_size
    streams = [iter(StepBatches(data.train, batch_size, seed, data.collate)) for seed in range(size)]
    clip = float(modules[0].config.grad_clip_norm)

    def on_device(batch):
        return [chunk.to(device) for chunk in batch]

    if mode == "group":
        stack = SeedStack(modules).compile(args.compile)
        optimizer = torch.optim.Adam(stack.parameters().values(), lr=1e-4)

        def steps(n: int) -> None:
            for _ in range(n):
                loss, _, _ = stack.losses(stack.stack_chunks([on_device(next(s)) for s in streams]))
                loss.sum().backward()
                stack.clip_per_seed(clip)
                optimizer.step()
                optimizer.zero_grad(set_to_none=True)
    else:
        optimizers = [torch.optim.Adam(m.parameters(), lr=1e-4) for m in modules]

        def steps(n: int) -> None:
            for module, optimizer, stream in zip(modules, optimizers, streams, strict=True):
                for _ in range(n):
                    total, count = module.nll(on_device(next(stream)))
                    (total / count.clamp(min=1)).backward()
                    torch.nn.utils.clip_grad_norm_(module.parameters(), clip)
                    optimizer.step()
                    optimizer.zero_grad(set_to_none=True)

    steps(1)  # warm-up (allocator, kernels)
    if device.type == "cuda":
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        base = torch.cuda.memory_allocated()
    else:
        base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    start = time.perf_counter()
    steps(args.steps)
    if device.type == "cuda":
        torch.cuda.synchronize()
        peak = torch.cuda.max_memory_allocated()
    else:
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    seconds = time.perf_counter() - start
    return {"seed_steps_per_s": size * args.steps / seconds, "peak_mib_per_seed": (peak - base) / 2**20 / size,
            "seconds": seconds}


def padding(args: argparse.Namespace) -> None:
    """Tokens and attention area per seed, group (padded to the largest seed's chunks) against solo."""
    from experiments.batching import StepBatches
    from experiments.config import resolve_train_config
    from experiments.families import get_family

    cfg = resolve_train_config(args.family, args.preset, args.override)
    data = get_family(args.family).build_data(cfg)
    memory = int(cfg["model"].get("memory_length") or 0)
    print(f"# {args.family} {args.preset}: batch {args.batch_size} per seed, {args.steps + 1} steps (warm-up "
          f"included), memory {memory}; per seed, the largest step")
    print(f"{'S':>4} {'solo tokens':>12} {'group tokens':>13} {'ratio':>6} {'solo area':>11} {'group area':>11} "
          f"{'ratio':>6}")
    for size in args.sizes:
        streams = [iter(StepBatches(data.train, args.batch_size, seed, data.collate)) for seed in range(size)]
        worst = {"solo tokens": 0.0, "group tokens": 0.0, "solo area": 0.0, "group area": 0.0}
        for _ in range(args.steps + 1):
            lengths = [[chunk.inputs.shape[1] for chunk in next(stream)] for stream in streams]
            padded = [max(seed[c] for seed in lengths if c < len(seed)) for c in range(max(map(len, lengths)))]
            solo = [(sum(seed), sum(n * (n + memory) for n in seed)) for seed in lengths]
            step = {"solo tokens": sum(t for t, _ in solo) / size, "solo area": sum(a for _, a in solo) / size,
                    "group tokens": sum(padded), "group area": sum(n * (n + memory) for n in padded)}
            worst = {key: max(worst[key], step[key]) for key in worst}
        print(f"{size:>4} {worst['solo tokens']:>12.0f} {worst['group tokens']:>13.0f} "
              f"{worst['group tokens'] / worst['solo tokens']:>5.2f}x {worst['solo area']:>11.0f} "
              f"{worst['group area']:>11.0f} {worst['group area'] / worst['solo area']:>5.2f}x", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--family", default="tg")
    ap.add_argument("--preset", default="cpu-small")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--sizes", type=int, nargs="+", default=[1, 4, 16])
    ap.add_argument("--steps", type=int, default=1)
    ap.add_argument("--batch-size", type=int, default=4, help="sequences per seed and step (cpu-small's is 16)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=2, help="interleaved measurements of each mode per S")
    ap.add_argument("--compile", choices=COMPILE_MODES, default="none",
                    help="runtime.compile of both paths: each solo network, the group's vmapped loss")
    ap.add_argument("--override", nargs="*", default=[], metavar="KEY=VALUE")
    ap.add_argument("--padding", action="store_true", help="no training: how much a group pads, per seed")
    ap.add_argument("--one", nargs=2, metavar=("MODE", "S"), help=argparse.SUPPRESS)  # a child measurement
    args = ap.parse_args()
    if args.padding:
        padding(args)
        return
    if args.one:
        print(json.dumps(measure(args.one[0], int(args.one[1]), args)))
        return
    import os

    import torch

    forwarded = sys.argv[1:]
    print(f"# {args.family} {args.preset} on {args.device} ({args.threads} threads, compile {args.compile}), "
          f"batch {args.batch_size}, "
          f"{args.steps} timed steps per seed, best of {args.repeats} interleaved; load average "
          f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    print(f"{'S':>4} {'solo seed-steps/s':>18} {'group seed-steps/s':>19} {'speed-up':>9} "
          f"{'solo MiB/seed':>14} {'group MiB/seed':>15}")
    for size in args.sizes:
        row: dict[str, list[dict[str, float]]] = {"solo": [], "group": []}
        for _ in range(args.repeats):
            for mode in ("solo", "group"):
                done = subprocess.run([sys.executable, __file__, *forwarded, "--one", mode, str(size)], cwd=REPO,
                                      capture_output=True, text=True)
                if done.returncode:  # the measurement's own error, not just its exit status
                    sys.exit(f"{mode} S={size} failed (exit {done.returncode}):\n{done.stderr[-4000:]}")
                row[mode].append(json.loads(done.stdout.strip().splitlines()[-1]))
        solo, group = (max(row[mode], key=lambda r: r["seed_steps_per_s"]) for mode in ("solo", "group"))
        print(f"{size:>4} {solo['seed_steps_per_s']:>18.2f} {group['seed_steps_per_s']:>19.2f} "
              f"{group['seed_steps_per_s'] / solo['seed_steps_per_s']:>8.2f}x "
              f"{solo['peak_mib_per_seed']:>14.1f} {group['peak_mib_per_seed']:>15.1f}", flush=True)
    print(f"# load average after: {os.getloadavg()[0]:.1f}")
    if args.device != "cuda":
        state = "no CUDA device here" if not torch.cuda.is_available() else "run with --device cuda"
        print(f"GPU rows (ptb, bllip; S up to 64; MFU): not measured ({state})")
        print("reproduce-tg-paper H100-hours (training, evaluation): not estimated (needs the GPU rows)")


if __name__ == "__main__":
    main()
