"""Relative attention: position table, gather vs the official formulations, dense vs naive vs flex."""

from __future__ import annotations

import math

import pytest
import torch
from tg_golden import duplicate_closings, golden_chunks, stack_compose

from lightning_modules.layers.relative_attention import (
    AttentionPattern,
    RelativeMultiHeadAttention,
    gather_position_logits,
    position_index,
    sinusoid_table,
)

pytestmark = pytest.mark.filterwarnings("ignore:flex_attention called without torch.compile")


def make_attention(d_model=16, n_heads=2, relative=True, seed=0) -> RelativeMultiHeadAttention:
    torch.manual_seed(seed)
    attn = RelativeMultiHeadAttention(d_model, n_heads, dropout=0.0, relative=relative).double().eval()
    for p in attn.parameters():
        torch.nn.init.normal_(p, std=0.4)
    return attn


def naive_attention(attn, x, memory, mask, relpos, table, min_rel, max_rel):
    """Explicit matmuls and a masked softmax; the relative *encodings* are looked up per (i, j) pair."""
    B, L, D = x.shape
    H, d = attn.n_heads, attn.d_head
    keys_in = x if memory is None else torch.cat([memory, x], 1)
    q = (x @ attn.query.weight.T).view(B, L, H, d)
    k = (keys_in @ attn.key.weight.T).view(B, -1, H, d)
    v = (keys_in @ attn.value.weight.T).view(B, -1, H, d)
    scores = torch.einsum("bihd,bjhd->bhij", q + attn.r_w_bias, k) if attn.relative else \
        torch.einsum("bihd,bjhd->bhij", q, k)
    if attn.relative:
        r_keys = (table.to(x.dtype) @ attn.relative_keys.weight.T).view(-1, H, d)
        r_keys = torch.cat([r_keys, torch.zeros(1, H, d, dtype=x.dtype)])  # below min_rel: no position term
        idx = max_rel - relpos.clamp(min_rel - 1, max_rel)
        per_pair = r_keys[idx]  # [B, L, K, H, d]
        scores = scores + torch.einsum("bihd,bijhd->bhij", q + attn.r_r_bias, per_pair)
    scores = scores / math.sqrt(d)
    scores = scores.masked_fill(~mask[:, None], float("-inf"))
    weights = torch.softmax(scores, -1).nan_to_num(0.0)
    out = torch.einsum("bhij,bjhd->bihd", weights, v).reshape(B, L, D)
    return out @ attn.output.weight.T + attn.output.bias


def random_case(B=3, L=7, M=5, D=16, min_rel=-1, max_rel=6, p=0.5, seed=1, dtype=torch.float64):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(B, L, D, generator=g, dtype=dtype)
    memory = torch.randn(B, M, D, generator=g, dtype=dtype) if M else None
    mask = torch.rand(B, L, M + L, generator=g) < p
    mask[0, 2] = False  # an all-padding query row
    relpos = torch.randint(min_rel - 3, max_rel + 3, (B, L, M + L), generator=g)  # exercises clipping
    return x, memory, mask, relpos


def run(attn, x, memory, mask, relpos, min_rel, max_rel, flex=False):
    table = sinusoid_table(max_rel, min_rel, x.shape[-1]) if attn.relative else None
    pattern = AttentionPattern.build(mask, relpos if attn.relative else None, min_rel, max_rel, flex)
    return attn(x, memory, pattern, table, flex=flex)


def test_sinusoid_table_rows_are_positions_max_to_min():
    table = sinusoid_table(62, -1, 8)
    assert table.shape == (64, 8)
    inv_freq = torch.tensor([1e4 ** (-k / 8) for k in (0, 2, 4, 6)], dtype=torch.float64)
    for row, pos in ((0, 62), (62, 0), (63, -1)):
        expected = torch.cat([torch.sin(pos * inv_freq), torch.cos(pos * inv_freq)]).float()
        torch.testing.assert_close(table[row], expected)


