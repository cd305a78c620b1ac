"""The query, key and value projections of multi-head attention, as TG's and the Pushdown layers share them."""

from __future__ import annotations

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

    def _heads(self, x: Tensor) -> Tensor:
        """[..., T, D] -> [..., H, T, d]."""
        return x.view(*x.shape[:-1], self.n_heads, self.d_head).transpose(-3, -2)
