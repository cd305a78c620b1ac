"""Seed-group batches of Pushdown-LM / Base-LM packed instead of padded.

A seed group runs all seeds' batches as one tensor with a leading seed axis. Padding every seed's batch to the
longest of the S × B sentences (``SeedStack.stack_chunks``) makes every row as long as that one sentence, and
attention costs the square of it. Packing instead puts each seed's sentences, first-fit by decreasing length,
several to a row of one length P (``lightning_modules.models.packing.row_length``: the smallest power of two
holding the longest sentence of any seed, at least 16); each sentence keeps its own tokens, tape block and positions:

* a ``segments`` field [R, P] numbers the sentences of a row from 1 (0: unused slots); a query attends only to
  keys of its own segment (``PushdownLM.hidden_states``), and its attachment columns are its own segment's
  tokens and its shift column (``AttachmentHead``), so every logit is the one its solo batch computes: the
  attention's relative positions and the attachment head's distances depend on differences of positions only;
* a sentence at offset o has its tape block at [o, o + n) × [o, o + n) and its attachment labels (a token's
  position, or shift at t + 1) moved by o; 0 (no label) stays 0;
* ``lengths`` is the row's last used position + 1 (the causal mask's padding rule still holds).

Every seed gets as many rows as the seed that needs the most (empty rows read one padding slot, so no query is
without keys, and predict nothing): the batch is one
vmapped forward, whose loss terms are the module's own (the joint loss of two means is not a sum over parts).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch
from torch import Tensor

from lightning_modules.models.packing import bucket, first_fit, row_length


def pack(batches: Sequence[Any], stack: Callable[[Sequence[Any]], list[dict[str, Tensor]]], static: bool = False
         ) -> list[dict[str, Tensor]]:
    """S seeds' ``PushdownBatch``es (or chunk lists of one) -> one group batch of [S, R, ...] tensors (module
    doc); ``stack`` (padding) is not needed: the packed rows have one shape. ``static`` (a compiled group): the
    row count ``bucket``ed, so the layouts come from a small set."""
    batches = [b[0] if isinstance(b, list | tuple) else b for b in batches]
    lengths = [b.lengths.cpu().numpy() for b in batches]
    longest = int(max(int(n.max()) for n in lengths))
    size = row_length(longest, 2 * longest)  # a power of two: room for shorter sentences beside the longest
    layouts = [first_fit([int(v) for v in n], size) for n in lengths]
    rows = max(len(layout) for layout in layouts)
    rows = bucket(rows) if static else rows
    packed = [_packed(b, n, layout, rows, size) for b, n, layout in zip(batches, lengths, layouts, strict=True)]
    device = batches[0].inputs.device
    return [{name: torch.from_numpy(np.stack([p[name] for p in packed])).to(device) for name in packed[0]}]


def _packed(batch: Any, lengths: np.ndarray, layout: list[list[int]], rows: int, size: int) -> dict[str, np.ndarray]:
    """One seed's sentences in ``rows`` rows of ``size`` positions (``layout``: each row's sentences)."""
    inputs, targets, attachment = (t.cpu().numpy() for t in (batch.inputs, batch.targets, batch.attachment))
    tape = batch.tape.cpu().numpy()
    out = {"inputs": np.zeros((rows, size), np.int64), "targets": np.zeros((rows, size), np.int64),
           "attachment": np.zeros((rows, size), np.int64), "tape": np.zeros((rows, size, size), np.int64),
           "lengths": np.zeros(rows, np.int64), "segments": np.zeros((rows, size), np.int64)}
    for r, members in enumerate(layout):
        offset = 0
        for k, b in enumerate(members, start=1):
            n = int(lengths[b])
            window = slice(offset, offset + n)
            out["inputs"][r, window] = inputs[b, :n]
            out["targets"][r, window] = targets[b, :n]
            out["attachment"][r, window] = np.where(attachment[b, :n] != 0, attachment[b, :n] + offset, 0)
            out["tape"][r, window, window] = tape[b, :n, :n]
            out["segments"][r, window] = k
            offset += n
        out["lengths"][r] = offset
    out["lengths"][len(layout):] = 1  # an empty row reads one padding slot: no query without keys (NaN)
    return out
