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
O(B·H·T²·d) memory. The relative-position term is one matmul of q with the keys r(-(T-1)), ..., r(0) and a
Transformer-XL "rel shift" (a pad and a view). Both are added to ``q kᵀ`` inside one ``baddbmm``
(``attend``). The result equals the materialised formulation up to float rounding
(``materialised_depth_attention``, kept as the reference for the tests and the benchmark).

**Block-causal.** ``block_causal_attention`` takes the queries in blocks [a, b) of 128 and computes the
scores and both biases only against the keys [0, b): nothing above the diagonal block, about half the T x T
work at long T, as PyTorch's fused causal kernel skips it too. Autograd through plain ops; the saved
tensors are the per-block softmax weights and gather indices (about half a T x T each). The same scores
run as FlexAttention (the GPU path) or as one dense bias in ``score_function``.

Cost (``benchmarks/pushdown_attention.py``: forward + backward, fp32, one thread, B=1, H=4, d=64): the
depth term alone takes 1.1x / 0.9x / 1.1x the time of ``SDPA(is_causal=True)`` at T = 256 / 512 / 1024 (1.5x
to 2.0x when it computed the full T x T matrix); the relative-position term adds one more matmul of the size
of q kᵀ and two in the backward, so a whole Pushdown Layer takes 1.4x to 1.7x. Peak memory at T = 512 is
over 100x below Fig. 7's.

**Deviation (documented):** depths >= ``depth_vocab`` are clamped to the last embedding. The official
``nn.Embedding(stack_type_vocab=50, ...)`` lookup has no clamp and fails on a depth of 50 or more.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Protocol

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from lightning_modules.layers.multi_head import MultiHeadProjections

# decoding: stores a position's keys and values [N, H, 1, d], returns every cached position's [N, H, L, d]
Extend = Callable[[Tensor, Tensor], tuple[Tensor, Tensor]]


class AttentionPattern(Protocol):
    """A precomputed attention path (``score_function.PushdownPattern``: dense or flex) that a layer hands its
    projections to; declared here so this module does not import the one that builds on it."""

    def attend(self, q: Tensor, k: Tensor, v: Tensor, rel_keys: Tensor | None = None,
               depth_table: Tensor | None = None, dropout_p: float = 0.0) -> Tensor: ...


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


def skewed_relative_logits(q: Tensor, rel_keys: Tensor) -> Tensor:
    """``q_r · r(j - i)`` for the last n of L query positions (i = L - n + r) and keys j < L: [B, H, n, L].

    q [B, H, n, d]; rel_keys [H, L, d] holds r(-(L-1)), ..., r(-1), r(0). One matmul gives column c =
    distance L - 1 - c; padding each row by one column and reading the flat buffer with row stride L shifts
    row r left by n - 1 - r (Transformer-XL's "rel shift", here a pad and a view, no gather). Entries with
    j > i hold other rows' values: the caller masks them.
    """
    rows, keys = q.shape[-2], rel_keys.shape[-2]
    flat = F.pad(torch.matmul(q, rel_keys.transpose(-1, -2)), (0, 1)).flatten(-2)  # [B, H, n * (L + 1)]
    return flat[..., rows - 1:rows - 1 + rows * keys].unflatten(-1, (rows, keys))


def gathered_depth_logits(q: Tensor, depth_table: Tensor, index: Tensor) -> Tensor:
    """``q_r · E[index[b, r, j]]`` as [B, H, n, L], -inf where index == len(E); q [B, H, n, d], index [B, n, L].

    One matmul with the V-row table (plus a -inf column for masked keys), one gather shared by the heads (the
    index is an expanded view): no [.., T, T, d] tensor.
    """
    table_logits = F.pad(torch.matmul(q, depth_table.to(q.dtype).t()), (0, 1), value=float("-inf"))
    return torch.gather(table_logits, -1, index[:, None].expand(-1, q.shape[1], -1, -1))


