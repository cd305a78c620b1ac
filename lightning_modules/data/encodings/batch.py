"""Collate: dense tensors of one chunk for a batch of encoded sequences (the network's input contract).

Each batch row is one (Example, Segmentation, chunk index), or ``None`` for an empty row, so both a
fixed batch stepping through its chunks and a stream that starts a new sequence in a row when the
previous one ends (as the official data pipeline does) are served. Padding queries attend to nothing.

Tensors (B rows, L = segment length (or the longest chunk, see ``trim``), M = memory length; columns
are memory slots first, then the chunk):
  inputs [B,L] long, labels [B,L] long (0 = no loss), types [B,L] long, word_index [B,L] long (-1 = none),
  compose [B,L] bool, attn_mask [B,L,M+L] bool, relpos [B,L,M+L] long (raw, unclipped),
  mem_src [B,M] long (how to gather the next memory from concat(memory, chunk); -1 = empty slot),
  reset [B] bool (first chunk of a sequence: the incoming memory must be cleared).
The two [B,L,M+L] tensors are densified lazily from sparse entries (see ``Batch``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property

import numpy as np
import torch

from lightning_modules.data.encodings.example import Example
from lightning_modules.data.encodings.segmentation import Segmentation, chunk_attention

Row = tuple[Example, Segmentation, int]


@dataclass
class Batch:
    """One chunk of a batch. ``attn_mask``/``relpos`` are built on first use, on the batch's device.

    They are stored as ``attn_index`` (flat indices into [B, L, M+L]) and ``attn_relpos`` (their raw
    relpos), so a loader ships O(attended pairs) to the device instead of O(B·L·(M+L)); call ``to``
    before reading ``attn_mask``/``relpos`` so they are densified where the model runs.
    """

    inputs: torch.Tensor
    labels: torch.Tensor
    types: torch.Tensor
    word_index: torch.Tensor
    compose: torch.Tensor
    mem_src: torch.Tensor
    reset: torch.Tensor
    attn_index: torch.Tensor
    attn_relpos: torch.Tensor

    @property
    def shape(self) -> tuple[int, int, int]:
        """(B, L, M + L) of ``attn_mask`` and ``relpos``."""
        b, size = self.inputs.shape
        return b, size, self.mem_src.shape[1] + size

    @cached_property
    def attn_mask(self) -> torch.Tensor:
        mask = _zeros(self.shape, torch.bool, self.attn_index.device)
        mask.view(-1)[self.attn_index] = True
        return mask

    @cached_property
    def relpos(self) -> torch.Tensor:
        rel = _zeros(self.shape, torch.long, self.attn_index.device)
        rel.view(-1)[self.attn_index] = self.attn_relpos
        return rel

    def to(self, device: torch.device | str, non_blocking: bool = False) -> Batch:
        names = ("inputs", "labels", "types", "word_index", "compose", "mem_src", "reset", "attn_index",
                 "attn_relpos")
        return Batch(**{n: getattr(self, n).to(device, non_blocking=non_blocking) for n in names})


def _zeros(shape: tuple[int, ...], dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    """Zeros; on the CPU from ``np.zeros`` (calloc: untouched pages are never written, only mapped)."""
    if device.type == "cpu":
        return torch.from_numpy(np.zeros(shape, dtype=torch.empty(0, dtype=dtype).numpy().dtype))
    return torch.zeros(shape, dtype=dtype, device=device)


def collate(rows: Sequence[Row | None], length: int, memory_length: int | None = None, trim: bool = False) -> Batch:
    """Tensors of the given (example, segmentation, chunk) rows; see the module docstring.

    With ``trim`` the chunk dimension is cut to the longest chunk among the rows instead of the segment
    length: padding attends to and is attended by nothing, so results are unchanged and short sentences no
    longer pay for a full segment (training and scoring use it; the official layout keeps full segments).
    """
    mem = length if memory_length is None else memory_length
    size = length
    if trim:
        size = max([min(length, len(r[0]) - int(r[1].starts[r[2]])) for r in rows if r is not None] or [1])
    width = mem + size
    b = len(rows)
    per_token = {name: np.zeros((b, size), dtype=np.int64) for name in ("inputs", "labels", "types")}
    word_index = np.full((b, size), -1, dtype=np.int64)
    compose = np.zeros((b, size), dtype=bool)
    mem_src = np.full((b, mem), -1, dtype=np.int64)
    reset = np.zeros(b, dtype=bool)
    flat_index, flat_rel = [np.zeros(0, dtype=np.int64)], [np.zeros(0, dtype=np.int64)]
    for r, row in enumerate(rows):
        if row is None:
            continue
        example, seg, chunk = row
        if seg.length != length or seg.memory_length != mem:
            raise ValueError(f"row {r}: segmented with L={seg.length}, M={seg.memory_length}, "
                             f"not L={length}, M={mem}")
        start = int(seg.starts[chunk])
        end = min(start + size, len(example))
        n = end - start
        per_token["inputs"][r, :n] = example.tokens[start:end]
        per_token["labels"][r, :n] = example.labels[start:end]
        per_token["types"][r, :n] = example.types[start:end]
        word_index[r, :n] = example.word_index[start:end]
        compose[r, :n] = example.compose[start:end]
        mem_src[r] = seg.mem_src[chunk]
        reset[r] = chunk == 0
        att = chunk_attention(example, seg, chunk)
        flat_index.append((r * size + att.query) * width + att.column)
        flat_rel.append(att.relpos)
    return Batch(
        inputs=torch.from_numpy(per_token["inputs"]),
        labels=torch.from_numpy(per_token["labels"]),
        types=torch.from_numpy(per_token["types"]),
        word_index=torch.from_numpy(word_index),
        compose=torch.from_numpy(compose),
        mem_src=torch.from_numpy(mem_src),
        reset=torch.from_numpy(reset),
        attn_index=torch.from_numpy(np.concatenate(flat_index)),
        attn_relpos=torch.from_numpy(np.concatenate(flat_rel)),
    )


def collate_chunk(examples: Sequence[Example], segmentations: Sequence[Segmentation], chunk: int,
                  trim: bool = False) -> Batch:
    """Chunk ``chunk`` of every sequence of a fixed batch; sequences with fewer chunks give empty rows."""
    if not segmentations:
        raise ValueError("an empty batch has no segment length")
    seg0 = segmentations[0]
    rows = [(ex, seg, chunk) if chunk < len(seg) else None for ex, seg in zip(examples, segmentations)]
    return collate(rows, seg0.length, seg0.memory_length, trim)