def test_position_index_clips_and_maps_below_min_to_the_zero_column():
    relpos = torch.tensor([-5, -2, -1, 0, 62, 63, 100])
    assert position_index(relpos, -1, 62).tolist() == [64, 64, 63, 62, 0, 0, 0]


def test_gather_equals_the_official_one_hot_einsum():
    g = torch.Generator().manual_seed(0)
    B, H, L, K, R = 2, 3, 5, 9, 64
    logits = torch.randn(B, H, L, R, generator=g, dtype=torch.float64)
    relpos = torch.randint(-4, 70, (B, L, K), generator=g)
    # Official: clip to [min - 1, max] = [-2, 62], index = 62 - relpos, one_hot over R classes, einsum.
    one_hot = torch.nn.functional.one_hot(62 - relpos.clamp(-2, 62), num_classes=R + 1)[..., :R].double()
    official = torch.einsum("bhtT,btsT->bhts", logits, one_hot)
    ours = gather_position_logits(torch.nn.functional.pad(logits, (0, 1)), position_index(relpos, -1, 62))
    torch.testing.assert_close(ours, official, rtol=0, atol=0)


def relative_shift(logits: torch.Tensor, attention_length: int) -> torch.Tensor:
    """The official ``_rel_shift_inner`` on [..., T_q, T_v + T_q] (reshape trick), written in torch."""
    *lead, tq, total = logits.shape
    assert total == tq + attention_length
    x = logits.reshape(*lead, total, tq)[..., 1:, :]
    return x.reshape(*lead, tq, total - 1)[..., :attention_length]


def test_relative_shift_golden_vector():
    logits = torch.tensor([[-3, -2, -1, 0, 1, 2]] * 3)
    assert relative_shift(logits, 3).tolist() == [[0, 1, 2], [-1, 0, 1], [-2, -1, 0]]


def test_explicit_relpos_mem_plus_i_minus_j_equals_txl_relative_shift():
    """TXL: the table covers T+M down to -T+1 and rel-shift picks row (T - i + j); our gather with the
    explicit relative position M + i - j (memory columns first) must give the same logits."""
    g = torch.Generator().manual_seed(3)
    B, H, T, M = 2, 2, 5, 4
    R = 2 * T + M  # positions T+M, ..., -T+1
    logits = torch.randn(B, H, T, R, generator=g, dtype=torch.float64)
    shifted = relative_shift(logits, T + M)
    i = torch.arange(T)[:, None]
    j = torch.arange(T + M)[None, :]
    relpos = (M + i - j).expand(B, T, T + M)
    gathered = gather_position_logits(torch.nn.functional.pad(logits, (0, 1)),
                                      position_index(relpos, -T + 1, T + M))
    torch.testing.assert_close(gathered, shifted, rtol=0, atol=0)


@pytest.mark.parametrize("relative", [True, False])
@pytest.mark.parametrize("memory_length", [0, 5])
def test_dense_matches_naive_forward_and_gradients(relative, memory_length):
    attn = make_attention(relative=relative)
    x, memory, mask, relpos = random_case(M=memory_length)
    x.requires_grad_(True)
    if memory is not None:
        memory.requires_grad_(True)
    ours = run(attn, x, memory, mask, relpos, -1, 6)
    ref = naive_attention(attn, x, memory, mask, relpos, sinusoid_table(6, -1, 16), -1, 6)
    torch.testing.assert_close(ours, ref, rtol=1e-5, atol=1e-5)
    weights = torch.randn_like(ours)
    inputs = [x] + ([memory] if memory is not None else []) + list(attn.parameters())
    g_ours = torch.autograd.grad((ours * weights).sum(), inputs)
    g_ref = torch.autograd.grad((ref * weights).sum(), inputs)
    for a, b in zip(g_ours, g_ref):
        assert torch.isfinite(a).all()
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("relative", [True, False])
def test_dense_and_flex_agree_on_random_masks_with_memory(relative):
    attn = make_attention(relative=relative).float()
    x, memory, mask, relpos = random_case(B=2, L=37, M=37, seed=5, dtype=torch.float32, max_rel=40)
    with torch.no_grad():
        dense = run(attn, x, memory, mask, relpos, -1, 40)
        flex = run(attn, x, memory, mask, relpos, -1, 40, flex=True)
    torch.testing.assert_close(flex, dense, rtol=1e-5, atol=1e-5)