def block_bias(q: Tensor, start: int, mask: Tensor, rel_keys: Tensor | None, depth_table: Tensor | None,
               tape: Tensor | None) -> Tensor:
    """Relative-position + depth logits (-inf where masked) of query rows [start, end) over keys [0, end).

    q [B, H, end - start, d]; mask [B, >=end, >=end]; rel_keys [H, >=end, d] ending with r(0); tape
    [B, >=end, >=end]. The mask is folded into the depth gather when there is one.
    """
    end = start + q.shape[2]
    visible = mask[:, start:end, :end]
    bias = None if rel_keys is None else skewed_relative_logits(q, rel_keys[:, rel_keys.shape[1] - end:])
    if depth_table is not None:
        vocab = depth_table.shape[0]
        index = tape[:, start:end, :end].long().clamp(0, vocab - 1).masked_fill(~visible, vocab)
        depth = gathered_depth_logits(q, depth_table, index)
        return depth if bias is None else bias + depth
    if bias is None:
        bias = q.new_zeros(q.shape[0], 1, end - start, end)
    return bias.masked_fill(~visible[:, None], float("-inf"))


def attend(q: Tensor, k: Tensor, v: Tensor, bias: Tensor, dropout_p: float = 0.0) -> Tensor:
    """``softmax(q kᵀ + bias) v`` with q already scaled and the mask in ``bias`` (-inf); [B, H, n, d].

    q [B, H, n, d], k and v [B, H, L, d], bias [B, H or 1, n, L]. Written out rather than
    ``F.scaled_dot_product_attention``: with a bias that needs a gradient, SDPA leaves its fused CPU kernel
    for a slower generic path; here the bias is added inside the matmul (``baddbmm``) and autograd's softmax
    backward yields the bias gradient for free.
    """
    batch, heads, rows, d_head = q.shape
    bias = bias.expand(batch, heads, rows, k.shape[2]).reshape(batch * heads, rows, -1)
    scores = torch.baddbmm(bias, q.reshape(batch * heads, rows, d_head), k.reshape(batch * heads, -1, d_head).mT)
    weights = F.dropout(torch.softmax(scores, dim=-1), dropout_p, training=dropout_p > 0)
    return torch.bmm(weights, v.reshape(batch * heads, -1, d_head)).view(batch, heads, rows, d_head)


def block_causal_attention(q: Tensor, k: Tensor, v: Tensor, mask: Tensor, rel_keys: Tensor | None = None,
                           depth_table: Tensor | None = None, tape: Tensor | None = None, block: int = 128,
                           dropout_p: float = 0.0) -> Tensor:
    """Eq. 6 attention [B, H, T, d], one query block [a, b) at a time against the keys [0, b) only.

    q (already scaled), k, v [B, H, T, d]; ``mask`` must be causal (``causal_mask``): nothing above the
    diagonal block is computed, neither scores nor biases, like a fused causal kernel.
    """
    q, k, v = (t.contiguous() for t in (q, k, v))
    outputs = []
    for start in range(0, q.shape[2], block):
        end = min(start + block, q.shape[2])
        q_block = q[:, :, start:end]
        bias = block_bias(q_block, start, mask, rel_keys, depth_table, tape)
        outputs.append(attend(q_block, k[:, :, :end], v[:, :, :end], bias, dropout_p))
    return torch.cat(outputs, dim=2)


def materialised_depth_attention(q: Tensor, k: Tensor, v: Tensor, depth_table: Tensor, tape: Tensor,
                                 mask: Tensor, rel_keys: Tensor | None = None) -> Tensor:
    """The paper's Fig. 7: keys + E[tape] as a [B, H, T, T, d] tensor, one batched matvec per query.

    With ``rel_keys`` ([H, T, d], r(-(T-1)) ... r(0)) the key of query i at j also gets r(j - i): all of Eq. 6
    materialised. Reference only (tests, ``benchmarks/pushdown_attention.py``); clamps the tape like
    ``block_bias``.
    """
    length = q.shape[2]
    index = tape[:, :length, :length].long().clamp(0, depth_table.shape[0] - 1)
    keys = k.unsqueeze(2) + depth_table[index].unsqueeze(1)  # [B, H, T (dest), T (src), d]
    if rel_keys is not None:
        pos = torch.arange(length, device=q.device)
        keys = keys + rel_keys[:, (length - 1 - pos[:, None] + pos[None, :]).clamp(max=length - 1)]
    keys = keys / math.sqrt(k.shape[-1])
    scores = (q.unsqueeze(3) @ keys.transpose(-2, -1)).squeeze(3)
    scores = scores.masked_fill(~mask[:, None], float("-inf"))
    return torch.softmax(scores, dim=-1) @ v


