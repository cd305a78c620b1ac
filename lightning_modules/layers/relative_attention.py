"""Transformer-XL relative multi-head attention over an arbitrary mask and relative-position matrix.

The score of query i for key j (keys = memory then chunk) is, per head,

    s_ij = [(q_i + u) · k_j + (q_i + v) · r(R_ij)] / sqrt(d_head)

with ``u = r_w_bias``, ``v = r_r_bias`` (per layer), and ``r(p)`` the sinusoidal encoding of relative
position p projected by a bias-free ``relative_keys`` linear layer (Dai et al. 2019; TG §2.2 generalises R to
any integer matrix, e.g. depth differences). Masked entries get -inf.

The position term is computed on the small table of the R = max_rel - min_rel + 1 possible positions,
``(q + v) · r_kᵀ`` -> [B, H, L, R], and *gathered* by ``index = max_rel - clip(R_ij)``. Like the official
model, a relative position below ``min_rel`` contributes 0 (the official clips to ``min_rel - 1``, one past
its table, whose one-hot row is empty); we append one zero column to the table for it.

Two attention paths share that score function and the same boolean mask:
  * ``dense``: ``F.scaled_dot_product_attention`` with the gathered position logits as an additive float bias
    (-inf where masked). Runs everywhere, supports backward and attention dropout; the reference. Under
    ``vmap`` (a seed group) the seeds fold into the batch of one ordinary SDPA call (``folded_attention``).
  * ``flex``: ``torch.nn.attention.flex_attention`` with a block mask built from the mask and a ``score_mod``
    that reads the position logits at the index, so no [B, H, L, M+L] bias is materialised. GPU path (on CPU,
    FlexAttention has a forward only). It cannot drop attention weights.
Query rows with no key to attend (padding) output zeros in both paths.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.nn.attention.flex_attention import BlockMask, flex_attention

from lightning_modules.layers.folded_attention import attention
from lightning_modules.layers.multi_head import MultiHeadProjections

_compiled_flex_attention = None

# FlexAttention's compiled (CUDA) kernel refuses heads of fewer dimensions (torch 2.11-2.13: "NYI: embedding
# dimension ... must be at least 16"); a config below it cannot take the flex path on any device.
FLEX_MIN_HEAD_DIM = 16


def fits_flex(d_model: int, n_heads: int) -> bool:
    """Whether heads of ``d_model / n_heads`` dimensions are wide enough for FlexAttention's kernel."""
    return d_model // n_heads >= FLEX_MIN_HEAD_DIM


def sinusoid_table(max_rel: int, min_rel: int, dim: int) -> Tensor:
    """Sinusoidal encodings of positions ``max_rel, max_rel-1, ..., min_rel`` (row r is position max_rel - r).

    As the official core: ``inv_freq = 10000^(-2k/dim)``, sines then cosines concatenated (not interleaved).
    """
    inv_freq = 1e4 ** (-torch.arange(0, dim, 2, dtype=torch.float64) / dim)
    positions = torch.arange(max_rel, min_rel - 1, -1, dtype=torch.float64)
    angles = positions[:, None] * inv_freq[None, :]
    return torch.cat([angles.sin(), angles.cos()], dim=-1).float()


def position_index(relpos: Tensor, min_rel: int, max_rel: int) -> Tensor:
    """Table row of each raw relative position: ``max_rel - clip(relpos, min_rel - 1, max_rel)``.

    Index ``R = max_rel - min_rel + 1`` (positions below ``min_rel``) selects the appended zero column.
    """
    return max_rel - relpos.clamp(min_rel - 1, max_rel)


@dataclass
class AttentionPattern:
    """Who attends to whom in one chunk, shared by all layers: built once per chunk.

    ``mask`` [B, L, K] bool (K = M + L, memory columns first), ``index`` [B, L, K] long (rows of the position
    table; ``None`` without position information), ``row_valid`` [B, L] (query has at least one key),
    ``block_mask`` (flex path only).
    """

    mask: Tensor
    index: Tensor | None
    row_valid: Tensor
    block_mask: BlockMask | None = None

    @classmethod
    def build(cls, attn_mask: Tensor, relpos: Tensor | None, min_rel: int, max_rel: int,
              flex: bool) -> AttentionPattern:
        mask = attn_mask.bool()
        index = None if relpos is None else position_index(relpos.long(), min_rel, max_rel)
        block_mask = block_mask_of(mask) if flex else None
        return cls(mask=mask, index=index, row_valid=mask.any(-1), block_mask=block_mask)


