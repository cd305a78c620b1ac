"""Training-step throughput of the TG family on the PTB sample: our batches vs the official layout.

Our collate trims each chunk to its longest sequence; the reference feeds full L-token segments, as the
official data pipeline does. (Both use the core's skip of the empty memory at sequence starts.) Both compute
the same loss (tests/lightning_modules/data/test_tg_data.py checks exactness).

    python benchmarks/training_step.py [--family tg] [--steps 8] [--threads 2]
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from experiments.batching import batch_indices
from experiments.config import resolve_train_config
from experiments.families import get_family
from lightning_modules.data.encodings.batch import collate_chunk


def step_times(module, batches, optimizer) -> list[float]:
    times = []
    for chunks in batches:
        start = time.perf_counter()
        total, count = module.nll(chunks)
        (total / count).backward()
        optimizer.step()
        optimizer.zero_grad()
        times.append(time.perf_counter() - start)
    return times


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--family", default="tg")
    ap.add_argument("--preset", default="cpu-small")
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    cfg = resolve_train_config(args.family, args.preset, ["runtime.wandb=disabled"])
    family = get_family(args.family)
    data = family.build_data(cfg)
    module = family.build_module(cfg, data)
    optimizer = torch.optim.Adam(module.parameters(), lr=1e-4)
    bs = cfg["train"]["batch_size"]
    rows = [[data.train[i] for i in batch_indices(len(data.train), bs, 0, k)] for k in range(args.steps + 2)]

    def full(batch):
        ex, segs = [e for e, _ in batch], [s for _, s in batch]
        return [collate_chunk(ex, segs, c) for c in range(max(len(s) for s in segs))]

    ours = [data.collate(b) for b in rows]
    reference = [full(b) for b in rows]
    tokens = statistics.mean(sum(int((c.labels != 0).sum()) for c in chunks) for chunks in ours)
    step_times(module, ours[:2], optimizer)  # warm-up
    t_ours = statistics.median(step_times(module, ours[2:], optimizer))
    t_ref = statistics.median(step_times(module, reference[2:], optimizer))
    print(f"{args.family} {args.preset}: batch {bs}, {tokens:.0f} predicted tokens per step, {args.threads} threads")
    print(f"  reference (full L={cfg['model']['segment_length']} segments)   : {t_ref * 1000:8.1f} ms/step "
          f"{tokens / t_ref:8.0f} tokens/s")
    print(f"  synbench (trimmed to the longest chunk):        {t_ours * 1000:8.1f} ms/step "
          f"{tokens / t_ours:8.0f} tokens/s")
    print(f"  speed-up: {t_ref / t_ours:.2f}x")


if __name__ == "__main__":
    main()