class PushdownSelfAttention(MultiHeadProjections):
    """Multi-head causal self-attention with relative positions and, given ``depth_vocab``, the depth term.

    Parameters as the official layer: bias-free query, key, value, relative-position and output projections,
    and ``depth`` = ``nn.Embedding(depth_vocab, d_head)`` (Pushdown Layers only). Attention weights are
    dropped with ``dropout`` while training.
    """

    def __init__(self, d_model: int, n_heads: int, dropout: float, depth_vocab: int | None):
        super().__init__(d_model, n_heads, dropout)
        self.position = nn.Linear(d_model, d_model, bias=False)
        self.output = nn.Linear(d_model, d_model, bias=False)
        self.depth = None if depth_vocab is None else nn.Embedding(depth_vocab, self.d_head)

    @property
    def is_pushdown(self) -> bool:
        return self.depth is not None

    def forward(self, x: Tensor, mask: Tensor, tape: Tensor | None = None,
                pattern: AttentionPattern | None = None) -> Tensor:
        """x [B, T, D], mask [B, T, T] bool (``causal_mask``), tape [B, >=T, >=T] integer -> [B, T, D].

        Without ``pattern`` the block loop (``block_causal_attention``); with one, its path (dense or flex,
        ``score_function``), which reads the mask and the tape from the pattern.
        """
        if self.depth is not None and tape is None and pattern is None:
            raise ValueError("a Pushdown Layer needs the stack tape")
        length = x.shape[1]
        q = self._heads(self.query(x)) * (1.0 / math.sqrt(self.d_head))  # scaling q scales all three terms
        k, v = self._heads(self.key(x)), self._heads(self.value(x))
        rel_keys = self.relative_keys(length, x)  # r(-(T-1)), ..., r(0)
        depth_table = None if self.depth is None else self.depth.weight
        dropout_p = self.dropout if self.training else 0.0
        if pattern is None:
            out = block_causal_attention(q, k, v, mask, rel_keys, depth_table, tape, dropout_p=dropout_p)
        else:
            out = pattern.attend(q, k, v, rel_keys, depth_table, dropout_p)
        return self.output(out.transpose(1, 2).reshape(x.shape))

    def relative_keys(self, length: int, like: Tensor) -> Tensor:
        """[H, length, d]: the projected r(-(length-1)), ..., r(0) (dtype and device of ``like``)."""
        sinusoids = interleaved_sinusoids(torch.arange(1 - length, 1, device=like.device), like.shape[-1])
        return self._heads(self.position(sinusoids.to(like.dtype))).contiguous()

    def step(self, x: Tensor, extend: Extend, rel_keys: Tensor, tape_row: Tensor | None) -> Tensor:
        """The newest position p of N sequences whose earlier keys and values are cached (decoding, no dropout).

        x [N, 1, D]; ``extend(k, v)`` stores the position's keys and values [N, H, 1, d] and returns every
        position's of each sequence, [N, H, p + 1, d] (``decoding.DecodingBuffers.extend_keys``); ``rel_keys``
        [H, >p, d] from ``relative_keys`` (ending with r(0)); ``tape_row`` [N, p + 1] the depth tape row of
        position p. Returns the output [N, 1, D]: equal to ``forward`` on the whole prefix, since a position's
        keys and values depend only on positions and tape rows up to its own. The relative-position term is
        one matmul per head (the table is shared by the N sequences: never expanded to N copies).
        """
        q = self._heads(self.query(x)) * (1.0 / math.sqrt(self.d_head))  # [N, H, 1, d]
        keys, values = extend(self._heads(self.key(x)), self._heads(self.value(x)))
        length = keys.shape[2]
        # column j: r(j - p), per head over the N sequences: [H, N, d] x [H, d, L] -> [N, H, L]
        bias = torch.bmm(q[:, :, 0].transpose(0, 1), rel_keys[:, rel_keys.shape[1] - length:].mT).transpose(0, 1)
        if self.depth is not None:
            if tape_row is None:
                raise ValueError("a Pushdown Layer needs the stack tape")
            table = torch.matmul(q[:, :, 0], self.depth.weight.to(q.dtype).t())  # [N, H, V]
            index = tape_row.long().clamp(0, self.depth.num_embeddings - 1)[:, None, :]
            bias = bias + torch.gather(table, -1, index.expand(-1, self.n_heads, -1))
        out = attend(q, keys, values, bias[:, :, None])
        return self.output(out.transpose(1, 2).reshape(x.shape))
