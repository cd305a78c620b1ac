"""Throughput of TG attention-mask + relpos construction, against a naive dense construction, same run.

Input: the first 1,000 trees of the PTB sample (cleaned, POS dropped, word terminals; ~81 TG tokens each).
For L = M = 256 and 1024, smart memory, batches of 16 sentences stepping through their chunks:

- ``sparse``: ``tg.encode`` (tree walk -> CSR attend lists, once per sentence; cacheable across epochs) +
  ``segment`` + ``collate`` per chunk: everything a loader ships to the device. O(attended pairs).
- ``dense``: the same plus materialising ``attn_mask`` [B,L,M+L] bool and ``relpos`` [B,L,M+L] long on
  the CPU, i.e. what a CPU-trained model consumes. O(B·L·(M+L)) zero-fill, memory-bound.
- ``naive``: the official library's approach in Python: per sentence and chunk, fill dense L×(M+L) mask
  and relpos matrices with a per-token loop over the attend lists of a TGState walk, memory bookkeeping
  by dictionary.

Times are best of ``--repeats`` runs, per 1,000 sentences. For reference (not measured here), the official
C++ library takes about 0.21 s (L=256) and 27 s (L=1024) per 1,000 sentences on this machine kind.
Run: ``PYTHONPATH=. python benchmarks/encoding.py [--repeats 3]``.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
import torch

from lightning_modules.data.encodings.batch import collate_chunk
from lightning_modules.data.encodings.choe_charniak import ActionVocab, choe_charniak
from lightning_modules.data.encodings.segmentation import segment
from lightning_modules.data.tree import clean, drop_pos_tags, read_bracketed
from lightning_modules.families.tg import encoding as tg
from lightning_modules.families.tg.encoding import TGState

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "ptb_nltk_sample" / "combined"
BATCH = 16


def sparse(actions, vocab, length: int, densify: bool) -> int:
    examples = [tg.encode(a, vocab) for a in actions]
    segs = [segment(ex, length, length, "smart") for ex in examples]
    pairs = 0
    for b in range(0, len(examples), BATCH):
        exs, sgs = examples[b : b + BATCH], segs[b : b + BATCH]
        for c in range(max(len(s) for s in sgs)):
            batch = collate_chunk(exs, sgs, c)
            pairs += len(batch.attn_index)
            if densify:
                batch.attn_mask, batch.relpos  # noqa: B018 -- materialise the dense tensors
    return pairs


def naive(actions, vocab, length: int) -> int:
    """Dense per-chunk matrices filled token by token, smart memory tracked in dictionaries."""
    pairs = 0
    for a in actions:
        tokens, _, types, _ = tg.transform(a, vocab)
        state = TGState()
        steps, stacks = [], []  # each token's attention, and the stack after it (as the C++ keeps)
        for t in types.tolist():
            steps.append(state.step(t))
            stacks.append(list(state.stack))
        memory: dict[int, int] = {}  # position -> memory slot
        for start in range(0, len(tokens), length):
            mask = np.full((length, 2 * length), 0, dtype=np.int32)  # written, as Eigen's Zero() does
            rel = np.full((length, 2 * length), 0, dtype=np.int32)
            end = min(start + length, len(tokens))
            for i in range(start, end):
                step = steps[i]
                for key, r in zip(step.keys, step.relpos):
                    if key >= start:
                        col = length + key - start
                    elif key in memory:
                        col = memory[key]
                    else:
                        continue
                    mask[i - start, col] = 1
                    rel[i - start, col] = r
                    pairs += 1
            kept = [p for p in stacks[end - 1] if p >= start or p in memory][-length:]
            memory = {p: length - len(kept) + k for k, p in enumerate(kept)}
    return pairs


def best_of(repeats: int, fn, *args) -> tuple[float, int]:
    times, result = [], 0
    for _ in range(repeats):
        t0 = time.perf_counter()
        result = fn(*args)
        times.append(time.perf_counter() - t0)
    return min(times), result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--sentences", type=int, default=1000)
    args = parser.parse_args()
    torch.set_num_threads(1)
    files = sorted(DATA.glob("wsj_*.mrg"))
    trees = [drop_pos_tags(clean(t)) for f in files for _, t in read_bracketed(f)][: args.sentences]
    actions = [choe_charniak(t) for t in trees]
    vocab = ActionVocab.build(actions)
    per = 1000 / len(actions)
    tokens = sum(len(a) + a.types.count(4) for a in actions)
    print(f"{len(actions)} PTB-sample sentences, {tokens} TG tokens; times per 1,000 sentences, best of "
          f"{args.repeats}; torch threads 1")
    t_encode, _ = best_of(args.repeats, lambda: [tg.encode(a, vocab) for a in actions])
    print(f"  tg.encode alone (sparse, once per sentence): {t_encode * per:.3f} s")
    print(f"{'L=M':>6} {'sparse':>9} {'dense':>9} {'naive':>9} {'naive/sparse':>13} {'naive/dense':>12}"
          " pairs")
    for length in (256, 1024):
        t_sparse, pairs = best_of(args.repeats, sparse, actions, vocab, length, False)
        t_dense, _ = best_of(args.repeats, sparse, actions, vocab, length, True)
        t_naive, naive_pairs = best_of(max(1, args.repeats - 1), naive, actions, vocab, length)
        assert pairs == naive_pairs, (pairs, naive_pairs)
        print(f"{length:>6} {t_sparse * per:>8.3f}s {t_dense * per:>8.3f}s {t_naive * per:>8.3f}s "
              f"{t_naive / t_sparse:>12.1f}x {t_naive / t_dense:>11.1f}x {pairs}")
    print("sparse is O(attended pairs), independent of L for sentences shorter than L; dense and naive "
          "grow with L·(M+L) per chunk (zero-filling the matrices).")


if __name__ == "__main__":
    main()
