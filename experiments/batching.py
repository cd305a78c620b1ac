"""Deterministic, resumable batch streams for step-based training.

The batch at optimizer step k is a pure function of (seed, k): epoch e's order is a permutation drawn from
``seed`` and ``e``, and batches are consecutive slices of it. A resumed run therefore sees exactly the batches the
uninterrupted run would have seen, with no sampler state to pickle. ``StepBatches`` also implements
``state_dict``/``load_state_dict`` so Lightning treats it as a resumable loader (no mid-epoch warning) — the
state is just the number of batches consumed.

Data-parallel training (DDP over ``world`` processes) draws the same global batch of ``world × batch_size``
examples at step k and gives process ``rank`` its slice ``[rank·B, (rank+1)·B)``: together the processes see
exactly the batch one process with ``world × batch_size`` would see.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np


def epoch_order(n: int, seed: int, epoch: int) -> np.ndarray:
    """The permutation of ``n`` examples used in ``epoch`` (same on every machine and numpy version)."""
    rng = np.random.Generator(np.random.PCG64([seed, epoch, 0x5EED]))
    return rng.permutation(n)


def batch_indices(n: int, batch_size: int, seed: int, index: int) -> np.ndarray:
    """Example indices of the ``index``-th batch of the stream (partial last batches are dropped)."""
    per_epoch = max(n // batch_size, 1)
    epoch, k = divmod(index, per_epoch)
    order = epoch_order(n, seed, epoch)
    return order[k * batch_size : (k + 1) * batch_size]


class StepBatches:
    """An endless stream of collated training batches, resumable at any step."""

    def __init__(self, examples: Sequence[Any], batch_size: int, seed: int,
                 collate: Callable[[list[Any]], Any], consumed: Callable[[], int] | None = None,
                 rank: int = 0, world: int = 1):
        if not 0 <= rank < world:
            raise ValueError(f"rank {rank} is not in a world of {world} processes")
        if batch_size * world > len(examples):
            batch_size = max(len(examples) // world, 1)
        self.examples = examples
        self.batch_size = batch_size
        self.rank, self.world = rank, world
        self.seed = seed
        self.collate = collate
        self._consumed = consumed  # e.g. lambda: trainer.global_step * accumulate_grad_batches
        self._start = 0

    def __iter__(self) -> Iterator[Any]:
        index = self._consumed() if self._consumed is not None else self._start
        while True:
            idx = batch_indices(len(self.examples), self.batch_size * self.world, self.seed, index)
            idx = idx[self.rank * self.batch_size : (self.rank + 1) * self.batch_size]
            yield self.collate([self.examples[i] for i in idx])
            index += 1

    def state_dict(self) -> dict[str, int]:
        return {"consumed": self._consumed() if self._consumed is not None else self._start}

    def load_state_dict(self, state: dict[str, int]) -> None:
        self._start = int(state.get("consumed", 0))
