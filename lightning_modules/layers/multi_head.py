"""The query, key and value projections of multi-head attention, as TG's and the Pushdown layers share them."""

from __future__ import annotations

import torch
from torch import Tensor, nn


class MultiHeadProjections(nn.Module):
    """Bias-free ``query``, ``key`` and ``value`` projections over ``n_heads`` heads of ``d_head`` dimensions.

    Subclasses add their position terms and output projection after these (the registration order, hence
    the parameter order of checkpoints and of initialisation, is the subclass's own). ``dropout`` is the
    layer's dropout rate, which each subclass applies where its official layer does.
    """

    def __init__(self, d_model: int, n_heads: int, dropout: float):
        super().__init__()
        if d_model % n_heads:
            raise ValueError(f"d_model={d_model} is not divisible by n_heads={n_heads}")
        self.n_heads = n_heads
        self.d_head = d_model // n_heads
        self.dropout = dropout
        self.query = nn.Linear(d_model, d_model, bias=False)
        self.key = nn.Linear(d_model, d_model, bias=False)
        self.value = nn.Linear(d_model, d_model, bias=False)
        self._fused: tuple[tuple[tuple[int, int], ...], Tensor] | None = None

    @torch.no_grad()
    def fused_projections(self) -> Tensor:
        """The query, key and value weights stacked [3 D, D]: one product projects a decoded token (incremental
        decoding on a CPU is bound by the number of operations). Cached; rebuilt when a weight changes."""
        weights = (self.query.weight, self.key.weight, self.value.weight)
        stamp = tuple((w.data_ptr(), w._version) for w in weights)
        if self._fused is None or self._fused[0] != stamp:
            self._fused = (stamp, torch.cat(weights))
        return self._fused[1]

    def _heads(self, x: Tensor) -> Tensor:
        """[..., T, D] -> [..., H, T, d]."""
        return x.view(*x.shape[:-1], self.n_heads, self.d_head).transpose(-3, -2)
