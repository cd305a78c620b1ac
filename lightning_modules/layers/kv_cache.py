"""A key/value cache for decoding many hypotheses that share prefixes: one row per decoded token.

A beam search grows hypotheses that share their prefixes. Each decoded token's keys and values (per layer
and attention function) are written once into a row of this pool; a hypothesis is the list of rows of its
positions. Extending a hypothesis writes one new row; selecting the beam's survivors (reordering by their
origins) copies nothing — the survivors keep pointing at the rows they share. Rows nobody can attend to any
more are dropped by ``compact``, which moves only the rows still needed (the decoder calls it between words,
when the pool has grown well past what is live).
"""

from __future__ import annotations

import torch
from torch import Tensor


class KeyValuePool:
    """Keys and values ``[n_layers, n_fns, rows, H, d]`` of decoded tokens, allocated row by row."""

    def __init__(self, n_layers: int, n_fns: int, n_heads: int, d_head: int, capacity: int = 256,
                 dtype: torch.dtype = torch.float32, device: torch.device | str = "cpu"):
        shape = (n_layers, n_fns, max(1, capacity), n_heads, d_head)
        self.keys = torch.empty(shape, dtype=dtype, device=device)
        self.values = torch.empty(shape, dtype=dtype, device=device)
        self.size = 0

    @property
    def capacity(self) -> int:
        return self.keys.shape[2]

    def allocate(self, count: int) -> Tensor:
        """Rows for ``count`` new tokens (long [count]); the storage doubles when full (amortised O(1))."""
        needed = self.size + count
        if needed > self.capacity:
            grown = max(needed, 2 * self.capacity)
            self.keys = _resized(self.keys, grown, self.size)
            self.values = _resized(self.values, grown, self.size)
        rows = torch.arange(self.size, needed, device=self.keys.device)
        self.size = needed
        return rows

    def write(self, layer: int, fn: int, rows: Tensor, k: Tensor, v: Tensor) -> None:
        """Store k, v [B, H, d] of the tokens at ``rows`` [B]."""
        self.keys[layer, fn, rows] = k
        self.values[layer, fn, rows] = v

    def gather(self, layer: int, fn: int, key_rows: Tensor) -> tuple[Tensor, Tensor]:
        """k, v [B, H, K, d] at ``key_rows`` [B, K] (entries < 0 read row 0: the caller masks them)."""
        rows = key_rows.clamp(min=0)
        k = self.keys[layer, fn][rows]  # [B, K, H, d]
        v = self.values[layer, fn][rows]
        return k.transpose(1, 2), v.transpose(1, 2)

    def compact(self, live: Tensor) -> Tensor:
        """Keep only the rows ``live`` (long, distinct), moved to the front in that order; returns the map
        old row -> new row (-1 for a dropped row) for the callers' row lists."""
        remap = torch.full((self.size,), -1, dtype=torch.long, device=self.keys.device)
        remap[live] = torch.arange(len(live), device=self.keys.device)
        self.keys[:, :, : len(live)] = self.keys[:, :, live]
        self.values[:, :, : len(live)] = self.values[:, :, live]
        self.size = len(live)
        return remap


def _resized(storage: Tensor, rows: int, used: int) -> Tensor:
    grown = storage.new_empty((*storage.shape[:2], rows, *storage.shape[3:]))
    grown[:, :, :used] = storage[:, :, :used]
    return grown
