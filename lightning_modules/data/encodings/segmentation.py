"""Segmentation and recurrence (TG §2.2): chunks of L tokens, a memory of M slots carried between them.

As the official library, L must equal M. Chunk c covers positions [c·L, (c+1)·L); ``mem_pos[c, m]`` is
the absolute position whose layer inputs sit in memory slot m while chunk c runs (-1 = empty), in the
official slot order. Two memory modes:

- ``plain`` (Transformer-XL): the memory of chunk c+1 is chunk c. Stack items older than one chunk
  become unreachable.
- ``smart`` (``gather_into_new_memory``, the paper's setting): after chunk c, the TG stack as seen from
  its last token is gathered into the next memory, newest in the last slot, skipping items that are
  neither in chunk c nor in its memory, and dropping the oldest when more than M remain.

``mem_src[c, m]`` says how the network builds the memory of chunk c+1 by one gather: an index into
``concat(memory of chunk c [M slots], chunk c [L positions])``, -1 = empty. It is the official
``smartmem_mem_from_mem`` / ``smartmem_mem_from_seq`` 0/1 matrices as indices.

A chunk's attention is each query's attend list restricted to keys held in the chunk or its memory;
this equals the official dense masks on every tree of the PTB sample (checked against the C++ library).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from lightning_modules.data.encodings.example import Example, relative_positions

MEMORY_MODES = ("plain", "smart")


@dataclass(frozen=True, eq=False)
class Segmentation:
    """Chunk starts and memory bookkeeping of one ``Example`` (see the module docstring)."""

    length: int
    memory: str
    starts: np.ndarray  # int64[C]
    mem_pos: np.ndarray  # int32[C, M]
    mem_src: np.ndarray  # int64[C, M]

    @property
    def memory_length(self) -> int:
        return self.mem_pos.shape[1]

    def __len__(self) -> int:
        return len(self.starts)


def segment(example: Example, length: int, memory_length: int | None = None,
            memory: str = "smart") -> Segmentation:
    """Split an example into chunks of ``length`` with a memory of ``memory_length`` (= length) slots."""
    memory_length = length if memory_length is None else memory_length
    if length < 1:
        raise ValueError(f"segment length must be positive, not {length}")
    if memory_length != length:
        raise ValueError(f"memory length ({memory_length}) must equal segment length ({length})")
    if memory not in MEMORY_MODES:
        raise ValueError(f"memory must be one of {MEMORY_MODES}, not {memory!r}")
    n, size = len(example), length
    count = max(1, -(-n // size))
    starts = np.arange(count, dtype=np.int64) * size
    mem_pos = np.full((count, size), -1, dtype=np.int32)
    mem_src = np.full((count, size), -1, dtype=np.int64)
    for c, start in enumerate(starts.tolist()):
        end = min(start + size, n)
        if memory == "plain":
            mem_src[c, : end - start] = size + np.arange(end - start)
            new_pos = np.full(size, -1, dtype=np.int32)
            new_pos[: end - start] = np.arange(start, end)
        else:
            new_pos, mem_src[c] = _gather_stack(example.stack_after(end - 1), start, mem_pos[c])
        if c + 1 < count:
            mem_pos[c + 1] = new_pos
    return Segmentation(length, memory, starts, mem_pos, mem_src)


def _gather_stack(stack: np.ndarray, start: int, current: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Smart memory: (positions, sources) of the next memory from the stack at the chunk's last token."""
    size = len(current)
    in_chunk = stack >= start
    slot = np.minimum(np.searchsorted(current, stack), size - 1)  # ``current`` is ascending, -1s first
    in_memory = ~in_chunk & (current[slot] == stack)
    kept = in_chunk | in_memory
    positions = stack[kept][-size:]
    sources = np.where(in_chunk, size + stack - start, slot)[kept][-size:]
    new_pos = np.full(size, -1, dtype=np.int32)
    new_src = np.full(size, -1, dtype=np.int64)
    if len(positions):
        new_pos[size - len(positions) :] = positions
        new_src[size - len(sources) :] = sources
    return new_pos, new_src


class ChunkAttention(NamedTuple):
    """Flat attention entries of one chunk, ordered by query then key position.

    query: index in the chunk; column: in [memory slots | chunk positions]; key: absolute position;
    relpos: raw relative position.
    """

    query: np.ndarray  # int64
    column: np.ndarray  # int64
    key: np.ndarray  # int64
    relpos: np.ndarray  # int64


def chunk_attention(example: Example, seg: Segmentation, chunk: int) -> ChunkAttention:
    """The attention of chunk ``chunk``: attend lists restricted to keys in the chunk or its memory."""
    size, start = seg.length, int(seg.starts[chunk])
    end = min(start + size, len(example))
    mem_pos = seg.mem_pos[chunk]
    if example.causal:
        return _causal_attention(example, start, end, mem_pos)
    lo, hi = example.attend_ptr[start], example.attend_ptr[end]
    query = np.repeat(np.arange(end - start, dtype=np.int64), np.diff(example.attend_ptr[start : end + 1]))
    key = example.attend_key[lo:hi].astype(np.int64)
    rel = example.attend_rel[lo:hi].astype(np.int64)
    in_chunk = key >= start
    slot = np.minimum(np.searchsorted(mem_pos, key), size - 1)
    kept = in_chunk | (mem_pos[slot] == key)
    column = np.where(in_chunk, size + key - start, slot)
    return ChunkAttention(query[kept], column[kept], key[kept], rel[kept])


def _causal_attention(example: Example, start: int, end: int, mem_pos: np.ndarray) -> ChunkAttention:
    size, n_q = len(mem_pos), end - start
    slots = np.flatnonzero(mem_pos >= 0)
    mem_q = np.repeat(np.arange(n_q), len(slots))
    mem_col = np.tile(slots, n_q)
    seq_q, seq_k = np.tril_indices(n_q)
    query = np.concatenate([mem_q, seq_q])
    column = np.concatenate([mem_col, size + seq_k])
    key = np.concatenate([mem_pos[mem_col].astype(np.int64), start + seq_k])
    order = np.argsort(query, kind="stable")  # memory keys (older) before chunk keys for each query
    query, column, key = query[order], column[order], key[order]
    rel = relative_positions(example.relpos, start + query, 0, key, 0)
    return ChunkAttention(query, column, key, rel.astype(np.int64))
