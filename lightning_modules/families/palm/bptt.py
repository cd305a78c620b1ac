"""A token stream cut into parallel rows and read in consecutive windows of variable length (AWD-LSTM's
truncated BPTT, Merity et al. 2018 §4.1), for string models that carry their state from window to window.

``batchify`` splits the stream into B equal rows (the remainder is dropped), aligned per-token rows (e.g.
PaLM-S's span targets) with it. The training windows of an epoch have lengths drawn as the official code
(PaLM's AWD-LSTM fork): ``bptt`` with probability 0.95, else ``bptt / 2``, then ``max(5, int(N(that, 5)))``
capped at ``bptt + 10``. ``StreamBatches`` is what the trainer iterates: the batch at step k is a pure function
of (seed, k) — each epoch's lengths come from a generator seeded by (seed, epoch) — so a resumed run reads
exactly the windows an uninterrupted one would; the first window of every epoch resets the carried state.
Iterated ``per_epoch`` (the official epoch loop), an iteration ends with its epoch's last window, so the trainer
sees one epoch per pass (and validates at its end); otherwise the windows run on across epochs, endlessly.
Validation and evaluation read the stream in fixed windows of ``bptt`` (``fixed_windows``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor


@dataclass
class StreamBatch:
    """One window of a batch of parallel streams: ``inputs``/``targets`` [B, T]; ``span_targets`` [B, T, m]
    (palm-s; the normalised gold selections of each input position) or None; ``reset``: the streams start
    here (no state carried in); ``epoch``: the training epoch (0-based pass over the stream) of the window."""

    inputs: Tensor
    targets: Tensor
    span_targets: Tensor | None = None
    reset: bool = False
    epoch: int = 0


def batchify(ids: np.ndarray, rows: int, aligned: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray | None]:
    """[N] -> [rows, N // rows] (row r continues where row r − 1 ends), ``aligned`` [N, ...] alike."""
    width = len(ids) // rows
    if width < 2:
        raise ValueError(f"a stream of {len(ids)} tokens is too short for {rows} rows")
    out = ids[: rows * width].reshape(rows, width)
    return out, None if aligned is None else aligned[: rows * width].reshape(rows, width, *aligned.shape[1:])


def window_lengths(total: int, bptt: int, rng: np.random.Generator) -> list[int]:
    """Variable BPTT lengths covering ``total`` − 1 predictions (the last window may be shorter)."""
    lengths, position = [], 0
    while position < total - 1:
        base = bptt if rng.random() < 0.95 else bptt / 2.0
        length = min(max(5, int(rng.normal(base, 5))), bptt + 10, total - 1 - position)
        lengths.append(length)
        position += length
    return lengths


def window(stream: np.ndarray, aligned: np.ndarray | None, start: int, length: int, reset: bool,
           epoch: int = 0) -> StreamBatch:
    """The window of inputs ``[start, start + length)`` and their next tokens as a ``StreamBatch``."""
    inputs = torch.from_numpy(np.ascontiguousarray(stream[:, start : start + length])).long()
    targets = torch.from_numpy(np.ascontiguousarray(stream[:, start + 1 : start + 1 + length])).long()
    spans = None if aligned is None else torch.from_numpy(np.ascontiguousarray(aligned[:, start : start + length]))
    return StreamBatch(inputs, targets, spans, reset, epoch)


def fixed_windows(stream: np.ndarray, aligned: np.ndarray | None, bptt: int) -> list[StreamBatch]:
    """The whole stream [B, W] in windows of ``bptt`` (evaluation), the first one resetting the state."""
    return [window(stream, aligned, start, min(bptt, stream.shape[1] - 1 - start), start == 0)
            for start in range(0, stream.shape[1] - 1, bptt)]


class StreamBatches:
    """Endless training windows over epochs of one batchified stream, resumable at any step."""

    def __init__(self, stream: np.ndarray, aligned: np.ndarray | None, bptt: int, seed: int,
                 consumed: Callable[[], int] | None = None, per_epoch: bool = False):
        self.stream, self.aligned, self.bptt, self.seed = stream, aligned, bptt, seed
        self.per_epoch = per_epoch  # each iteration stops at the end of the epoch it starts in
        self._consumed = consumed  # e.g. lambda: trainer.global_step * accumulate_grad_batches
        self._start = 0
        self._epochs: dict[int, list[int]] = {}

    def epoch_lengths(self, epoch: int) -> list[int]:
        if epoch not in self._epochs:
            rng = np.random.Generator(np.random.PCG64([self.seed, epoch, 0xB977]))
            self._epochs[epoch] = window_lengths(self.stream.shape[1], self.bptt, rng)
        return self._epochs[epoch]

    def locate(self, step: int) -> tuple[int, int]:
        """(epoch, window within it) of training step ``step`` (0-based)."""
        epoch = 0
        while step >= len(self.epoch_lengths(epoch)):
            step -= len(self.epoch_lengths(epoch))
            epoch += 1
        return epoch, step

    def batch(self, step: int) -> StreamBatch:
        """The window read at training step ``step`` (0-based)."""
        epoch, k = self.locate(step)
        lengths = self.epoch_lengths(epoch)
        return window(self.stream, self.aligned, sum(lengths[:k]), lengths[k], k == 0, epoch)

    def __iter__(self) -> Iterator[StreamBatch]:
        step = self._consumed() if self._consumed is not None else self._start
        epoch, k = self.locate(step)
        remaining = len(self.epoch_lengths(epoch)) - k
        while not self.per_epoch or remaining > 0:
            yield self.batch(step)
            step += 1
            remaining -= 1

    def state_dict(self) -> dict[str, int]:
        return {"consumed": self._consumed() if self._consumed is not None else self._start}

    def load_state_dict(self, state: dict[str, int]) -> None:
        self._start = int(state.get("consumed", 0))
