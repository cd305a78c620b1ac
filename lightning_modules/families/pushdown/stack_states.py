"""Algorithm 1 of the Pushdown Layers paper (Murty et al. 2023) one token at a time, for many hypotheses at once
(beam search, sampling): the stack state each hypothesis has after its attachments so far, and the attachments
legal next.

``legal_attachments`` and ``attach_labels`` are its two steps on tensors of any leading shape and device (the
beam keeps every sentence's hypotheses on the model's device, ``experiments.families.pushdown.scorers``);
``StackStates`` holds them for one sentence's hypotheses on the host (numpy) and calls the same two steps, so
there is one implementation. ``encoding`` reads the same labels and tape off a whole tree at once.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
from torch import Tensor


class StackStates:
    """Algorithm 1 for a batch of hypotheses over the same n tokens, advanced one token at a time.

    Per hypothesis, three rows of width n + 2: ``depth`` (the tape row after the tokens so far, which the
    query at ``position`` reads; once all n are in, also the ``<eos>`` row: as in training, the ``<eos>``
    reduce is never applied), ``open`` (True at the rightmost token of each constituent on the stack,
    ``<s>`` at the bottom included) and ``attachment``.
    A word-synchronous beam reorders hypotheses with ``select(origins)`` (one gather per array; origins
    may repeat) and extends all of them with ``attach(labels)`` (``attach_labels`` on the arrays, in place).
    """

    __slots__ = ("position", "depth", "open", "attachment")

    def __init__(self, n_tokens: int, size: int = 1):
        if n_tokens < 1:
            raise ValueError(f"a sentence has at least one token, not {n_tokens}")
        width = n_tokens + 2
        self.position = 0  # the last token consumed: 0 is <s>
        self.depth = np.zeros((size, width), dtype=np.int64)
        self.open = np.zeros((size, width), dtype=bool)
        self.open[:, 0] = True
        self.attachment = np.zeros((size, width), dtype=np.int64)

    @property
    def n_tokens(self) -> int:
        return self.depth.shape[1] - 2

    def __len__(self) -> int:
        return self.depth.shape[0]

    def select(self, origins: Sequence[int] | np.ndarray) -> StackStates:
        """A new batch whose hypothesis i is a copy of hypothesis ``origins[i]`` of this one."""
        idx = np.asarray(origins, dtype=np.int64)
        out = StackStates.__new__(StackStates)
        out.position = self.position
        out.depth, out.open, out.attachment = self.depth[idx], self.open[idx], self.attachment[idx]
        return out

    def legal(self, close_at_last: bool = False) -> np.ndarray:
        """bool[size, k+1]: the attachments the next token (position k) may take.

        The rightmost tokens of the word constituents on the stack (reduce), and k itself (shift): the
        complement of the official beam search's reduced set, without ``<s>``. The official search lets
        the last token shift or stop early and ``<eos>`` close the rest, so several label sequences give
        one tree; ``close_at_last`` instead makes the last token close the stack (as gold labels always
        do), which makes label sequences and binary trees one-to-one.
        """
        k = self._next()
        closing = close_at_last and k == self.n_tokens and k > 1
        return legal_attachments(torch.from_numpy(self.open), k, closing).numpy()

    def attach(self, labels: Sequence[int] | np.ndarray) -> None:
        """Consume the next token with one attachment label per hypothesis (Algorithm 1, in place)."""
        k = self._next()
        labels = np.asarray(labels, dtype=np.int64).reshape(-1)
        rows = np.arange(len(self))
        if labels.shape != (len(self),):
            raise ValueError(f"expected {len(self)} labels, got {labels.shape[0]}")
        at = np.clip(labels, 0, k - 1)
        ok = (labels == k) | ((labels >= 1) & (labels < k) & self.open[rows, at])
        if not ok.all():
            b = int(np.argmin(ok))
            raise ValueError(f"hypothesis {b}: token {k} cannot attach to {int(labels[b])}; legal: "
                             f"{np.flatnonzero(self.legal()[b]).tolist()}")
        attach_labels(torch.from_numpy(self.depth), torch.from_numpy(self.open), torch.from_numpy(self.attachment),
                      k, torch.from_numpy(labels))
        self.position = k

    def _next(self) -> int:
        if self.position >= self.n_tokens:
            raise ValueError(f"all {self.n_tokens} tokens are in; <eos> takes no attachment")
        return self.position + 1


def stack_from_top(open_: Tensor, k: int) -> Tensor:
    """int64[..., k]: the stack constituent holding each position x < k counted from the top (1), i.e. the
    open positions in x..k-1 (``open_`` [..., >= k])."""
    return open_[..., :k].flip(-1).cumsum(-1).flip(-1)


def legal_attachments(open_: Tensor, k: int, closing: Tensor | bool = False) -> Tensor:
    """bool[..., k + 1]: the attachments token k may take given ``open_`` [..., >= k] (``StackStates.legal``):
    the open positions after ``<s>`` (reduce) and k (shift); where ``closing`` (bool, or bool[...] over the
    leading dimensions) only the first open position after ``<s>`` (the last token closes the stack)."""
    mask = torch.cat([open_[..., :k], open_.new_ones((*open_.shape[:-1], 1))], dim=-1)
    mask[..., 0] = False
    if closing is False:
        return mask
    bottom = mask[..., 1:].to(torch.uint8).argmax(-1, keepdim=True) + 1  # argmax: the first maximum
    only = torch.zeros_like(mask).scatter_(-1, bottom, True)
    return only if closing is True else torch.where(closing[..., None], only, mask)


def attach_labels(depth: Tensor, open_: Tensor, attachment: Tensor, k: int, labels: Tensor) -> None:
    """Algorithm 1 for token k, in place: every hypothesis's ``depth``, ``open_`` and ``attachment`` [..., > k]
    after its legal label ``labels`` [...] (reduce down to that position, or shift: k)."""
    from_top = stack_from_top(open_, k)
    reduces = torch.where(labels < k, from_top.gather(-1, labels.clamp(0, k - 1)[..., None])[..., 0], 0)
    # Alg. 1 merges the top constituent first: the j-th from the top takes part in reduces - j + 1
    inc = (reduces[..., None] - from_top + 1).masked_fill_(from_top > reduces[..., None], 0)
    depth[..., :k] += inc
    depth[..., k] += reduces
    closed = (torch.arange(k, device=labels.device) >= labels[..., None]) & (labels[..., None] < k)
    open_[..., :k] &= ~closed
    open_[..., k] = True
    attachment[..., k] = labels
