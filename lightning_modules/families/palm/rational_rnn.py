"""Rational RNNs and the span representations built from them (PaLM, Peng et al. 2019, §2.1, Eq. 1–2, Alg. 1).

The unigram rational RNN (Peng et al. 2018a) of Eq. 1 has no dependency of its gates on the state:

    f_t = σ(W_f h_t + b_f)                  (1a)
    u_t = (1 − f_t) ⊙ tanh(W_u h_t + b_u)   (1b)
    c_t = f_t ⊙ c_{t−1} + u_t               (1c)

so a span's encoding is a linear function of its tokens' ``u`` weighted by products of forget gates, and every
span [t−i, t] (i = 0..m−1) ending at every position t can be had from one pass over the sequence.

All functions here take gates ``log_f`` (log f, computed with ``logsigmoid`` so tiny gates stay exact) and
``u`` of shape [B, T, d] and return span representations [B, E, m, d] for the requested end positions
``ends`` [E]: entry ``[:, e, i]`` encodes the span [ends[e] − i, ends[e]]. Spans reaching before position 0
are returned as if the sequence were preceded by nothing (callers mask them).

- **Forward** (left to right) spans follow Alg. 1: one run of the RRNN (Eq. 1c) gives c→_t, and
  c→_{i,j} = c→_j − c→_{i−1} ⊙ f_{1,j} / f_{1,i−1} (Eq. 2) where the ratio of accumulated forget gates is
  computed in log space as exp(Σ_{l=i}^{j} log f_l). The sum is accumulated over the m span lengths of a window
  (a cumulative sum over the window axis), never as a difference of two long prefix sums, so it keeps full
  precision on long sequences. The only loop is over time, for Eq. 1c itself: c→_t needs c→_{t−1}, which is all
  the recurrence strictly needs; everything else is vectorised over all positions and all m lengths.
- **Backward** (right to left) spans: the analogue of Alg. 1 that runs one backward RRNN from the end of the
  sequence and subtracts (the official code's way) makes c←_{i,j} depend on tokens after j, cancelling only in
  exact arithmetic — a language model must not read the future, not even by rounding error. We instead
  accumulate each span from its start: c←_{s,s+k} = Σ_{k'≤k} u_{s+k'} ⊙ Π_{l=s}^{s+k'−1} f_l, the products
  again as exp of cumulative log-forget sums over the window (every exponent ≤ 0, so nothing overflows), one
  cumulative sum over the m lengths for all starts at once, then re-indexed from (start, length) to (end,
  length). No loop at all; every span depends on its own tokens only.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from lightning_modules.families.palm.initialisation import init_linear_


class RationalRNN(nn.Module):
    """The gates of Eq. 1 (one direction) and the plain recurrence (Eq. 1c).

    ``input`` is how u is made from h: ``"tanh"`` as Eq. 1b, u = (1 − f) ⊙ tanh(W_u h + b_u); ``"linear"`` as
    the official ``RRNNCell`` (Noahs-ARK/PaLM ``rrnn.py``: its nonlinearity is switched off and the input half
    of its bias is never read), u = (1 − f) ⊙ W_u h, with a bias on the forget gate only (``forget_bias``).
    Initialised as the official ``RRNNCell``: Xavier-uniform with fan-in ``d_in``, fan-out ``d_state`` and the
    tanh gain 5/3, zero biases."""

    def __init__(self, d_in: int, d_state: int, input: str = "tanh"):
        super().__init__()
        if input not in ("tanh", "linear"):
            raise ValueError(f"unknown rational RNN input {input!r}")
        self.input = input
        self.proj = nn.Linear(d_in, 2 * d_state, bias=input == "tanh")
        self.forget_bias = nn.Parameter(torch.zeros(d_state)) if input == "linear" else None
        init_linear_(self.proj, fan_in=d_in, fan_out=d_state, gain=nn.init.calculate_gain("tanh"))

    def gates(self, h: Tensor) -> tuple[Tensor, Tensor]:
        """``(log f, u)`` [B, T, d] of Eq. 1a–b."""
        z_f, z_u = self.proj(h).chunk(2, dim=-1)
        if self.forget_bias is not None:
            z_f = z_f + self.forget_bias
        log_f = nn.functional.logsigmoid(z_f)
        # 1 − σ(z) = σ(−z), exact for saturated gates
        u = torch.sigmoid(-z_f) * (z_u if self.input == "linear" else torch.tanh(z_u))
        return log_f, u


def run(log_f: Tensor, u: Tensor) -> Tensor:
    """Eq. 1c from a zero state, left to right over the whole sequence: c→ [B, T, d]."""
    f = log_f.exp()
    c = torch.zeros_like(u[:, 0])
    out = []
    for t in range(u.shape[1]):
        c = f[:, t] * c + u[:, t]
        out.append(c)
    return torch.stack(out, dim=1)


def windows_ending_at(x: Tensor, ends: Tensor, m: int) -> Tensor:
    """``out[:, e, i] = x[:, ends[e] − i]`` [B, E, m, ...], zeros where ``ends[e] − i < 0``."""
    pad = x.new_zeros(x.shape[0], m, *x.shape[2:])
    index = ends[:, None] + m - torch.arange(m, device=x.device)[None, :]  # into cat([pad, x])
    return torch.cat([pad, x], dim=1)[:, index]


def windows_starting_at(x: Tensor, m: int) -> Tensor:
    """``out[:, s, k] = x[:, s + k]`` [B, T, m, ...] for every start s, zeros past the end."""
    pad = x.new_zeros(x.shape[0], m, *x.shape[2:])
    index = torch.arange(x.shape[1], device=x.device)[:, None] + torch.arange(m, device=x.device)[None, :]
    return torch.cat([x, pad], dim=1)[:, index]


def forward_spans(log_f: Tensor, u: Tensor, ends: Tensor, m: int) -> Tensor:
    """Forward span representations c→_{t−i, t} by Alg. 1 (Eq. 2) in log space: [B, E, m, d]."""
    c = run(log_f, u)
    c_before = torch.cat([torch.zeros_like(c[:, :1]), c[:, :-1]], dim=1)  # c→_{t−1}, zero state before 0
    # log f_{1,j} / f_{1,i−1} = Σ_{l=i}^{j} log f_l, accumulated over the window's lengths
    log_ratio = windows_ending_at(log_f, ends, m).cumsum(dim=2)
    return c[:, ends, None] - windows_ending_at(c_before, ends, m) * log_ratio.exp()


def backward_spans(log_f: Tensor, u: Tensor, ends: Tensor, m: int) -> Tensor:
    """Backward span representations c←_{t−i, t} (a right-to-left RRNN run over exactly the span): [B, E, m, d]."""
    log_f_w = windows_starting_at(log_f, m)  # [B, T, m, d]: log f_{s+k}
    # Π_{l=s}^{s+k−1} f_l: exclusive cumulative log-forget sum over the lengths
    decay = torch.cat([torch.zeros_like(log_f_w[:, :, :1]), log_f_w[:, :, :-1].cumsum(dim=2)], dim=2).exp()
    by_start = (windows_starting_at(u, m) * decay).cumsum(dim=2)  # [B, T, m, d]: c←_{s, s+k}
    # re-index (start s = t − i, length i + 1) -> (end t, length i + 1)
    lengths = torch.arange(m, device=u.device)
    starts = ends[:, None] - lengths[None, :]  # [E, m]
    padded = torch.cat([by_start.new_zeros(by_start.shape[0], m, *by_start.shape[2:]), by_start], dim=1)
    return padded[:, starts + m, lengths[None, :].expand_as(starts)]
