"""Token ids, encoded sentences and padded batches of the Pushdown family (text and Dyck runs alike).

Ids: 0 ``<pad>``, 1 ``<s>``, 2 ``<eos>``, then the terminal tokens in vocabulary order. A batch of n-token
sentences (T = max n + 1, padded with 0):
  ``inputs``     [B, T]    ``<s> x_1 .. x_n``
  ``targets``    [B, T]    ``x_1 .. x_n <eos>`` (the LM labels)
  ``attachment`` [B, T]    the attachment of the word predicted at each position, i.e. labels[1:] of the
                           encoding; the ``<eos>`` step and padding hold 0, which is never a word's label
                           (words attach to positions >= 1), so 0 means "no attachment loss" (official mask)
  ``tape``       [B, T, T] depth tape rows 0..n: row t = depths after tokens 0..t (what position t sees)
  ``lengths``    [B]       n + 1, the valid input positions
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

from lightning_modules.families.pushdown.encoding import stack_tape


@dataclass(frozen=True, eq=False)
class PushdownSentence:
    """One encoded sentence: token ids ``<s> x_1..x_n <eos>``, attachment labels, tape spans, word count."""

    ids: np.ndarray  # int64[n + 2]
    attachment: np.ndarray  # int64[n + 2]: [0] + per token + [0]
    spans: np.ndarray  # int64[n - 1, 2]
    words: int  # words before splitting into pieces

    @property
    def labels(self) -> np.ndarray:
        """The LM labels ``x_1..x_n <eos>`` (for unigram baselines)."""
        return self.ids[1:]

    def __len__(self) -> int:
        return len(self.ids)


@dataclass
class PushdownBatch:
    """Padded tensors of a batch (module docstring); ``to(device)`` moves them all."""

    inputs: Tensor
    targets: Tensor
    attachment: Tensor
    tape: Tensor
    lengths: Tensor

    def to(self, device: torch.device | str) -> PushdownBatch:
        return PushdownBatch(*(t.to(device) for t in (self.inputs, self.targets, self.attachment, self.tape,
                                                        self.lengths)))


def max_depth(sentence: PushdownSentence) -> int:
    """The largest depth on the sentence's tape (its last row: depths only grow), in O(n)."""
    first, last = sentence.spans.reshape(-1, 2).T
    diff = np.bincount(first, minlength=len(sentence) + 1) - np.bincount(last + 1, minlength=len(sentence) + 1)
    return int(np.cumsum(diff).max())


def collate(rows: Sequence[PushdownSentence]) -> PushdownBatch:
    """Pad a list of sentences into a ``PushdownBatch``."""
    length = max(len(r) for r in rows) - 1
    batch = len(rows)
    inputs = np.zeros((batch, length), dtype=np.int64)
    targets = np.zeros((batch, length), dtype=np.int64)
    attachment = np.zeros((batch, length), dtype=np.int64)
    tape = np.zeros((batch, length, length), dtype=np.int64)
    lengths = np.zeros(batch, dtype=np.int64)
    for b, r in enumerate(rows):
        n = len(r) - 1  # <s> + tokens
        inputs[b, :n] = r.ids[:-1]
        targets[b, :n] = r.ids[1:]
        attachment[b, :n] = r.attachment[1:]
        tape[b, :n, :n] = stack_tape(r.spans, len(r))[:n, :n]
        lengths[b] = n
    return PushdownBatch(*(torch.from_numpy(a) for a in (inputs, targets, attachment, tape, lengths)))