def test_dense_and_flex_agree_on_tg_masks():
    trees = [
        "<s> (S (NP the hungry cat NP) (VP meows VP) S)",
        "<s> (S (NP (NP the cat NP) (PP on (NP the mat NP) PP) NP) (VP sat (ADVP quietly ADVP) VP) . S)",
    ]
    encoded = [stack_compose(duplicate_closings(t)) for t in trees]
    T = max(m.shape[0] for m, _, _ in encoded)
    mask = torch.zeros(len(trees), T, T, dtype=torch.bool)
    relpos = torch.zeros(len(trees), T, T, dtype=torch.long)
    for b, (m, r, _) in enumerate(encoded):
        mask[b, : m.shape[0], : m.shape[0]] = m
        relpos[b, : m.shape[0], : m.shape[0]] = r
    attn = make_attention(d_model=32, n_heads=4).float()
    x = torch.randn(len(trees), T, 32)
    with torch.no_grad():
        dense = run(attn, x, None, mask, relpos, -1, 62)
        flex = run(attn, x, None, mask, relpos, -1, 62, flex=True)
    torch.testing.assert_close(flex, dense, rtol=1e-5, atol=1e-5)


def test_dense_and_flex_agree_on_golden_chunks_with_smart_memory():
    attn = make_attention(d_model=16, n_heads=2).float()
    for chunk in golden_chunks(batch=2):
        x = torch.randn(2, 4, 16)
        memory = torch.randn(2, 4, 16)
        with torch.no_grad():
            dense = run(attn, x, memory, chunk["attn_mask"], chunk["relpos"], -1, 62)
            flex = run(attn, x, memory, chunk["attn_mask"], chunk["relpos"], -1, 62, flex=True)
        torch.testing.assert_close(flex, dense, rtol=1e-5, atol=1e-5)


def test_all_padding_rows_give_zero_attention_and_no_nan():
    attn = make_attention().float()
    x, memory, mask, relpos = random_case(B=2, L=6, M=6, dtype=torch.float32)
    mask[1] = False  # a whole padding sequence
    x.requires_grad_(True)
    dense = run(attn, x, memory, mask, relpos, -1, 6)
    bias_only = attn.output.bias.expand(6, -1)  # zero attention, then the output projection's bias
    torch.testing.assert_close(dense[1], bias_only)
    torch.testing.assert_close(dense[0, 2], attn.output.bias)
    dense.sum().backward()
    assert torch.isfinite(x.grad).all()
    with torch.no_grad():
        flex = run(attn, x.detach(), memory, mask, relpos, -1, 6, flex=True)
    assert torch.isfinite(flex).all()
    torch.testing.assert_close(flex, dense.detach(), rtol=1e-5, atol=1e-5)


def test_outputs_do_not_depend_on_masked_keys():
    """Jacobian of each query's output w.r.t. every key input: zero wherever the mask says no (except the
    query's own chunk input, which always feeds its query vector)."""
    attn = make_attention()
    x, memory, mask, relpos = random_case(B=1, L=6, M=4)
    M = memory.shape[1]

    def f(keys_in):
        return run(attn, keys_in[:, M:], keys_in[:, :M], mask, relpos, -1, 6)

    keys_in = torch.cat([memory, x], 1)
    jac = torch.autograd.functional.jacobian(f, keys_in, vectorize=True)  # [1, L, D, 1, M+L, D]
    dependence = jac[0, :, :, 0].abs().sum(dim=(1, 3)) > 0  # [L, M+L]
    allowed = mask[0].clone()
    allowed[torch.arange(6), M + torch.arange(6)] = True
    assert not (dependence & ~allowed).any()
    assert dependence[mask[0]].all()
