"""PaLM span attention: the vectorised span representations equal a direct rational-RNN run over every span
(values and gradients), and the attention is Eq. 3 exactly, causal, and window-independent."""

from __future__ import annotations

import pytest
import torch

from lightning_modules.families.palm.rational_rnn import RationalRNN, backward_spans, forward_spans, run
from lightning_modules.families.palm.span_attention import SpanAttention


def direct_span(log_f: torch.Tensor, u: torch.Tensor, start: int, end: int, backward: bool) -> torch.Tensor:
    """Eq. 1c run from a zero state over exactly the tokens start..end (right to left if ``backward``)."""
    c = torch.zeros_like(u[:, 0])
    order = range(end, start - 1, -1) if backward else range(start, end + 1)
    for k in order:
        c = log_f[:, k].exp() * c + u[:, k]
    return c


def direct_spans(log_f, u, m, backward):
    """[B, T, m, d] with every span [t − i, t] run directly (zeros where it reaches before 0)."""
    batch, length, d = u.shape
    rows = []
    for t in range(length):
        rows.append(torch.stack([direct_span(log_f, u, t - i, t, backward) if t - i >= 0
                                 else u.new_zeros(batch, d) for i in range(m)], dim=1))
    return torch.stack(rows, dim=1)


def valid_mask(length, m):
    t = torch.arange(length)[:, None]
    i = torch.arange(m)[None, :]
    return (t - i >= 0)[None, :, :, None]


@pytest.mark.parametrize("dtype,scale", [(torch.float64, 1.0), (torch.float32, 1.0), (torch.float64, 8.0),
                                         (torch.float32, 8.0)])
@pytest.mark.parametrize("backward", [False, True])
def test_spans_equal_a_direct_run_over_each_span_values_and_gradients(dtype, scale, backward):
    torch.manual_seed(0)
    batch, length, d_in, d, m = 2, 11, 5, 3, 4
    rrnn = RationalRNN(d_in, d).to(dtype)
    with torch.no_grad():  # scale 8 saturates gates: forget products down to ~1e-20
        rrnn.proj.weight.mul_(scale)
    h = torch.randn(batch, length, d_in, dtype=dtype, requires_grad=True)
    probe = torch.randn(batch, length, m, d, dtype=dtype) * valid_mask(length, m)
    ends = torch.arange(length)
    spans = backward_spans if backward else forward_spans

    def grads(fn):
        h.grad = None
        rrnn.zero_grad()
        out = fn(*rrnn.gates(h))
        (out * probe).sum().backward()
        return out.detach() * valid_mask(length, m), h.grad.clone(), rrnn.proj.weight.grad.clone()

    fast = grads(lambda lf, u: spans(lf, u, ends, m))
    slow = grads(lambda lf, u: direct_spans(lf, u, m, backward))
    for a, b in zip(fast, slow):
        torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-5)


def test_forward_spans_follow_eq2_from_the_full_run():
    torch.manual_seed(1)
    rrnn = RationalRNN(4, 3).double()
    log_f, u = rrnn.gates(torch.randn(1, 7, 4, dtype=torch.float64))
    c = run(log_f, u)
    out = forward_spans(log_f, u, torch.arange(7), 7)
    # c→_{2,5} = c→_5 − c→_1 ⊙ f_2 f_3 f_4 f_5  (Eq. 2); the span starting at 0 is c→_t itself
    expected = c[:, 5] - c[:, 1] * log_f[:, 2:6].sum(dim=1).exp()
    torch.testing.assert_close(out[:, 5, 3], expected)
    torch.testing.assert_close(out[:, 6, 6], c[:, 6])


def test_spans_for_selected_ends_match_all_ends():
    torch.manual_seed(2)
    rrnn = RationalRNN(4, 3).double()
    log_f, u = rrnn.gates(torch.randn(2, 9, 4, dtype=torch.float64))
    ends = torch.tensor([3, 8])
    for spans in (forward_spans, backward_spans):
        torch.testing.assert_close(spans(log_f, u, ends, 5), spans(log_f, u, torch.arange(9), 5)[:, ends])


