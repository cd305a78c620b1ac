"""``folded_attention.attention``: under vmap one SDPA call over all seeds' rows, equal to a per-seed loop of plain
SDPA in outputs and gradients; outside vmap plain SDPA; attention dropout SDPA's own, one mask per row."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch.func import vmap

from lightning_modules.layers.folded_attention import attention, folded_sdpa
from tests.tolerances import FLOAT32

B, H, L, K, D = 2, 2, 5, 7, 4


def inputs(seeds: int, mask: str, generator: torch.Generator) -> tuple[list[torch.Tensor], torch.Tensor | None,
                                                                       int | None]:
    """q, k, v [S, B, H, *, D] needing gradients, the mask of kind ``mask`` and its vmapped axis."""
    q, k, v = (torch.randn(seeds, B, H, n, D, generator=generator).requires_grad_() for n in (L, K, K))
    if mask == "none":
        return [q, k, v], None, None
    if mask == "bool":
        keep = torch.rand(seeds, B, 1, L, K, generator=generator) > 0.4
        keep[..., 0] = True  # every query attends somewhere
        return [q, k, v], keep, 0
    if mask == "bias":  # an additive bias that needs a gradient, as the Transformer-XL position bias
        bias = torch.randn(seeds, B, H, L, K, generator=generator)
        bias[..., 1] = float("-inf")
        return [q, k, v], bias.requires_grad_(), 0
    return [q, k, v], torch.randn(B, 1, L, K, generator=generator).requires_grad_(), None  # one bias, all seeds


@pytest.mark.parametrize("seeds", [1, 3])
@pytest.mark.parametrize("mask", ["none", "bool", "bias", "shared bias"])
def test_vmapped_attention_equals_a_per_seed_loop_of_sdpa(seeds, mask):
    (q, k, v), attn_mask, mask_dim = inputs(seeds, mask, torch.Generator().manual_seed(seeds))
    differentiable = [q, k, v] + ([attn_mask] if attn_mask is not None and attn_mask.requires_grad else [])

    def one(q, k, v, attn_mask):
        return attention(q, k, v, attn_mask=attn_mask, scale=0.3)

    out = vmap(one, in_dims=(0, 0, 0, mask_dim))(q, k, v, attn_mask)
    weights = torch.randn(out.shape, generator=torch.Generator().manual_seed(7))
    grads = torch.autograd.grad(out, differentiable, weights)
    per_seed = [attn_mask if mask_dim is None else attn_mask[s] for s in range(seeds)]
    loop = torch.stack([F.scaled_dot_product_attention(q[s], k[s], v[s], attn_mask=per_seed[s], scale=0.3)
                        for s in range(seeds)])
    want = torch.autograd.grad(loop, differentiable, weights)
    torch.testing.assert_close(out, loop, **FLOAT32)
    for name, got, expected in zip(["q", "k", "v", "bias"], grads, want, strict=False):
        torch.testing.assert_close(got, expected, **FLOAT32, msg=name)


def test_one_fused_kernel_call_runs_all_seeds_forward_and_backward():
    """Without a bias gradient the CPU picks SDPA's flash kernel; under vmap it runs once for all seeds, forward
    and backward (SDPA's own vmap rule had no batching rule for it: a per-seed fallback loop, and no backward)."""
    (q, k, v), keep, _ = inputs(3, "bool", torch.Generator().manual_seed(0))
    with torch.profiler.profile() as prof:
        out = vmap(lambda q, k, v, m: attention(q, k, v, attn_mask=m))(q, k, v, keep)
        out.sum().backward()
    calls = {e.key: e.count for e in prof.key_averages()}
    assert calls.get("aten::_scaled_dot_product_flash_attention_for_cpu") == 1
    assert calls.get("aten::_scaled_dot_product_flash_attention_for_cpu_backward") == 1


def test_outside_vmap_it_is_sdpa_itself():
    (q, k, v), bias, _ = inputs(1, "bias", torch.Generator().manual_seed(0))
    out = attention(q[0], k[0], v[0], attn_mask=bias[0], scale=0.5)
    assert torch.equal(out, F.scaled_dot_product_attention(q[0], k[0], v[0], attn_mask=bias[0], scale=0.5))
    assert "folded" not in out.grad_fn.name().lower()  # SDPA's own backward node, as before


def test_attention_dropout_is_sdpas_with_one_mask_per_seed():
    q = torch.randn(3, B, H, L, D, generator=torch.Generator().manual_seed(0))
    same = q[:1].expand(3, *q.shape[1:])  # every seed gets the same input: only the dropout masks differ
    torch.manual_seed(5)
    out = vmap(lambda q: attention(q, q, q, dropout_p=0.5), randomness="different")(same)
    torch.manual_seed(5)  # the same draw as SDPA over the folded batch of all seeds' rows
    folded = F.scaled_dot_product_attention(*(same.reshape(3 * B, H, L, D),) * 3, dropout_p=0.5)
    torch.testing.assert_close(out, folded.view(3, B, H, L, D), rtol=0, atol=0)
    assert not torch.equal(out[0], out[1]) and not torch.equal(out[1], out[2])
    with pytest.raises(RuntimeError, match="randomness error mode"):
        vmap(lambda q: attention(q, q, q, dropout_p=0.5))(same)
    with pytest.raises(RuntimeError, match="randomness='same' cannot be folded"):
        vmap(lambda q: attention(q, q, q, dropout_p=0.5), randomness="same")(same)
    plain = vmap(lambda q: attention(q, q, q, dropout_p=0.0))(same)  # no dropout: any randomness mode
    torch.testing.assert_close(plain[1], F.scaled_dot_product_attention(same[1], same[1], same[1]), **FLOAT32)


def test_nested_vmaps_and_queries_without_a_batch_axis_fold():
    x = torch.randn(2, 3, B, H, L, D, generator=torch.Generator().manual_seed(0))
    nested = vmap(vmap(lambda q: attention(q, q, q, is_causal=True)))(x)
    torch.testing.assert_close(nested, F.scaled_dot_product_attention(x, x, x, is_causal=True), **FLOAT32)
    rows = torch.randn(3, L, D, generator=torch.Generator().manual_seed(1))  # per seed [L, D]: no batch axis
    torch.testing.assert_close(vmap(lambda q: attention(q, q, q))(rows),
                               F.scaled_dot_product_attention(rows, rows, rows), **FLOAT32)


def test_the_operator_on_plain_tensors_is_differentiable_sdpa():
    generator = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(1, 2, 3, 4, generator=generator, dtype=torch.float64).requires_grad_() for _ in range(3))
    bias = torch.randn(1, 2, 3, 3, generator=generator, dtype=torch.float64).requires_grad_()
    assert torch.autograd.gradcheck(lambda q, k, v, b: folded_sdpa(q, k, v, b, 0.0, False, None), (q, k, v, bias))
    torch.library.opcheck(folded_sdpa, (q, k, v, bias, 0.0, False, None))
    with pytest.raises(RuntimeError, match="cannot be differentiated with dropout"):
        folded_sdpa(q, k, v, None, 0.5, False, None)


