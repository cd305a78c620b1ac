"""Pushdown attention: the gathered depth term equals the paper's Fig. 7 formulation (forward and gradients),
depths are clamped, relative positions are the official j - i, and each position sees only its own tape row."""

from __future__ import annotations

import math

import pytest
import torch

from lightning_modules.layers.pushdown_attention import (
    PushdownSelfAttention,
    attend,
    causal_mask,
    gathered_depth_logits,
    interleaved_sinusoids,
    materialised_depth_attention,
    relative_position_logits,
)


def random_case(batch=2, heads=3, length=7, d=8, vocab=5, max_depth=9, seed=0):
    g = torch.Generator().manual_seed(seed)
    q, k, v = (torch.randn(batch, heads, length, d, generator=g, dtype=torch.float64, requires_grad=True)
               for _ in range(3))
    table = torch.randn(vocab, d, generator=g, dtype=torch.float64, requires_grad=True)
    tape = torch.randint(0, max_depth, (batch, length, length), generator=g).tril()
    lengths = torch.tensor([length, length - 3])[:batch]
    return q, k, v, table, tape, causal_mask(lengths, length)


def gathered(q, k, v, table, tape, mask):
    q = q / math.sqrt(q.shape[-1])
    return attend(q, k, v, gathered_depth_logits(q, table, tape, mask))


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_gather_equals_figure_7_forward_and_gradients(seed):
    # max_depth 9 > vocab 5: clamped depths are part of the comparison
    q, k, v, table, tape, mask = random_case(seed=seed)
    out_fig7 = materialised_depth_attention(q, k, v, table, tape, mask)
    out_gather = gathered(q, k, v, table, tape, mask)
    torch.testing.assert_close(out_gather, out_fig7, atol=1e-5, rtol=1e-5)
    upstream = torch.randn_like(out_fig7)
    grads_fig7 = torch.autograd.grad(out_fig7, (q, k, v, table), upstream)
    grads_gather = torch.autograd.grad(out_gather, (q, k, v, table), upstream)
    for a, b in zip(grads_gather, grads_fig7, strict=True):
        torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-5)


def test_gather_equals_figure_7_in_float32():
    q, k, v, table, tape, mask = (x.float().detach() if x.is_floating_point() else x
                                  for x in random_case(batch=2, heads=4, length=33, d=16, vocab=50, max_depth=60))
    torch.testing.assert_close(gathered(q, k, v, table, tape, mask),
                               materialised_depth_attention(q, k, v, table, tape, mask), atol=1e-5, rtol=1e-5)


def test_depths_beyond_the_table_are_clamped_not_a_crash():
    q, k, v, table, tape, mask = random_case(vocab=5, max_depth=3)
    deep = tape.clone()
    deep[tape == 2] = 700  # far beyond the 5-row table: reads row 4
    at_last_row = tape.clone()
    at_last_row[tape == 2] = 4
    assert (deep == 700).any()
    torch.testing.assert_close(gathered_depth_logits(q, table, deep), gathered_depth_logits(q, table, at_last_row))
    layer = PushdownSelfAttention(16, 2, 0.0, depth_vocab=50)
    x = torch.randn(1, 4, 16)
    out = layer(x, causal_mask(torch.tensor([4]), 4), torch.full((1, 4, 4), 1000))
    assert torch.isfinite(out).all()


def test_relative_position_term_is_official_key_minus_query():
    g = torch.Generator().manual_seed(3)
    q = torch.randn(2, 2, 5, 4, generator=g)
    rel_keys = torch.randn(2, 5, 4, generator=g)  # row m: r(-m)
    mask = causal_mask(torch.tensor([5, 3]), 5)
    got = relative_position_logits(q, rel_keys, mask)
    for b in range(2):
        for i in range(5):
            for j in range(5):
                if mask[b, i, j]:
                    torch.testing.assert_close(got[b, :, i, j], (q[b, :, i] * rel_keys[:, i - j]).sum(-1))
                else:
                    assert torch.isneginf(got[b, :, i, j]).all()
    assert torch.isneginf(got[1, :, :, 3:]).all() and torch.isfinite(got[1, :, 4, :3]).all()


def test_interleaved_sinusoids_layout():
    pos = torch.tensor([0.0, -3.0, 7.0])
    table = interleaved_sinusoids(pos, 6)
    for k in range(3):
        freq = 10000 ** (-2 * k / 6)
        torch.testing.assert_close(table[:, 2 * k], torch.sin(pos * freq))
        torch.testing.assert_close(table[:, 2 * k + 1], torch.cos(pos * freq))


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
