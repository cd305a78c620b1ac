"""Attention paths of the TG network, timed against each other in one run.

1. One relative attention layer, forward: dense SDPA (float bias) vs FlexAttention (eager and compiled), for a
   random mask and a TG-like (STACK/COMPOSE) mask, chunk length T with a memory of T (keys 2T).
   On ``--device cuda`` also forward+backward (FlexAttention has no backward on CPU).
2. Position logits: the gather on the [B, H, T, R] table (ours) vs the official one-hot einsum
   (``"bhtR,btsR->bhts"`` with a [B, T, 2T, R] one-hot), time and memory (CPU: bytes of all tensors the ops
   create, counted by a dispatch mode; CUDA: peak ``max_memory_allocated`` above the inputs).

Usage: ``python benchmarks/attention.py [--device cpu|cuda] [--lengths 256 512] [--batch 4]``.
"""

from __future__ import annotations

import argparse
import statistics
import time
import warnings
from functools import partial

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from lightning_modules.layers.relative_attention import (
    AttentionPattern,
    RelativeMultiHeadAttention,
    gather_position_logits,
    position_index,
    sinusoid_table,
)

warnings.filterwarnings("ignore", message=".*flex_attention called without torch.compile.*")
MIN_REL, MAX_REL = -1, 62


def tg_like_mask(length: int, memory: int, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """STACK/COMPOSE mask and depth-difference relpos of a random bracketing of ``memory + length`` actions;
    queries are the last ``length`` positions, keys all of them (a stand-in for smart memory)."""
    n = memory + length
    mask = torch.zeros(n, n, dtype=torch.bool)
    depth = torch.zeros(n, dtype=torch.long)
    stack: list[int] = [0]
    opened: list[tuple[int, int]] = [(0, 0)]  # (stack index of the ONT, depth)
    mask[0, 0] = True
    i = 1
    while i < n:
        r = float(torch.rand((), generator=generator))
        children = len(stack) - 1 - opened[-1][0]
        if len(opened) > 1 and children > 0 and r < 0.3 and i + 1 < n:  # CNT1 (compose) then CNT2 (stack)
            ont_index, d = opened.pop()
            members = stack[ont_index:]
            mask[i, members] = True
            mask[i, i] = True
            depth[i] = d
            del stack[ont_index:]
            stack.append(i)
            mask[i + 1, stack] = True
            mask[i + 1, i + 1] = True
            depth[i + 1] = d
            i += 2
            continue
        d = opened[-1][1] + 1
        depth[i] = d
        stack.append(i)
        if r < 0.55 and len(opened) < 40:  # ONT
            opened.append((len(stack) - 1, d))
        mask[i, stack] = True
        i += 1
    relpos = (depth[:, None] - depth[None, :]) * mask
    return mask[memory:], relpos[memory:]


def inputs(kind: str, batch: int, length: int, d_model: int, device: str, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    keys = 2 * length
    if kind == "random":
        mask = torch.rand(batch, length, keys, generator=g) < 0.3
        mask[:, torch.arange(length), length + torch.arange(length)] = True
        relpos = torch.randint(MIN_REL, MAX_REL + 1, (batch, length, keys), generator=g) * mask
    else:
        pairs = [tg_like_mask(length, length, g) for _ in range(batch)]
        mask = torch.stack([m for m, _ in pairs])
        relpos = torch.stack([r for _, r in pairs])
    x = torch.randn(batch, length, d_model, generator=g)
    memory = torch.randn(batch, length, d_model, generator=g)
    return x.to(device), memory.to(device), mask.to(device), relpos.to(device)


def median_ms(fn, repeats: int, device: str) -> float:
    fn()  # warm-up (compilation)
    times = []
    for _ in range(repeats):
        if device == "cuda":
            torch.cuda.synchronize()
        t = time.perf_counter()
        fn()
        if device == "cuda":
            torch.cuda.synchronize()
        times.append((time.perf_counter() - t) * 1e3)
    return statistics.median(times)


def forward_backward(attn, x, memory, pattern, table, flex: bool) -> None:
    attn(x, memory, pattern, table, flex=flex, compiled_flex=flex).sum().backward()


def gather_logits(logits: torch.Tensor, relpos: torch.Tensor) -> torch.Tensor:
    """Ours: gather on the [B, H, T, R] table (plus the zero column for positions below the range)."""
    index = position_index(relpos, MIN_REL, MAX_REL)
    return gather_position_logits(torch.nn.functional.pad(logits, (0, 1)), index)


def one_hot_logits(logits: torch.Tensor, relpos: torch.Tensor) -> torch.Tensor:
    """The official formulation: a [B, T, K, R] one-hot of the clipped index and an einsum."""
    R = logits.shape[-1]
    index = MAX_REL - relpos.clamp(MIN_REL - 1, MAX_REL)
    hot = torch.nn.functional.one_hot(index, num_classes=R + 1)[..., :R].to(logits.dtype)
    return torch.einsum("bhtR,btsR->bhts", logits, hot)


def bench_paths(args) -> None:
    torch.manual_seed(0)
    attn = RelativeMultiHeadAttention(args.d_model, args.heads, dropout=0.0).to(args.device).eval()
    table = sinusoid_table(MAX_REL, MIN_REL, args.d_model).to(args.device)
    print(f"\n## attention layer forward (B={args.batch}, d={args.d_model}, H={args.heads}, keys = 2T), "
          f"median ms over {args.repeats}")
    print(f"{'mask':<8}{'T':>5}{'density':>10}{'dense':>10}{'flex eager':>12}{'flex comp.':>12}"
          f"{'dense/comp.':>13}")
    for length in args.lengths:
        for kind in ("random", "tg-like"):
            x, memory, mask, relpos = inputs(kind, args.batch, length, args.d_model, args.device)
            dense_p = AttentionPattern.build(mask, relpos, MIN_REL, MAX_REL, flex=False)
            flex_p = AttentionPattern.build(mask, relpos, MIN_REL, MAX_REL, flex=True)
            dense = partial(attn, x, memory, dense_p, table)
            eager = partial(attn, x, memory, flex_p, table, flex=True)
            compiled = partial(attn, x, memory, flex_p, table, flex=True, compiled_flex=True)
            with torch.no_grad():
                d_ms = median_ms(dense, args.repeats, args.device)
                # The unfused (eager) flex path is only a debugging aid; not timed on GPU.
                e_ms = median_ms(eager, max(3, args.repeats // 4), args.device) if args.device == "cpu" \
                    else float("nan")
                c_ms = median_ms(compiled, args.repeats, args.device)
            print(f"{kind:<8}{length:>5}{mask.float().mean().item():>10.3f}{d_ms:>10.1f}{e_ms:>12.1f}"
                  f"{c_ms:>12.1f}{d_ms / c_ms:>13.2f}")
            if args.device == "cuda":
                attn.train()
                xg = x.clone().requires_grad_(True)

                attn.dropout = 0.0
                d = median_ms(partial(forward_backward, attn, xg, memory, dense_p, table, False),
                              args.repeats, args.device)
                f = median_ms(partial(forward_backward, attn, xg, memory, flex_p, table, True),
                              args.repeats, args.device)
                print(f"{'':<8}{'':>5}{'fwd+bwd':>10}{d:>10.1f}{'':>12}{f:>12.1f}{d / f:>13.2f}")
                attn.eval()


class AllocationCounter(TorchDispatchMode):
    """Sums the bytes of every new storage an op returns (what a formulation materialises)."""

    def __init__(self):
        super().__init__()
        self.bytes = 0
        self.seen: set[int] = set()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for t in out if isinstance(out, tuple | list) else (out,):
            if isinstance(t, torch.Tensor):
                key = t.untyped_storage().data_ptr()
                if key not in self.seen:
                    self.seen.add(key)
                    self.bytes += t.untyped_storage().nbytes()
        return out


def bench_position_logits(args) -> None:
    print(f"\n## position logits [B={args.batch}, H={args.heads}, T, 2T] from a table of 64 positions")
    print(f"{'T':>5}{'gather ms':>11}{'one-hot ms':>12}{'speed-up':>10}{'gather MiB':>12}{'one-hot MiB':>13}"
          f"{'memory ratio':>14}")
    R = MAX_REL - MIN_REL + 1
    for length in args.lengths:
        g = torch.Generator().manual_seed(0)
        logits = torch.randn(args.batch, args.heads, length, R, generator=g).to(args.device)
        relpos = torch.randint(MIN_REL - 1, MAX_REL + 1, (args.batch, length, 2 * length), generator=g)
        relpos = relpos.to(args.device)
        gather = partial(gather_logits, logits, relpos)
        one_hot = partial(one_hot_logits, logits, relpos)

        row = []
        with torch.no_grad():
            torch.testing.assert_close(gather(), one_hot())
            for fn in (gather, one_hot):
                ms = median_ms(fn, args.repeats, args.device)
                if args.device == "cuda":
                    torch.cuda.synchronize()
                    torch.cuda.reset_peak_memory_stats()
                    base = torch.cuda.memory_allocated()
                    fn()
                    torch.cuda.synchronize()
                    used = torch.cuda.max_memory_allocated() - base
                else:
                    with AllocationCounter() as counter:
                        fn()
                    used = counter.bytes
                row.append((ms, used))
        (g_ms, g_mem), (o_ms, o_mem) = row
        print(f"{length:>5}{g_ms:>11.1f}{o_ms:>12.1f}{o_ms / g_ms:>10.1f}{g_mem / 2**20:>12.1f}"
              f"{o_mem / 2**20:>13.1f}{o_mem / g_mem:>14.1f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    parser.add_argument("--lengths", type=int, nargs="+", default=[256, 512])
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--d-model", type=int, default=256)
    parser.add_argument("--heads", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=10)
    args = parser.parse_args()
    print(f"torch {torch.__version__}, device {args.device}, threads {torch.get_num_threads()}")
    bench_paths(args)
    bench_position_logits(args)


if __name__ == "__main__":
    main()