def reference_attention(layer: SpanAttention, h: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Eq. 3 written out per query and span with direct RRNN runs (a stream starting at position 0)."""
    batch, length, _ = h.shape
    fw, bw = layer.forward_rrnn.gates(h), layer.backward_rrnn.gates(h)
    contexts, weight_rows = [], []
    for p in range(length):
        spans, scores = [], []
        for i in range(layer.max_span):
            start, end = p - 1 - i, p - 1
            if start < 0:
                break
            g = torch.cat([direct_span(*fw, start, end, False), direct_span(*bw, start, end, True)], dim=-1)
            if layer.right_branching:
                s = torch.full((batch,), float(i + 1), dtype=h.dtype)
            else:
                s = layer.score(torch.tanh(layer.token(h[:, p]) + layer.span(g))).squeeze(-1)
            spans.append(g)
            scores.append(s)
        if not spans:
            contexts.append(h.new_zeros(batch, layer.forward_rrnn.proj.out_features))  # 2 d_rrnn
            weight_rows.append(h.new_zeros(batch, layer.max_span))
            continue
        w = torch.softmax(torch.stack(scores, dim=1), dim=1)
        contexts.append(torch.einsum("bi,bid->bd", w, torch.stack(spans, dim=1)))
        weight_rows.append(torch.cat([w, h.new_zeros(batch, layer.max_span - w.shape[1])], dim=1))
    return torch.stack(contexts, dim=1), torch.stack(weight_rows, dim=1)


@pytest.mark.parametrize("right_branching", [False, True])
def test_attention_is_eq3_over_the_m_spans_ending_before_each_query(right_branching):
    torch.manual_seed(3)
    layer = SpanAttention(d_in=6, d_rrnn=3, d_mlp=5, max_span=4, right_branching=right_branching).double()
    h = torch.randn(2, 9, 6, dtype=torch.float64)
    out = layer(h)
    context, weights = reference_attention(layer, h)
    torch.testing.assert_close(out.context, context)
    torch.testing.assert_close(out.log_weights.exp(), weights)
    assert out.context.shape == (2, 9, 6)
    assert torch.isinf(out.scores[:, 0]).all() and torch.equal(out.context[:, 0], torch.zeros(2, 6).double())


def test_right_branching_scores_are_m_down_to_1_from_the_longest_span():
    layer = SpanAttention(d_in=4, d_rrnn=2, d_mlp=3, max_span=5, right_branching=True)
    out = layer(torch.randn(1, 8, 4))
    assert out.scores[0, 7].tolist() == [1.0, 2.0, 3.0, 4.0, 5.0]  # column i: span of length i + 1
    assert out.scores[0, 2, :2].tolist() == [1.0, 2.0] and torch.isinf(out.scores[0, 2, 2:]).all()
    assert not any(n.startswith(("token", "span", "score")) for n, _ in layer.named_parameters())


def test_attention_is_causal_exactly():
    torch.manual_seed(4)
    layer = SpanAttention(d_in=6, d_rrnn=3, d_mlp=5, max_span=4)
    h = torch.randn(1, 10, 6)
    changed = h.clone()
    changed[:, 6:] = torch.randn(1, 4, 6) * 10
    a, b = layer(h), layer(changed)
    assert torch.equal(a.context[:, :6], b.context[:, :6])
    assert torch.equal(a.scores[:, :6], b.scores[:, :6])


def test_windows_with_memory_equal_one_unbroken_run():
    torch.manual_seed(5)
    layer = SpanAttention(d_in=6, d_rrnn=3, d_mlp=5, max_span=4).double()
    h = torch.randn(2, 13, 6, dtype=torch.float64)
    whole = layer(h)
    first = layer(h[:, :5])
    second = layer(h[:, 5:9], first.memory)
    third = layer(h[:, 9:], second.memory.detach())
    torch.testing.assert_close(torch.cat([first.context, second.context, third.context], dim=1), whole.context)
    torch.testing.assert_close(torch.cat([first.log_weights, second.log_weights, third.log_weights], dim=1),
                               whole.log_weights)


def test_all_span_scores_score_every_length_for_the_parser():
    torch.manual_seed(6)
    layer = SpanAttention(d_in=6, d_rrnn=3, d_mlp=5, max_span=3).double()
    h = torch.randn(1, 7, 6, dtype=torch.float64)
    scores = layer.all_span_scores(h)
    assert scores.shape == (1, 7, 7)
    torch.testing.assert_close(scores[:, :, :3], layer(h).scores)  # the first m columns are the LM's
    fw, bw = layer.forward_rrnn.gates(h), layer.backward_rrnn.gates(h)
    g = torch.cat([direct_span(*fw, 0, 5, False), direct_span(*bw, 0, 5, True)], dim=-1)
    expected = layer.score(torch.tanh(layer.token(h[:, 6]) + layer.span(g))).squeeze(-1)
    torch.testing.assert_close(scores[:, 6, 5], expected)  # span [0, 5] of length 6 > m
    assert torch.isinf(scores[0, 6, 6])
