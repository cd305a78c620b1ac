"""What a training run consumes: encoded sequences, a collate function, and the vocabularies to remember."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any


@dataclass
class TrainData:
    """Encoded training and validation sequences plus what a checkpoint must remember to reuse them."""

    train: Sequence[Any]
    valid: Sequence[Any]
    collate: Callable[[list[Any]], Any]
    vocab: dict[str, Any]
    vocab_size: int
    valid_words: int = 0  # words in the validation split (the word-perplexity denominator)
    stats: dict[str, Any] = field(default_factory=dict)
    # > 0: the run is counted in epochs (the family's official loop): ``train_batches`` ends each pass with the
    # epoch's last batch, validation follows every epoch and at most this many are trained; 0: the step schedule
    # (``train.max_steps``, ``train.val_every``)
    epochs: int = 0

    def train_batches(self, batch_size: int, seed: int, consumed: Callable[[], int]) -> Any | None:
        """Training batches in an order of the family's own (e.g. consecutive BPTT windows of a stream), or None
        for the shared stream of shuffled examples (``experiments.batching.StepBatches``)."""
        return None

    def valid_batches(self, batch_size: int) -> FixedBatches:
        """Validation batches in corpus order (deterministic, independent of the seed)."""
        size = len(self.valid)
        starts = range(0, size, batch_size)
        return FixedBatches([self.collate(list(self.valid[i : i + batch_size])) for i in starts])


class FixedBatches:
    """A re-iterable, sized sequence of prepared batches (one loader to Lightning, not a list of loaders)."""

    def __init__(self, batches: list[Any]):
        self.batches = batches

    def __iter__(self) -> Iterator[Any]:
        return iter(self.batches)

    def __len__(self) -> int:
        return len(self.batches)



def unigram_nll(train: Sequence[Any], valid: Sequence[Any], vocab_size: int) -> float:
    """Summed NLL of the validation labels under an add-one unigram model of the training labels."""
    counts: Counter[int] = Counter()
    for example, _ in train:
        counts.update(int(x) for x in example.labels[example.labels != 0])
    denom = sum(counts.values()) + vocab_size
    total = 0.0
    for example, _ in valid:
        for x in example.labels[example.labels != 0].tolist():
            total -= math.log((counts.get(x, 0) + 1) / denom)
    return total
