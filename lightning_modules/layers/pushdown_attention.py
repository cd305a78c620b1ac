"""Pushdown attention: causal self-attention whose keys carry the stack-tape depth (Murty et al. 2023, Eq. 6).

Per head, the score of query i for key j <= i is, as the official ``PushdownAttention`` layer computes it,

    s_ij = [q_i · k_j + q_i · r(j - i) + q_i · E[W_i[j]]] / sqrt(d_head)

with ``r(p)`` the sinusoid of relative position p (sines at even, cosines at odd dimensions, the official
layout) projected by a bias-free linear layer, ``W_i`` the depth tape row after token i (the tape is given:
row i is what query i sees, so an earlier position keeps the "stale" depths of its own prefix, §3.4) and
``E`` a per-layer depth embedding of size d_head shared by the heads. There are no global content or position
biases (u, v), as in the official layer. Without a tape (``depth_vocab=None``) it is the Base-LM attention.

**No [B, H, T, T, d] key tensor.** Fig. 7 adds ``E[W]`` to the keys and multiplies each query with its own
T x d key matrix. Since ``q_i · (k_j + E[w]) = q_i · k_j + (q_i · Eᵀ)[w]``, the depth term is the small
table ``q @ Eᵀ`` ([B, H, T, depth_vocab]) gathered by the tape: O(B·H·T·V·d + B·H·T²) instead of
O(B·H·T²·d) memory. The relative-position term is gathered the same way from ``q @ rᵀ`` over the T
distances (with the causal/padding mask folded into that gather). Both are added to ``q kᵀ`` inside one
``baddbmm`` (``attend``). The result equals the materialised formulation up to float rounding
(``materialised_depth_attention``, kept as the reference for the tests and the benchmark).

Cost (``benchmarks/pushdown_attention.py``): the bias needs a gradient, so ``attend`` computes the full
T x T score matrix, about 1.6-1.7x the time of PyTorch's fused causal kernel (which also skips the blocks
above the diagonal) on CPU; the depth gather itself adds little to the same algorithm without it.

**Deviation (documented):** depths >= ``depth_vocab`` are clamped to the last embedding. The official
``nn.Embedding(stack_type_vocab=50, ...)`` lookup has no clamp and fails on a depth of 50 or more.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn


def interleaved_sinusoids(positions: Tensor, dim: int) -> Tensor:
    """Sinusoidal encodings [len(positions), dim]: sin(p·f_k) at dimension 2k, cos(p·f_k) at 2k + 1.

    ``f_k = 10000^(-2k/dim)`` (the official ``sinusoidal_pos_embedding`` layout).
    """
    freq = torch.exp(torch.arange(0, dim, 2, dtype=torch.float32, device=positions.device)
                     * (-math.log(10000.0) / dim))
    angles = positions.to(torch.float32)[:, None] * freq[None, :]
    return torch.stack([angles.sin(), angles.cos()], dim=-1).flatten(1)


def causal_mask(lengths: Tensor, length: int) -> Tensor:
    """[B, T, T] bool: key j is visible to query i when j <= i and j is not padding."""
    pos = torch.arange(length, device=lengths.device)
    return (pos[None, :] <= pos[:, None])[None] & (pos[None, None, :] < lengths[:, None, None])


def _gather_rows(table_logits: Tensor, index: Tensor, mask: Tensor | None) -> Tensor:
    """``table_logits[b, h, i, index[b, i, j]]`` as [B, H, T, T]; -inf where ``mask`` is False.

    The mask costs nothing extra: masked entries read an appended -inf column. The index is shared by the
    heads (an expanded view, no copy).
    """
    batch, heads, length, columns = table_logits.shape
    if mask is not None:
        table_logits = F.pad(table_logits, (0, 1), value=float("-inf"))
        index = index.masked_fill(~mask, columns)
    return torch.gather(table_logits, -1, index[:, None].expand(batch, heads, length, index.shape[-1]))


def gathered_depth_logits(q: Tensor, depth_table: Tensor, tape: Tensor, mask: Tensor | None = None) -> Tensor:
    """``q_i · E[clamp(tape[i, j])]`` as [B, H, T, T]; q [B, H, T, d], E [V, d], tape [B, >=T, >=T] integer.

    One matmul with the V-row table, one gather by the clamped tape: no [.., T, T, d] tensor.
    """
    length = q.shape[2]
    table_logits = torch.matmul(q, depth_table.to(q.dtype).t())  # [B, H, T, V]
    index = tape[:, :length, :length].long().clamp(0, depth_table.shape[0] - 1)
    return _gather_rows(table_logits, index, mask)


def relative_position_logits(q: Tensor, rel_keys: Tensor, mask: Tensor | None = None) -> Tensor:
    """``q_i · r(j - i)`` as [B, H, T, T]; rel_keys [H, T, d] holds r(0), r(-1), ..., r(-(T-1)).

    Keys after the query (j > i) read r(0) unless masked.
    """
    batch, _, length, _ = q.shape
    table_logits = torch.matmul(q, rel_keys.transpose(-1, -2))  # [B, H, T, T]: column = distance i - j
    pos = torch.arange(length, device=q.device)
    distance = (pos[:, None] - pos[None, :]).clamp(min=0).expand(batch, length, length)
    return _gather_rows(table_logits, distance, mask)


def attend(q: Tensor, k: Tensor, v: Tensor, bias: Tensor, dropout_p: float = 0.0) -> Tensor:
    """``softmax(q kᵀ + bias) v`` with q already scaled and the mask in ``bias`` (-inf); [B, H, T, d].

    Written out rather than ``F.scaled_dot_product_attention``: with a bias that needs a gradient, SDPA
    leaves its fused CPU kernel for a slower generic path; here the bias is added inside the matmul
    (``baddbmm``) and autograd's softmax backward yields the bias gradient for free.
    """
    batch, heads, length, d_head = q.shape
    scores = torch.baddbmm(bias.reshape(batch * heads, length, -1), q.reshape(batch * heads, length, d_head),
                           k.reshape(batch * heads, -1, d_head).transpose(1, 2))
    weights = F.dropout(torch.softmax(scores, dim=-1), dropout_p, training=dropout_p > 0)
    return torch.bmm(weights, v.reshape(batch * heads, -1, d_head)).view(batch, heads, length, d_head)


def materialised_depth_attention(q: Tensor, k: Tensor, v: Tensor, depth_table: Tensor, tape: Tensor,
                                 mask: Tensor) -> Tensor:
    """The paper's Fig. 7: keys + E[tape] as a [B, H, T, T, d] tensor, one batched matvec per query.

    Reference only (tests, ``benchmarks/pushdown_attention.py``); clamps the tape like the gathered path.
    """
    length = q.shape[2]
    index = tape[:, :length, :length].long().clamp(0, depth_table.shape[0] - 1)
    keys = k.unsqueeze(2) + depth_table[index].unsqueeze(1)  # [B, H, T (dest), T (src), d]
    keys = keys / math.sqrt(k.shape[-1])
    scores = (q.unsqueeze(3) @ keys.transpose(-2, -1)).squeeze(3)
    scores = scores.masked_fill(~mask[:, None], float("-inf"))
    return torch.softmax(scores, dim=-1) @ v


class PushdownSelfAttention(nn.Module):
    """Multi-head causal self-attention with relative positions and, given ``depth_vocab``, the depth term.

    Parameters as the official layer: bias-free query, key, value, relative-position and output projections,
    and ``depth`` = ``nn.Embedding(depth_vocab, d_head)`` (Pushdown Layers only). Attention weights are
    dropped with ``dropout`` while training.
    """

    def __init__(self, d_model: int, n_heads: int, dropout: float, depth_vocab: int | None):
        super().__init__()
        if d_model % n_heads:
            raise ValueError(f"d_model={d_model} is not divisible by n_heads={n_heads}")
        self.n_heads = n_heads
        self.d_head = d_model // n_heads
        self.dropout = dropout
        self.query = nn.Linear(d_model, d_model, bias=False)
        self.key = nn.Linear(d_model, d_model, bias=False)
        self.value = nn.Linear(d_model, d_model, bias=False)
        self.position = nn.Linear(d_model, d_model, bias=False)
        self.output = nn.Linear(d_model, d_model, bias=False)
        self.depth = None if depth_vocab is None else nn.Embedding(depth_vocab, self.d_head)

    @property
    def is_pushdown(self) -> bool:
        return self.depth is not None

    def _heads(self, x: Tensor) -> Tensor:
        """[..., T, D] -> [..., H, T, d]."""
        return x.view(*x.shape[:-1], self.n_heads, self.d_head).transpose(-3, -2)

    def forward(self, x: Tensor, mask: Tensor, tape: Tensor | None = None) -> Tensor:
        """x [B, T, D], mask [B, T, T] bool (``causal_mask``), tape [B, >=T, >=T] integer -> [B, T, D]."""
        length = x.shape[1]
        q = self._heads(self.query(x)) * (1.0 / math.sqrt(self.d_head))  # scaling q scales all three terms
        k, v = self._heads(self.key(x)), self._heads(self.value(x))
        distances = -torch.arange(length, device=x.device)
        rel_keys = self._heads(self.position(interleaved_sinusoids(distances, x.shape[-1]).to(x.dtype)))
        bias = relative_position_logits(q, rel_keys, mask)
        if self.depth is not None:
            if tape is None:
                raise ValueError("a Pushdown Layer needs the stack tape")
            bias = bias + gathered_depth_logits(q, self.depth.weight, tape)
        out = attend(q, k, v, bias, self.dropout if self.training else 0.0)
        return self.output(out.transpose(1, 2).reshape(x.shape))
