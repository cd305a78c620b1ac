"""PaLM's attention over the spans of the left context (Peng et al. 2019, §2.1, Eq. 3; PaLM-RB of §3).

At input position t+1 (hidden state h_{t+1}) the model attends over the m spans ending at the previous
position t, [t−i, t] for i = 0..m−1 (m = 20 on PTB):

    g([t−i, t]) = [c→_{t−i,t} ; c←_{t−i,t}]                   (bidirectional rational RNN spans, Alg. 1)
    s_{t,i}     = wᵀ tanh(W_h h_{t+1} + W_g g([t−i, t]) + b)    (the MLP over [h_{t+1}; g])
    ω_{t,i}     = softmax_i s_{t,i}                             (3b)
    a_{t+1}     = Σ_i ω_{t,i} g([t−i, t])                       (3a)

``right_branching=True`` is PaLM-RB: no MLP, the scores are fixed to m, m−1, …, 1 from the longest span to the
shortest (footnote 13), i.e. s_{t,i} = i + 1, so the derived trees are right-branching.

Tensors are batch-first. Scores and weights are [B, T, m] with column i the span of length i + 1 ending just
before the query; spans reaching before the first token of the stream are masked (score −inf, weight 0), and
a query with no span at all (the first token of a stream) gets a zero context. ``SpanMemory`` carries the
last m inputs of the previous window (truncated BPTT), so windows see exactly the spans an unbroken run
would; the span encodings depend only on the span's own tokens, so nothing before them is needed.

Settings where the official code (Noahs-ARK/PaLM ``span_parser.py``) differs from the paper's equations, each
a ``SpanAttention`` argument (``PalmConfig`` keys of the same meaning):
  * ``rrnn_input``: ``"linear"`` is the official rational RNN (u = (1 − f) ⊙ W_u h), ``"tanh"`` Eq. 1b;
  * ``span_repr``: ``"gated"`` is the official g([t−i, t]) = tanh(σ(W_q h_{t+1} + b_q) ⊙ [c→; c←]), gated by
    the query (``gate``); ``"raw"`` is Alg. 1's [c→; c←];
  * ``start``: ``"zeros"`` is the official stream start, m zero input vectors before the first token that
    count as tokens (every query has m spans; those reaching into the zeros are encoded from the zero
    inputs); ``"masked"`` leaves the spans that reach before the stream out;
  * ``repr_dropout``: in training, the official locked dropout of the rational RNN states (mask per stream
    and feature), which equals one locked dropout of the span representations [c→; c←].
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor, nn

from lightning_modules.families.palm.awd_dropout import locked_dropout
from lightning_modules.families.palm.initialisation import init_linear_
from lightning_modules.families.palm.rational_rnn import RationalRNN, backward_spans, forward_spans, windows_ending_at


@dataclass
class SpanMemory:
    """The last inputs of the previous window ([B, M, D]) and which of them are real tokens ([B, M])."""

    inputs: Tensor
    valid: Tensor

    def detach(self) -> SpanMemory:
        return SpanMemory(self.inputs.detach(), self.valid)


@dataclass
class SpanAttentionOutput:
    context: Tensor  # [B, T, 2 d_rrnn]: a_{t+1}
    scores: Tensor  # [B, T, m]: s_{t,i}, −inf for spans that do not exist
    log_weights: Tensor  # [B, T, m]: log ω_{t,i}, −inf for spans that do not exist (and rows without spans)
    memory: SpanMemory


class SpanAttention(nn.Module):
    """Span attention of one PaLM layer (learned MLP scores, or PaLM-RB's fixed right-branching scores).

    The score MLP is initialised as the official ``SpanScorer``: Xavier-uniform, the token and span matrices
    with fan-in ``d_in + 2 d_rrnn`` (both inputs of the first layer) and fan-out ``d_mlp``, the output vector
    with its own fans; the first layer's bias (``b1``) zero."""

    def __init__(self, d_in: int, d_rrnn: int, d_mlp: int, max_span: int, right_branching: bool = False,
                 rrnn_input: str = "tanh", span_repr: str = "raw", start: str = "masked", repr_dropout: float = 0.0):
        super().__init__()
        if span_repr not in ("raw", "gated") or start not in ("masked", "zeros"):
            raise ValueError(f"unknown span_repr {span_repr!r} or start {start!r}")
        self.d_in, self.max_span, self.right_branching = d_in, max_span, right_branching
        self.span_repr, self.start, self.repr_dropout = span_repr, start, repr_dropout
        self.forward_rrnn = RationalRNN(d_in, d_rrnn, rrnn_input)
        self.backward_rrnn = RationalRNN(d_in, d_rrnn, rrnn_input)
        self.gate: nn.Linear | None = None
        if span_repr == "gated":  # the official _w_gate_: fans d_in and one direction's size, sigmoid gain 1
            self.gate = nn.Linear(d_in, 2 * d_rrnn)
            init_linear_(self.gate, fan_in=d_in, fan_out=d_rrnn)
        if not right_branching:
            self.token = nn.Linear(d_in, d_mlp)
            self.span = nn.Linear(2 * d_rrnn, d_mlp, bias=False)
            self.score = nn.Linear(d_mlp, 1, bias=False)
            for layer in (self.token, self.span):
                init_linear_(layer, fan_in=d_in + 2 * d_rrnn, fan_out=d_mlp)
            init_linear_(self.score)

    def empty_memory(self, batch: int, like: Tensor, length: int | None = None, zeros: bool = False) -> SpanMemory:
        """A memory that holds no token (the start of a stream), or with ``zeros`` ``length`` zero inputs that
        count as tokens (the official start, ``start="zeros"``)."""
        length = self.max_span if length is None else length
        return SpanMemory(like.new_zeros(batch, length, self.d_in),
                          torch.full((batch, length), zeros, dtype=torch.bool, device=like.device))

    def spans(self, x: Tensor, ends: Tensor, m: int) -> Tensor:
        """g([e − i, e]) = [c→; c←] for every end e in ``ends`` and length i + 1 <= m: [B, E, m, 2 d_rrnn]."""
        return torch.cat([forward_spans(*self.forward_rrnn.gates(x), ends, m),
                          backward_spans(*self.backward_rrnn.gates(x), ends, m)], dim=-1)

    def span_scores(self, queries: Tensor, g: Tensor) -> Tensor:
        """s [B, T, m] for query states [B, T, D] and their spans [B, T, m, 2 d_rrnn]."""
        if self.right_branching:
            lengths = torch.arange(1, g.shape[2] + 1, device=g.device, dtype=g.dtype)
            return lengths.expand(g.shape[:3])
        hidden = torch.tanh(self.token(queries)[:, :, None] + self.span(g))
        return self.score(hidden).squeeze(-1)

    def attend(self, h: Tensor, memory: SpanMemory, m: int) -> SpanAttentionOutput:
        """Eq. 3 for every position of ``h`` [B, T, D] over the spans of length <= m ending just before it."""
        batch, length, _ = h.shape
        past = memory.inputs.shape[1]
        x = torch.cat([memory.inputs.to(h.dtype), h], dim=1)
        valid = torch.cat([memory.valid, torch.ones(batch, length, dtype=torch.bool, device=h.device)], dim=1)
        ends = torch.arange(past - 1, past + length - 1, device=h.device)  # the token before each query
        g = self.spans(x, ends, m)
        if self.repr_dropout and self.training:  # one mask per stream and feature, as on the RRNN states
            g = locked_dropout(g.flatten(1, 2), self.repr_dropout, True).view_as(g)
        if self.gate is not None:
            g = torch.tanh(torch.sigmoid(self.gate(h))[:, :, None] * g)
        exists = windows_ending_at(valid, ends, m)  # the span's first token is a real token
        scores = self.span_scores(h, g).masked_fill(~exists, float("-inf"))
        any_span = exists.any(dim=-1, keepdim=True)
        log_weights = torch.log_softmax(scores.masked_fill(~any_span, 0.0), dim=-1).masked_fill(~exists,
                                                                                                float("-inf"))
        context = torch.einsum("btm,btmd->btd", log_weights.exp(), g)
        keep = memory.inputs.shape[1]
        return SpanAttentionOutput(context, scores, log_weights, SpanMemory(x[:, -keep:], valid[:, -keep:]))

    def forward(self, h: Tensor, memory: SpanMemory | None = None) -> SpanAttentionOutput:
        """Span attention over [B, T, D] with the window's memory (none: the start of a stream)."""
        if memory is None:
            memory = self.empty_memory(h.shape[0], h, zeros=self.start == "zeros")
        return self.attend(h, memory, self.max_span)

    def all_span_scores(self, h: Tensor) -> Tensor:
        """Scores of spans of every length (the parser, §2.2: m is only forced in language modelling).

        ``h`` [B, T, D] starts a stream; returns [B, T, T] where ``[:, p, i]`` scores the span [p−1−i, p−1]
        with query h_p (−inf where it reaches before position 0).
        """
        memory = self.empty_memory(h.shape[0], h, length=h.shape[1])
        return self.attend(h, memory, h.shape[1]).scores
