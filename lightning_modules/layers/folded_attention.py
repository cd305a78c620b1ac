"""Scaled dot-product attention that, under ``torch.func.vmap``, folds the vmapped (seed) axis into the batch axis.

A seed group (``lightning_modules.models.seed_stack``) runs S seeds' forward as one ``vmap`` over the seed axis
of their parameters. Under vmap, ``F.scaled_dot_product_attention`` goes through SDPA's own vmap rules, which have
no working backward through the fused kernels (torch 2.13): on the CPU the flash kernel is picked without a
batching rule and without a gradient for an additive bias ("not differentiable with respect to argument
'attn_mask'"); on CUDA the memory-efficient kernel's backward refused the vmapped log-sum-exp ("LSE is not
correctly aligned (strideH)", an H200, torch 2.11). The group therefore ran SDPA's math kernel, which keeps every
seed's [B, H, L, K] weights in float32.

``attention`` takes SDPA's arguments. Outside vmap it *is* ``F.scaled_dot_product_attention`` (the solo path is
unchanged). Under vmap it calls the custom operator ``synbench::folded_sdpa``, whose vmap rule moves the seed axis
next to the batch axis, reshapes [S, B, ...] to [S·B, ...] and calls ordinary SDPA on the folded tensors: the
group's attention is one ordinary attention over all seeds' rows, and because the vmap rule runs above the
ordinary autograd of the group's loss (which is differentiated outside the vmap), autograd records SDPA's own
fused backward on the folded tensors. So the kernel, forward and backward, is what SDPA picks for a solo batch of
S·B rows:

* CUDA: the memory-efficient kernel (flash when there is no bias), which has a gradient for the additive bias;
* CPU: the flash kernel when the bias needs no gradient; when it does (the Transformer-XL position bias depends
  on parameters) SDPA itself leaves the flash kernel, which has no bias gradient, for the math kernel, as the
  solo run does. Computing the bias gradient from the flash kernel's outputs would need its dropout mask, which
  it does not return, so it is not exact with attention dropout: the CPU keeps the math kernel there.

Attention dropout is SDPA's (``dropout_p`` passed through): one call over the S·B rows draws an independent mask
per row, which is ``vmap``'s ``randomness="different"`` (what the seed group uses); under ``"error"`` dropout
raises as vmap does, and ``"same"`` (one mask shared by the seeds) is refused, since a folded call cannot share
masks. Nested vmaps fold one level at a time. Autocast reaches the folded call as it reaches a solo one (bf16
attention under ``bf16-mixed``); it did not reach SDPA under SDPA's own vmap rules (the attention ran in fp32).
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor


def attention(q: Tensor, k: Tensor, v: Tensor, attn_mask: Tensor | None = None, dropout_p: float = 0.0,
              is_causal: bool = False, scale: float | None = None) -> Tensor:
    """``F.scaled_dot_product_attention``; under vmap the vmapped axis folds into the batch (module docstring)."""
    if not any(torch._C._functorch.is_batchedtensor(t) for t in (q, k, v, attn_mask) if t is not None):
        return F.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask, dropout_p=dropout_p,
                                              is_causal=is_causal, scale=scale)
    return folded_sdpa(q, k, v, attn_mask, dropout_p, is_causal, scale)


@torch.library.custom_op("synbench::folded_sdpa", mutates_args=())
def folded_sdpa(q: Tensor, k: Tensor, v: Tensor, attn_mask: Tensor | None, dropout_p: float, is_causal: bool,
                scale: float | None) -> Tensor:
    """SDPA as an operator with a vmap rule that folds the vmapped axis into the batch (``_fold``). Called on
    plain tensors (directly, not through ``attention``) it is SDPA, differentiated by recomputing it
    (``_backward``); ``attention`` only calls it on vmapped tensors, where the vmap rule runs instead."""
    return F.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask, dropout_p=dropout_p, is_causal=is_causal,
                                          scale=scale).clone()  # a custom op's output may not alias an input


@folded_sdpa.register_fake
def _(q: Tensor, k: Tensor, v: Tensor, attn_mask: Tensor | None, dropout_p: float, is_causal: bool,
      scale: float | None) -> Tensor:
    return q.new_empty(*q.shape[:-1], v.shape[-1])


def _setup(ctx: Any, inputs: tuple, output: Tensor) -> None:
    q, k, v, attn_mask, dropout_p, is_causal, scale = inputs
    if dropout_p > 0:  # recomputing would draw another mask
        raise RuntimeError("synbench::folded_sdpa on plain tensors cannot be differentiated with dropout; "
                           "call folded_attention.attention, which runs SDPA itself there")
    ctx.save_for_backward(q, k, v, attn_mask)
    ctx.options = (is_causal, scale)


def _backward(ctx: Any, grad: Tensor) -> tuple[Tensor | None, ...]:
    """Gradients of the plain-tensor call: SDPA recomputed and differentiated by its own backward."""
    q, k, v, attn_mask = ctx.saved_tensors
    is_causal, scale = ctx.options
    inputs = [t.detach().requires_grad_(need) for t, need in zip((q, k, v), ctx.needs_input_grad[:3], strict=True)]
    mask = attn_mask
    mask_grad = attn_mask is not None and attn_mask.is_floating_point() and ctx.needs_input_grad[3]
    if mask_grad:
        mask = attn_mask.detach().requires_grad_()
    with torch.enable_grad():
        out = F.scaled_dot_product_attention(*inputs, attn_mask=mask, is_causal=is_causal, scale=scale)
    wanted = [t for t in (*inputs, mask) if t is not None and t.requires_grad]
    grads = iter(torch.autograd.grad(out, wanted, grad))
    return (*(next(grads) if t.requires_grad else None for t in inputs), next(grads) if mask_grad else None,
            None, None, None)


folded_sdpa.register_autograd(_backward, setup_context=_setup)


def _fold(t: Tensor, dim: int | None, size: int, rank: int, batch: int) -> Tensor:
    """A vmapped input (``dim``: its vmapped axis, None when not vmapped) with that axis folded into the batch
    axis: physical [S, ...] -> [S·B, ...], the logical shape first padded to ``rank`` dimensions on the left
    (SDPA broadcasts a mask of fewer) and its batch axis expanded to ``batch``."""
    t = t.movedim(dim, 0) if dim is not None else t.expand(size, *t.shape)
    while t.dim() < rank + 1:
        t = t.unsqueeze(1)
    t = t.expand(size, batch, *t.shape[2:])
    return t.reshape(size * batch, *t.shape[2:])


def _vmap(info: Any, in_dims: tuple, q: Tensor, k: Tensor, v: Tensor, attn_mask: Tensor | None, dropout_p: float,
          is_causal: bool, scale: float | None) -> tuple[Tensor, int]:
    """The vmap rule: one SDPA call (through ``attention``, so an outer vmap folds in turn) over all rows."""
    if dropout_p > 0 and info.randomness != "different":
        if info.randomness == "error":
            raise RuntimeError("vmap: called random operation while in randomness error mode (attention dropout); "
                               "use randomness='different'")
        raise RuntimeError("folded attention draws one dropout mask per vmapped row: randomness='same' "
                           "cannot be folded; use randomness='different'")
    size = info.batch_size
    logical = (q.shape if in_dims[0] is None else q.movedim(in_dims[0], 0).shape[1:])
    rank = max(len(logical), 3)  # a query without a batch axis gets one of size 1
    batch = logical[0] if len(logical) >= 3 else 1
    folded = [None if t is None else _fold(t, d, size, rank, batch)
              for t, d in zip((q, k, v, attn_mask), in_dims[:4], strict=True)]
    # the rule runs with only this level's batching excluded: its random ops would still go through vmap's
    # randomness check (which refuses "different" masks on unbatched tensors), so that is excluded too
    with torch._C._ExcludeDispatchKeyGuard(torch._C.DispatchKeySet(torch._C.DispatchKey.FuncTorchVmapMode)):
        out = attention(*folded, dropout_p=dropout_p, is_causal=is_causal, scale=scale)
    return out.reshape(size, *logical[:-1], out.shape[-1]), 0


folded_sdpa.register_vmap(_vmap)
