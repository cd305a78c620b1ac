"""Pushdown attention (Eq. 6) as one score function, run by FlexAttention or evaluated densely.

The score of query i for key j is ``q_i · k_j`` plus two logits that FlexAttention's ``score_mod`` adds
(q is already scaled by 1/sqrt(d_head), so both are too):
  * relative position: ``rel[b, h, i, j] = q_i · r(j - i)``, the skewed [B, H, T, T] product of
    ``attention.skewed_relative_logits`` (above the diagonal it holds other rows' values: masked);
  * depth: ``depth[b, h, i, W_i[j]]``, with ``depth = q @ Eᵀ`` the small [B, H, T, V] table of every query
    against the V depth embeddings and ``W_i[j]`` the tape row of query i (clamped to V - 1, as the block loop
    does): the depth term is gathered by the tape inside the kernel, never materialised as [B, H, T, T, d] (Fig. 7)
    nor as a [B, H, T, T] bias.

Two paths share ``score_function`` and the causal mask (``PushdownPattern``):
  * ``flex``: ``flex_attention`` with the mask as a block mask (tiles above the diagonal skipped, the diagonal
    tiles masked element-wise) and the score function as ``score_mod``; compiled on CUDA. It cannot drop
    attention weights, and FlexAttention has no backward on CPU: a GPU path.
  * ``dense``: the same score function evaluated on broadcast (b, h, q, kv) index tensors, giving the
    [B, H, T, T] bias of ``attention.attend``: runs and trains everywhere; it checks the flex path on CPU.
The model's default path stays ``attention.block_causal_attention`` (``blocks``); all three are equal up to
float rounding (``tests/lightning_modules/families/pushdown/test_pushdown_flex.py``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import Tensor
from torch.nn.attention.flex_attention import BlockMask, flex_attention

from lightning_modules.families.pushdown.attention import attend, skewed_relative_logits
from lightning_modules.layers.relative_attention import block_mask_of

ScoreMod = Callable[[Tensor, Tensor, Tensor, Tensor, Tensor], Tensor]

_compiled_flex_attention = None


@dataclass
class PushdownPattern:
    """Who attends to whom and through which depth, built once per forward and shared by the layers.

    ``mask`` [B, T, T] bool (``attention.causal_mask``); ``depth_index`` [B, T, T] int32, the tape clamped to
    the depth table (None without Pushdown Layers); ``block_mask`` for the flex path (None: dense);
    ``flex_kernel``: ``flex_attention`` itself (eager) or compiled (``compiled_flex_attention``, CUDA).
    """

    mask: Tensor
    depth_index: Tensor | None
    block_mask: BlockMask | None = None
    flex_kernel: Callable[..., Tensor] = flex_attention

    @classmethod
    def build(cls, mask: Tensor, tape: Tensor | None, depth_vocab: int | None, flex: bool,
              compiled: bool = False) -> PushdownPattern:
        """From the causal mask [B, T, T] and the tape [B, >=T, >=T] (None, or ``depth_vocab`` None: no depth)."""
        length = mask.shape[-1]
        index = None
        if tape is not None and depth_vocab is not None:
            index = tape[:, :length, :length].clamp(0, depth_vocab - 1).to(torch.int32).contiguous()
        return cls(mask=mask, depth_index=index, block_mask=block_mask_of(mask) if flex else None,
                   flex_kernel=compiled_flex_attention() if flex and compiled else flex_attention)

    @property
    def flex(self) -> bool:
        return self.block_mask is not None

    def attend(self, q: Tensor, k: Tensor, v: Tensor, rel_keys: Tensor | None = None,
               depth_table: Tensor | None = None, dropout_p: float = 0.0) -> Tensor:
        """Eq. 6 attention [B, H, T, d] by this pattern's path; q (already scaled), k, v [B, H, T, d].

        ``rel_keys`` [H, >=T, d] ending with r(0) (None: no position term); ``depth_table`` [V, d] (None: no
        depth term, a Base-LM layer).
        """
        length = q.shape[2]
        rel = None if rel_keys is None else skewed_relative_logits(q, rel_keys[:, rel_keys.shape[1] - length:])
        depth = None
        if depth_table is not None:
            if self.depth_index is None:
                raise ValueError("a Pushdown Layer needs the stack tape")
            depth = depth_logits(q, depth_table)
        score_mod = score_function(rel, depth, self.depth_index)
        if not self.flex:
            return attend(q, k, v, dense_scores_bias(score_mod, self.mask, q.shape[1], q.dtype), dropout_p)
        if dropout_p > 0:
            raise ValueError("the flex attention path cannot drop attention weights; set dropout=0 or use "
                             "attention=blocks|dense for training")
        return self.flex_kernel(q, k, v, score_mod=score_mod, block_mask=self.block_mask, scale=1.0)


def depth_logits(q: Tensor, depth_table: Tensor) -> Tensor:
    """``q · E[w]`` for every query and every depth w: [B, H, T, V] (one small matmul)."""
    return torch.matmul(q, depth_table.to(q.dtype).t())


def score_function(rel: Tensor | None, depth: Tensor | None, depth_index: Tensor | None) -> ScoreMod | None:
    """The ``score_mod`` adding ``rel[b, h, q, kv]`` and ``depth[b, h, q, depth_index[b, q, kv]]`` (either may be
    None); None when there is nothing to add."""
    if rel is None and depth is None:
        return None

    def score_mod(score: Tensor, b: Tensor, h: Tensor, q: Tensor, kv: Tensor) -> Tensor:
        if rel is not None:
            score = score + rel[b, h, q, kv]
        if depth is not None:
            score = score + depth[b, h, q, depth_index[b, q, kv]]
        return score

    return score_mod


def dense_scores_bias(score_mod: ScoreMod | None, mask: Tensor, heads: int, dtype: torch.dtype) -> Tensor:
    """``score_mod`` evaluated on all (b, h, q, kv) at once, from a zero score: [B, H or 1, T, T], -inf where
    ``mask`` [B, T, T] is False (the additive bias of ``attend``)."""
    batch, length, keys = mask.shape
    bias = torch.zeros((1, 1, 1, 1), dtype=dtype, device=mask.device)
    if score_mod is not None:
        arange = lambda n: torch.arange(n, device=mask.device)  # noqa: E731
        bias = score_mod(bias, arange(batch)[:, None, None, None], arange(heads)[None, :, None, None],
                         arange(length)[None, None, :, None], arange(keys)[None, None, None, :])
    return bias.expand(batch, -1, length, keys).masked_fill(~mask[:, None], float("-inf"))


def compiled_flex_attention() -> Callable[..., Tensor]:
    """``torch.compile(flex_attention, dynamic=True)``, compiled once per process (as the TG path: sentence
    batches change length call to call, and a static compile recompiles per shape up to its limit).

    On CPU (torch 2.13) inductor fails to build the dynamic kernel of the depth gather (``CppCompileError``,
    an undeclared ``cur_kvSplitSize``); a static compile works there. The model compiles on CUDA only."""
    global _compiled_flex_attention
    if _compiled_flex_attention is None:
        _compiled_flex_attention = torch.compile(flex_attention, dynamic=True)
    return _compiled_flex_attention
