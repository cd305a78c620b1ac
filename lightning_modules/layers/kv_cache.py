"""A key/value cache for decoding many hypotheses that share prefixes: one row per decoded token.

A beam search grows hypotheses that share their prefixes. Each decoded token's keys and values (per layer
and attention function) are written once into a row of this pool; a hypothesis is the list of rows of its
positions. Extending a hypothesis writes one new row; selecting the beam's survivors (reordering by their
origins) copies nothing — the survivors keep pointing at the rows they share. Rows nobody can attend to any
more are dropped by ``compact``, which moves only the rows still needed (the decoder calls it between words,
when the pool has grown well past what is live).

A row holds a token's key and value side by side, every attention function's rows one block of a layer, so
writing a step's new tokens is one slice copy per layer and reading the attended keys of a batch (each query
its own attention function's) one ``index_select`` per layer (decoding small batches on a CPU is bound by the
number of tensor operations, not by their size).
"""

from __future__ import annotations

import torch
from torch import Tensor


class KeyValuePool:
    """Keys and values ``[n_layers, n_fns, rows, 2, H, d]`` of decoded tokens, allocated row by row."""

    def __init__(self, n_layers: int, n_fns: int, n_heads: int, d_head: int, capacity: int = 256,
                 dtype: torch.dtype = torch.float32, device: torch.device | str = "cpu"):
        self.data = torch.empty((n_layers, n_fns, max(1, capacity), 2, n_heads, d_head), dtype=dtype,
                                device=device)
        self.size = 0
        self._allocated: tuple[Tensor, int] | None = None  # the last ``allocate``'s rows and their first

    @property
    def capacity(self) -> int:
        return self.data.shape[2]

    @property
    def device(self) -> torch.device:
        return self.data.device

    def allocate(self, count: int) -> Tensor:
        """Rows for ``count`` new tokens (long [count], consecutive); the storage doubles when full
        (amortised O(1))."""
        needed = self.size + count
        if needed > self.capacity:
            grown = self.data.new_empty((*self.data.shape[:2], max(needed, 2 * self.capacity),
                                         *self.data.shape[3:]))
            grown[:, :, : self.size] = self.data[:, :, : self.size]
            self.data = grown
        rows = torch.arange(self.size, needed, device=self.device)
        self._allocated = (rows, self.size)
        self.size = needed
        return rows

    def write(self, layer: int, rows: Tensor, kv: Tensor) -> None:
        """Store every attention function's k, v ``kv`` [B, n_fns, 2, H, d] of the tokens at ``rows`` [B] (the
        rows the last ``allocate`` returned, consecutive, are written as one slice)."""
        store = self.data[layer]
        if self._allocated is not None and rows is self._allocated[0]:
            store[:, self._allocated[1] : self._allocated[1] + len(rows)] = kv.transpose(0, 1)
        else:
            store[:, rows] = kv.transpose(0, 1)

    def key_index(self, key_rows: Tensor, fn: Tensor | None) -> Tensor:
        """The flat index [B·K] that ``gather`` reads: rows ``key_rows`` [B, K] (entries < 0 read row 0: the
        caller masks them) of each query's attention function ``fn`` [B] (None: the first). Valid until the
        next ``allocate`` or ``compact``."""
        index = key_rows.clamp(min=0)
        if fn is not None:
            index = index + (fn * self.capacity)[:, None]
        return index.flatten()

    def gather(self, layer: int, index: Tensor) -> Tensor:
        """k, v [B·K, 2, H, d] of layer ``layer`` at a ``key_index``: one ``index_select``."""
        store = self.data[layer]
        return store.view(-1, *store.shape[2:]).index_select(0, index)

    def compact(self, live: Tensor) -> Tensor:
        """Keep only the rows ``live`` (long, distinct), moved to the front in that order; returns the map
        old row -> new row (-1 for a dropped row) for the callers' row lists."""
        remap = torch.full((self.size,), -1, dtype=torch.long, device=self.device)
        remap[live] = torch.arange(len(live), device=self.device)
        self.data[:, :, : len(live)] = self.data[:, :, live]
        self.size, self._allocated = len(live), None
        return remap
