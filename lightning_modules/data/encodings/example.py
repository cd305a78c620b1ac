"""``Example``: one encoded sequence of the TG family, sparse and computed once (numpy, no torch).

The attention structure is stored per query in CSR form (``attend_ptr``/``attend_key``/``attend_rel``),
which is what the TG rule produces naturally: a query attends to a handful of stack positions, so a
sequence costs O(N · stack depth) instead of the official library's dense per-chunk matrices. Dense
tensors are built only per batch and chunk (``batch.collate``).

A *causal* example (Transformer-XL) stores no lists: query i attends to every position j <= i, with
relpos i - j (or 0 without position information); chunk restriction is computed on the fly.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from lightning_modules.data.encodings.choe_charniak import TokenType

RELPOS_MODES = ("depth", "linear", "none")


def relative_positions(mode: str, query_pos, query_depth, key_pos, key_depth):
    """Relative position of a key seen from a query (scalars or numpy arrays).

    ``depth``: depth(i) - depth(j) (TG); ``linear``: i - j (TXL, and TG's "difference in linear positions"
    ablation); ``none``: 0 everywhere. A relpos that is constant over a query's keys adds the same term to
    all of its attention logits, which the softmax cancels: this *is* "no position information" (TG
    Table 2), without a separate code path in the network.
    """
    if mode == "depth":
        return query_depth - key_depth
    if mode == "linear":
        return query_pos - key_pos
    if mode == "none":
        return np.zeros_like(np.asarray(query_pos) - np.asarray(key_pos))
    raise ValueError(f"relpos must be one of {RELPOS_MODES}, not {mode!r}")


@dataclass(frozen=True, eq=False)
class Example:
    """An encoded sequence (after any transform); see the module docstring.

    tokens/labels are vocabulary ids (label 0 = nothing predicted); types are ``TokenType`` values
    (``CNT`` is TG's CNT1 or an untransformed closing NT); compose marks COMPOSE queries; word_index is the
    word a terminal token belongs to (-1 otherwise).
    """

    tokens: np.ndarray  # int64[N]
    labels: np.ndarray  # int64[N]
    types: np.ndarray  # int8[N]
    depth: np.ndarray  # int32[N]
    compose: np.ndarray  # bool[N]
    word_index: np.ndarray  # int32[N]
    attend_ptr: np.ndarray  # int64[N+1]
    attend_key: np.ndarray  # int32[nnz], ascending within a query
    attend_rel: np.ndarray  # int32[nnz], raw
    relpos: str  # the relpos mode the lists were built with
    causal: bool = False  # Transformer-XL: implicit causal attention, empty lists

    def __len__(self) -> int:
        return len(self.tokens)

    def attend(self, i: int) -> tuple[np.ndarray, np.ndarray]:
        """Keys (absolute positions, ascending) and raw relpos of query ``i`` over the whole sequence."""
        if self.causal:
            keys = np.arange(i + 1, dtype=np.int32)
            return keys, relative_positions(self.relpos, i, 0, keys, 0).astype(np.int32)
        lo, hi = self.attend_ptr[i], self.attend_ptr[i + 1]
        return self.attend_key[lo:hi], self.attend_rel[lo:hi]

    def stack_after(self, i: int) -> np.ndarray:
        """Positions that tokens after ``i`` may still attend to (ascending): TG's stack after token i.

        Read off the attend lists: a pushed STACK token attends to the stack plus itself, which is the
        stack after it; CNT2 is not pushed (drop itself); after a CNT1 (COMPOSE) the stack is what its CNT2
        sees, minus the CNT2. For a causal example it is every position <= i.
        """
        if self.causal:
            return np.arange(i + 1, dtype=np.int32)
        ttype = int(self.types[i])
        if ttype == TokenType.CNT2:
            return self.attend(i)[0][:-1]
        if ttype == TokenType.CNT:
            return self.attend(i + 1)[0][:-1]
        return self.attend(i)[0]
