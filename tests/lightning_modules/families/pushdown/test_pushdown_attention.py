"""Pushdown attention: the block-causal gathered path equals the paper's Fig. 7 formulation (forward and
gradients, with and without the relative-position term), depths are clamped, relative positions are the
official j - i, and each position sees only its own tape row."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from lightning_modules.families.pushdown.attention import (
    PushdownSelfAttention,
    block_causal_attention,
    causal_mask,
    interleaved_sinusoids,
    materialised_depth_attention,
    skewed_relative_logits,
)


def random_case(batch=2, heads=3, length=7, d=8, vocab=5, max_depth=9, seed=0):
    """q, k, v, depth table, rel keys (r(-(T-1)) ... r(0)), tape, causal mask (batch 1 padded by 3)."""
    g = torch.Generator().manual_seed(seed)
    q, k, v = (torch.randn(batch, heads, length, d, generator=g, dtype=torch.float64, requires_grad=True)
               for _ in range(3))
    table = torch.randn(vocab, d, generator=g, dtype=torch.float64, requires_grad=True)
    rel_keys = torch.randn(heads, length, d, generator=g, dtype=torch.float64, requires_grad=True)
    tape = torch.randint(0, max_depth, (batch, length, length), generator=g).tril()
    lengths = torch.tensor([length, length - 3])[:batch]
    return q, k, v, table, rel_keys, tape, causal_mask(lengths, length)


def blocked(q, k, v, table, rel_keys, tape, mask, block=128):
    return block_causal_attention(q / math.sqrt(q.shape[-1]), k, v, mask, rel_keys, table, tape, block=block)


def assert_same_forward_and_gradients(got, want, inputs):
    torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)
    upstream = torch.randn_like(want)
    for a, b in zip(torch.autograd.grad(got, inputs, upstream), torch.autograd.grad(want, inputs, upstream),
                    strict=True):
        torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize(("seed", "length", "block"), [(0, 7, 128), (1, 7, 3), (2, 16, 4), (3, 13, 5), (4, 9, 1)])
def test_block_causal_equals_figure_7_forward_and_gradients(seed, length, block):
    # one block, T not divisible by the block (7/3, 13/5), divisible (16/4), one query per block; batch
    # row 1 is padded; max_depth 9 > vocab 5: clamped depths are part of the comparison
    q, k, v, table, rel_keys, tape, mask = random_case(length=length, seed=seed)
    assert_same_forward_and_gradients(blocked(q, k, v, table, None, tape, mask, block),
                                      materialised_depth_attention(q, k, v, table, tape, mask), (q, k, v, table))
    assert_same_forward_and_gradients(blocked(q, k, v, table, rel_keys, tape, mask, block),
                                      materialised_depth_attention(q, k, v, table, tape, mask, rel_keys),
                                      (q, k, v, table, rel_keys))


@pytest.mark.parametrize("block", [2, 128])
def test_relative_term_without_depth_equals_figure_7_with_a_zero_table(block):
    # the Base-LM path (rel keys, no depth table) against Fig. 7 whose depth embeddings are all zero
    q, k, v, _, rel_keys, tape, mask = random_case(length=7, seed=5)
    zeros = torch.zeros(1, q.shape[-1], dtype=q.dtype)
    assert_same_forward_and_gradients(blocked(q, k, v, None, rel_keys, None, mask, block),
                                      materialised_depth_attention(q, k, v, zeros, tape, mask, rel_keys),
                                      (q, k, v, rel_keys))


@pytest.mark.parametrize("block", [3, 128])
def test_mask_only_equals_sdpa_with_the_padding_mask(block):
    q, k, v, _, _, _, mask = random_case(length=8, seed=6)
    want = F.scaled_dot_product_attention(q, k, v, attn_mask=mask[:, None])
    assert_same_forward_and_gradients(blocked(q, k, v, None, None, None, mask, block), want, (q, k, v))


def test_block_causal_equals_figure_7_in_float32():
    q, k, v, table, rel_keys, tape, mask = (
        x.float().detach() if x.is_floating_point() else x
        for x in random_case(batch=2, heads=4, length=300, d=16, vocab=50, max_depth=60))
    torch.testing.assert_close(blocked(q, k, v, table, rel_keys, tape, mask),
                               materialised_depth_attention(q, k, v, table, tape, mask, rel_keys),
                               atol=1e-5, rtol=1e-5)


def test_depths_beyond_the_table_are_clamped_not_a_crash():
    q, k, v, table, _, tape, mask = random_case(vocab=5, max_depth=3)
    deep = tape.clone()
    deep[tape == 2] = 700  # far beyond the 5-row table: reads row 4
    at_last_row = tape.clone()
    at_last_row[tape == 2] = 4
    assert (deep == 700).any()
    torch.testing.assert_close(blocked(q, k, v, table, None, deep, mask, block=3),
                               blocked(q, k, v, table, None, at_last_row, mask, block=3))
    layer = PushdownSelfAttention(16, 2, 0.0, depth_vocab=50)
    x = torch.randn(1, 4, 16)
    out = layer(x, causal_mask(torch.tensor([4]), 4), torch.full((1, 4, 4), 1000))
    assert torch.isfinite(out).all()


@pytest.mark.parametrize("rows", [5, 2, 1])
def test_relative_position_term_is_official_key_minus_query(rows):
    # the last `rows` of 5 query positions, as for the last query block, against all 5 keys
    g = torch.Generator().manual_seed(3)
    length = 5
    q = torch.randn(2, 2, rows, 4, generator=g)
    rel_keys = torch.randn(2, length, 4, generator=g)  # row m: r(m - (T - 1))
    got = skewed_relative_logits(q, rel_keys)
    assert got.shape == (2, 2, rows, length)
    for r in range(rows):
        i = length - rows + r
        for j in range(i + 1):
            torch.testing.assert_close(got[:, :, r, j], (q[:, :, r] * rel_keys[:, length - 1 + j - i]).sum(-1))


def test_interleaved_sinusoids_layout():
    pos = torch.tensor([0.0, -3.0, 7.0])
    table = interleaved_sinusoids(pos, 6)
    for k in range(3):
        freq = 10000 ** (-2 * k / 6)
        torch.testing.assert_close(table[:, 2 * k], torch.sin(pos * freq))
        torch.testing.assert_close(table[:, 2 * k + 1], torch.cos(pos * freq))


def test_layer_equals_figure_7_across_query_blocks():
    # T = 150 spans two blocks of 128; the layer's projections fed to the materialised Eq. 6
    torch.manual_seed(1)
    layer = PushdownSelfAttention(16, 2, 0.0, depth_vocab=10).double()
    x = torch.randn(2, 150, 16, dtype=torch.float64)
    mask = causal_mask(torch.tensor([150, 131]), 150)
    tape = torch.randint(0, 12, (2, 150, 150)).tril()
    rel = layer._heads(layer.position(interleaved_sinusoids(torch.arange(-149, 1), 16).double()))
    want = materialised_depth_attention(layer._heads(layer.query(x)), layer._heads(layer.key(x)),
                                        layer._heads(layer.value(x)), layer.depth.weight, tape, mask, rel)
    want = layer.output(want.transpose(1, 2).reshape(x.shape))
    torch.testing.assert_close(layer(x, mask, tape), want, atol=1e-10, rtol=1e-10)


def test_layer_is_causal_and_position_i_reads_only_tape_row_i():
    torch.manual_seed(0)
    layer = PushdownSelfAttention(16, 2, 0.0, depth_vocab=10).eval()
    x = torch.randn(1, 6, 16)
    mask = causal_mask(torch.tensor([6]), 6)
    tape = torch.randint(0, 4, (1, 6, 6)).tril()
    out = layer(x, mask, tape)
    changed_tape = tape.clone()
    changed_tape[0, 4:] = 9  # rows 4 and 5 only
    changed_x = x.clone()
    changed_x[0, 5] = 0.0
    torch.testing.assert_close(layer(x, mask, changed_tape)[:, :4], out[:, :4])
    assert not torch.allclose(layer(x, mask, changed_tape)[:, 4:], out[:, 4:])
    torch.testing.assert_close(layer(changed_x, mask, tape)[:, :5], out[:, :5])


def test_plain_layer_has_no_depth_and_needs_no_tape():
    layer = PushdownSelfAttention(16, 2, 0.0, depth_vocab=None)
    assert not layer.is_pushdown and layer.depth is None
    out = layer(torch.randn(2, 3, 16), causal_mask(torch.tensor([3, 2]), 3))
    assert out.shape == (2, 3, 16)
    with pytest.raises(ValueError, match="stack tape"):
        PushdownSelfAttention(16, 2, 0.0, depth_vocab=4)(torch.randn(1, 3, 16), causal_mask(torch.tensor([3]), 3))
