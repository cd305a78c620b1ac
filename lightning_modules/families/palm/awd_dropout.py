"""The AWD-LSTM regularisers (Merity et al. 2018, §4): DropConnect on the hidden-to-hidden weights, locked
(variational) dropout, and embedding dropout.

- ``WeightDroppedLSTM``: one LSTM layer whose ``weight_hh`` is a DropConnect copy of the raw matrix, one mask
  per forward call (shared by every time step, as the paper's "weight-dropped LSTM"). The masked matrix is
  passed to the stock ``nn.LSTM`` through ``torch.func.functional_call``, so the fused (cuDNN on GPU, native
  on CPU) LSTM kernel still runs the recurrence; no Python loop over time.
- ``locked_dropout``: one Bernoulli mask per sequence and feature, the same at every time step.
- ``embedding_dropout``: drops whole word types (rows of the embedding matrix) for the batch.
All are inverted dropout (kept values scaled by 1 / (1 − p)) and the identity outside training.
"""

from __future__ import annotations

import torch.nn.functional as F
from torch import Tensor, nn
from torch.func import functional_call


def locked_dropout(x: Tensor, p: float, training: bool) -> Tensor:
    """Variational dropout of [B, T, D]: the mask [B, 1, D] is shared over time."""
    if not training or p == 0.0:
        return x
    mask = x.new_empty(x.shape[0], 1, x.shape[2]).bernoulli_(1.0 - p) / (1.0 - p)
    return x * mask


def embedding_dropout(embedding: nn.Embedding, ids: Tensor, p: float, training: bool) -> Tensor:
    """Look up ``ids`` with whole rows of the embedding matrix dropped (word-type dropout)."""
    weight = embedding.weight
    if training and p > 0.0:
        weight = weight * (weight.new_empty(weight.shape[0], 1).bernoulli_(1.0 - p) / (1.0 - p))
    return F.embedding(ids, weight)


class WeightDroppedLSTM(nn.Module):
    """A one-layer batch-first LSTM with DropConnect (probability ``p``) on its hidden-to-hidden matrix."""

    def __init__(self, d_in: int, d_hidden: int, p: float):
        super().__init__()
        self.lstm = nn.LSTM(d_in, d_hidden, batch_first=True)
        self.p = p

    def forward(self, x: Tensor, state: tuple[Tensor, Tensor] | None = None
                ) -> tuple[Tensor, tuple[Tensor, Tensor]]:
        """Outputs [B, T, H] and the final (h, c), each [1, B, H]."""
        if not self.training or self.p == 0.0:
            return self.lstm(x, state)
        dropped = F.dropout(self.lstm.weight_hh_l0, self.p, training=True)
        return functional_call(self.lstm, {"weight_hh_l0": dropped}, (x, state))