def block_mask_of(mask: Tensor, block_size: int = 128) -> BlockMask:
    """FlexAttention's block mask of a [B, L, K] boolean mask, built where the mask lives (the GPU in training:
    ``encodings.batch.Batch`` densifies its sparse attend lists on the device).

    One reduction counts the attended pairs of every (query block, key block) tile: an empty tile is skipped,
    a full one computed without ``mask_mod``, a partial one masked element-wise. This replaces
    ``create_block_mask``, which evaluates ``mask_mod`` over all B·L·K pairs (and needs compiling to be fast).
    """
    batch, length, keys = mask.shape
    n_q, n_kv = -(-length // block_size), -(-keys // block_size)
    padded = F.pad(mask, (0, n_kv * block_size - keys, 0, n_q * block_size - length))
    counts = padded.view(batch, n_q, block_size, n_kv, block_size).sum((2, 4), dtype=torch.int32)
    full = counts == block_size * block_size  # as create_block_mask: a tile cut by the sequence end is partial
    partial = (counts > 0) & ~full

    def blocks(chosen: Tensor) -> tuple[Tensor, Tensor]:
        """(number, indices first) of the chosen key blocks per query block: [B, 1, n_q], [B, 1, n_q, n_kv]."""
        order = torch.argsort((~chosen).to(torch.int8), dim=-1, stable=True).to(torch.int32)
        return chosen.sum(-1, dtype=torch.int32)[:, None], order[:, None]

    def mask_mod(b, h, q, kv):
        return mask[b, q, kv]

    kv_num, kv_idx = blocks(partial)
    full_num, full_idx = blocks(full)
    return BlockMask.from_kv_blocks(kv_num, kv_idx, full_num, full_idx, BLOCK_SIZE=block_size, mask_mod=mask_mod,
                                    seq_lengths=(length, keys))


def gather_position_logits(pos_logits: Tensor, index: Tensor) -> Tensor:
    """[B, H, L, R+1] logits per table row, [B, L, K] index -> [B, H, L, K] logits per (query, key)."""
    batch, heads, length, _ = pos_logits.shape
    expanded = index[:, None].expand(batch, heads, length, index.shape[-1])
    return torch.gather(pos_logits, -1, expanded)


def dense_attention(q: Tensor, k: Tensor, v: Tensor, pos_logits: Tensor | None, pattern: AttentionPattern,
                    scale: float, dropout_p: float = 0.0) -> Tensor:
    """SDPA with the gathered position logits as additive bias. q [B,H,L,d] (u added), k/v [B,H,K,d].

    ``pos_logits`` [B, H, L, R+1] is already scaled. Returns [B, H, L, d]; rows with no key give zeros.
    """
    q = q.to(v.dtype)  # under bf16 autocast adding u (an fp32 parameter) made q fp32: SDPA takes one dtype
    valid = pattern.row_valid[:, None, :, None]  # [B, 1, L, 1]
    keep = pattern.mask[:, None] | ~valid  # a row with no key attends everywhere, then is zeroed
    if pos_logits is None:
        bias = torch.zeros(keep.shape, dtype=q.dtype, device=q.device)
    else:
        bias = gather_position_logits(pos_logits, pattern.index)
    bias = bias.to(q.dtype).masked_fill(~keep, float("-inf"))
    out = attention(q, k, v, attn_mask=bias, dropout_p=dropout_p, scale=scale)  # SDPA; seeds folded under vmap
    return out * valid


def flex_attention_path(q: Tensor, k: Tensor, v: Tensor, pos_logits: Tensor | None,
                        pattern: AttentionPattern, scale: float, compiled: bool) -> Tensor:
    """FlexAttention: the block mask, and a ``score_mod`` adding ``pos_logits[b, h, q, index[b, q, kv]]``."""
    global _compiled_flex_attention
    if pattern.block_mask is None:
        raise ValueError("the attention pattern was built without a block mask (flex=False)")
    score_mod = None
    if pos_logits is not None:
        index = pattern.index

        def score_mod(score, b, h, q_idx, kv_idx):
            return score + pos_logits[b, h, q_idx, index[b, q_idx, kv_idx]]

    attend = flex_attention
    if compiled:
        if _compiled_flex_attention is None:
            # dynamic: chunks are trimmed to their longest sequence and beams grow a key per step, so shapes
            # change call to call; a static compile recompiled per shape and, past the recompile limit, fell
            # back to the unfused kernel that materialises every score (seen on an H100, 2026-11-24)
            _compiled_flex_attention = torch.compile(flex_attention, dynamic=True)
        attend = _compiled_flex_attention
    out = attend(q, k, v, score_mod=score_mod, block_mask=pattern.block_mask, scale=scale)
    return out * pattern.row_valid[:, None, :, None]


class RelativeMultiHeadAttention(MultiHeadProjections):
    """One set of attention parameters: Q/K/V (no bias), relative keys (no bias), u, v, output (with bias)."""

    def __init__(self, d_model: int, n_heads: int, dropout: float, relative: bool = True):
        super().__init__(d_model, n_heads, dropout)
        self.relative = relative
        if relative:
            self.relative_keys = nn.Linear(d_model, d_model, bias=False)
            self.r_w_bias = nn.Parameter(torch.empty(n_heads, self.d_head))
            self.r_r_bias = nn.Parameter(torch.empty(n_heads, self.d_head))
        self.output = nn.Linear(d_model, d_model, bias=True)

    def relative_key_table(self, table: Tensor, batch: int = 1) -> Tensor:
        """``relative_keys(table)`` per head: [B or 1, H, R, d].

        As the official model, dropout hits the sinusoid table (independently per example) while training.
        """
        table = table.to(self.relative_keys.weight.dtype).unsqueeze(0)
        if self.training and self.dropout > 0:
            table = F.dropout(table.expand(batch, *table.shape[1:]), self.dropout, training=True)
        return self._heads(self.relative_keys(table))

    def position_logits(self, q: Tensor, rel_keys: Tensor, scale: float) -> Tensor:
        """Scaled ``(q + v) · rel_keysᵀ`` with a zero column appended: [B, H, L, R+1].

        One table for the whole batch is one matmul per head over all B·L queries (a broadcast batched
        matmul is several times slower on CPU).
        """
        q = q + self.r_r_bias[:, None, :]
        if rel_keys.shape[0] == 1:
            batch, heads, length, d = q.shape
            folded = q.transpose(0, 1).reshape(heads, batch * length, d)
            logits = torch.matmul(folded, rel_keys[0].transpose(-1, -2))
            logits = logits.view(heads, batch, length, -1).transpose(0, 1)
        else:
            logits = torch.matmul(q, rel_keys.transpose(-1, -2))
        return F.pad(logits * scale, (0, 1))

    def forward(self, x: Tensor, memory: Tensor | None, pattern: AttentionPattern, table: Tensor | None,
                flex: bool = False, compiled_flex: bool = False) -> Tensor:
        """x [B, L, D], memory [B, M, D] or None -> [B, L, D]."""
        keys_in = x if memory is None else torch.cat([memory, x], dim=1)
        q = self._heads(self.query(x))
        k = self._heads(self.key(keys_in))
        v = self._heads(self.value(keys_in))
        return self.attend(q, k, v, pattern, table, flex, compiled_flex)

    def attend(self, q: Tensor, k: Tensor, v: Tensor, pattern: AttentionPattern, table: Tensor | None,
               flex: bool = False, compiled_flex: bool = False) -> Tensor:
        """Projected q [B, H, L, d] and k, v [B, H, K, d] (keys as ``pattern`` columns) -> [B, L, D].
        (Incremental decoding has its own batched form: ``TransformerXL.step``.)"""
        scale = 1.0 / math.sqrt(self.d_head)
        pos_logits = None
        if self.relative:
            pos_logits = self.position_logits(q, self.relative_key_table(table, q.shape[0]), scale)
            q = q + self.r_w_bias[:, None, :]
        if flex:
            if self.training and self.dropout > 0:
                raise ValueError("the flex attention path cannot drop attention weights; "
                                 "set attention_dropout=0 or use the dense path for training")
            out = flex_attention_path(q, k, v, pos_logits, pattern, scale, compiled_flex)
        else:
            dropout_p = self.dropout if self.training else 0.0
            out = dense_attention(q, k, v, pos_logits, pattern, scale, dropout_p)
        out = out.transpose(1, 2)
        return self.output(out.reshape(*out.shape[:2], -1))
