"""The official PaLM code's initialisers (``utils.py`` of Noahs-ARK/PaLM, from AllenNLP and PyTorch 0.4).

- ``block_orthogonal_``: each block of a matrix orthogonal on its own (the LSTMs' stacked gate matrices:
  one block per gate, ``[4H, D]`` in blocks of ``[H, D]``);
- ``xavier_uniform_``: Glorot's uniform U(−a, a), a = gain · √(6 / (fan_in + fan_out)), with the fans given
  explicitly — the official code passes fans that are not the matrix's shape (the rational RNN: one
  direction's size as fan-out; the span scorer: the token and span sizes together as fan-in).

Why it matters: with PyTorch's default (random) biases the untrained span attention sees a token-independent
offset in every input and gate, so a span's score is monotone in its length and untrained models parse
all-left or all-right; with these zero biases they split both ways (PaLM Table 4's random row).
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn


@torch.no_grad()
def block_orthogonal_(tensor: Tensor, block_rows: int, gain: float = 1.0) -> Tensor:
    """Fill ``tensor`` [R, C] with independent orthogonal blocks of ``block_rows`` × C (R a multiple)."""
    if tensor.shape[0] % block_rows:
        raise ValueError(f"{tensor.shape[0]} rows are not blocks of {block_rows}")
    for start in range(0, tensor.shape[0], block_rows):
        nn.init.orthogonal_(tensor[start : start + block_rows], gain=gain)
    return tensor


@torch.no_grad()
def xavier_uniform_(tensor: Tensor, fan_in: int, fan_out: int, gain: float = 1.0) -> Tensor:
    """U(−a, a) with a = gain · √(6 / (fan_in + fan_out))."""
    bound = gain * math.sqrt(6.0 / (fan_in + fan_out))
    return tensor.uniform_(-bound, bound)


def init_lstm_(lstm: nn.LSTM) -> None:
    """Every weight matrix block-orthogonal per gate, every bias zero (the official ``init_weights``)."""
    for name, value in lstm.named_parameters():
        if "weight" in name:
            block_orthogonal_(value.data, value.shape[0] // 4)
        else:
            nn.init.zeros_(value)


def init_linear_(linear: nn.Linear, fan_in: int | None = None, fan_out: int | None = None,
                 gain: float = 1.0) -> None:
    """Xavier-uniform weight (fans default to the matrix's) and a zero bias."""
    out_features, in_features = linear.weight.shape
    xavier_uniform_(linear.weight.data, in_features if fan_in is None else fan_in,
                    out_features if fan_out is None else fan_out, gain)
    if linear.bias is not None:
        nn.init.zeros_(linear.bias)