def test_autocast_reaches_the_folded_call_as_a_solo_one():
    q = torch.randn(3, B, H, L, D, generator=torch.Generator().manual_seed(0))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = vmap(lambda q: attention(q, q, q))(q)
        loop = torch.stack([F.scaled_dot_product_attention(q[s], q[s], q[s]) for s in range(3)])
    assert out.dtype == loop.dtype == torch.bfloat16
    torch.testing.assert_close(out, loop, rtol=1.6e-2, atol=1e-2)  # bf16's resolution: kernels may round apart


def test_gradients_taken_inside_the_vmap_equal_a_per_seed_loop():
    """``vmap(grad(f))`` (torch.func's gradient inside the vmap, not the group's outer autograd) differentiates
    the operator by its own backward."""
    generator = torch.Generator().manual_seed(0)
    q, bias = torch.randn(3, B, H, L, D, generator=generator), torch.randn(3, B, H, L, L, generator=generator)

    def loss(sdpa):
        return lambda q, b: sdpa(q, q, q, attn_mask=b).square().sum()

    got = vmap(torch.func.grad(loss(attention), argnums=(0, 1)))(q, bias)
    loop = [torch.func.grad(loss(F.scaled_dot_product_attention), argnums=(0, 1))(q[s], bias[s]) for s in range(3)]
    for got_one, want in zip(got, zip(*loop, strict=True), strict=True):
        torch.testing.assert_close(got_one, torch.stack(want), **FLOAT32)
