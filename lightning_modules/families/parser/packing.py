"""Seed-group batches of the proposal parsers (``proposal-parser``, ``dep-parser``) packed instead of padded.

A seed group runs all seeds' batches as one tensor with a leading seed axis. Padding every seed's batch to the
longest of the S × B sentences (``SeedStack.stack_chunks``) makes every row as long as that one sentence's action
sequence (and its source as long as the longest source), and attention costs the square of it. Packing instead
puts each seed's sentences, first-fit by decreasing action count, several to a row of one decoder length P
(``lightning_modules.models.packing.row_length``: the smallest power of two holding the longest sentence of any
seed, at least 16); the encoder side of a row holds the same sentences in the same order, in a row of the smallest
power of two (at least 16) holding every seed's fullest row. Each sentence keeps its own tokens and positions:

* ``segments`` [R, P] and ``source_segments`` [R, Ps] number the sentences of a row from 1 (0: unused slots); a
  query attends only to keys of its own sentence in the encoder, the decoder (causally) and the cross-attention
  (``ProposalParser.forward``), so every logit is the one its solo batch computes;
* ``positions`` [R, P] and ``source_positions`` [R, Ps] restart at 0 with every sentence: the parser's positions
  are absolute (sinusoids);
* the index fields move by their sentence's offset: ``word_first`` (a word's first source position) by the
  source offset, ``front`` (a word index) by the word offset, and an empty buffer (``front`` = the sentence's word
  count) becomes the row's word capacity, which ``n_words`` holds for every row (a front at or past ``n_words``
  reads the empty-buffer vector, as in a solo batch);
* unused decoder slots predict nothing (``actions`` 0) and allow every action (a finite softmax).

Every seed gets as many rows as the seed that needs the most (an empty row's slots attend among themselves, so no
query is without keys): the batch is one part, whose loss is the module's own (per seed: the NLL sum over its
actions / their count, as its solo step).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch
from torch import Tensor

from lightning_modules.models.packing import bucket, first_fit, row_length

_SIDES = ("source", "word_first", "n_words", "inputs", "actions", "front", "mask")


def pack(batches: Sequence[Any], stack: Callable[[Sequence[Any]], list[dict[str, Tensor]]], static: bool = False
         ) -> list[dict[str, Tensor]]:
    """S seeds' collated parser batches (or chunk lists of one) -> one group batch of [S, R, ...] tensors (module
    doc); ``stack`` (padding) is not needed: the packed rows have one shape. ``static`` (a compiled group): the
    row count ``bucket``ed, so the layouts come from a small set."""
    originals = [b[0] if isinstance(b, list | tuple) else b for b in batches]
    device = originals[0]["source"].device
    batches = [{k: b[k].cpu().numpy() for k in _SIDES} for b in originals]
    steps = [(b["actions"] != 0).sum(-1) for b in batches]
    sources = [(b["source"] != 0).sum(-1) for b in batches]
    longest = int(max(int(n.max()) for n in steps))
    size = row_length(longest, 2 * longest)  # a power of two: room for shorter sentences beside the longest
    layouts = [first_fit([int(v) for v in n], size) for n in steps]
    rows = max(len(layout) for layout in layouts)
    rows = bucket(rows) if static else rows
    fullest = max(int(n[members].sum()) for n, layout in zip(sources, layouts, strict=True) for members in layout)
    words = max(int(b["n_words"][members].sum()) for b, layout in zip(batches, layouts, strict=True)
                for members in layout)
    shape = (rows, size, row_length(fullest, 2 * fullest), bucket(words) if static else words)
    packed = [_packed(b, layout, shape) for b, layout in zip(batches, layouts, strict=True)]
    return [{name: torch.from_numpy(np.stack([p[name] for p in packed])).to(device) for name in packed[0]}]


def _packed(batch: dict[str, np.ndarray], layout: list[list[int]], shape: tuple[int, int, int, int]
            ) -> dict[str, np.ndarray]:
    """One seed's sentences in ``shape`` = (rows, decoder positions, encoder positions, word slots) (``layout``:
    each row's sentences)."""
    rows, size, source_size, words = shape
    out = {name: np.zeros((rows, size), np.int64) for name in ("inputs", "actions", "front", "positions",
                                                               "segments")}
    out |= {name: np.zeros((rows, source_size), np.int64) for name in ("source", "source_positions",
                                                                      "source_segments")}
    out["word_first"] = np.zeros((rows, words), np.int64)
    out["n_words"] = np.full(rows, words, np.int64)
    out["mask"] = np.ones((rows, size, batch["mask"].shape[-1]), bool)  # unused slots: a finite softmax
    for r, members in enumerate(layout):
        step = source = word = 0
        for k, b in enumerate(members, start=1):
            t, s, w = int((batch["actions"][b] != 0).sum()), int((batch["source"][b] != 0).sum()), \
                int(batch["n_words"][b])
            steps, tokens = slice(step, step + t), slice(source, source + s)
            for name in ("inputs", "actions", "mask"):
                out[name][r, steps] = batch[name][b, :t]
            front = batch["front"][b, :t]
            out["front"][r, steps] = np.where(front < w, front + word, words)
            out["positions"][r, steps] = np.arange(t)
            out["segments"][r, steps] = k
            out["source"][r, tokens] = batch["source"][b, :s]
            out["source_positions"][r, tokens] = np.arange(s)
            out["source_segments"][r, tokens] = k
            out["word_first"][r, word:word + w] = batch["word_first"][b, :w] + source
            step, source, word = step + t, source + s, word + w
    return out
