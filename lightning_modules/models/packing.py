"""Seed-group batches of the Transformer-XL core packed instead of padded.

A seed group runs all seeds' batches as one tensor with a leading seed axis, so every seed's batch must have one
shape. Padding each seed's chunks to the largest seed's (``SeedStack.stack_chunks``) makes the longest of S × B
sentences set everyone's chunk count and length, and keeps the memory columns for all. Packing does only the
useful work:

* **single-chunk sequences** (those that start and end in a batch's first chunk: at sentence level, all but the
  sentences longer than the segment) are packed, first-fit by decreasing length, into rows of one length P,
  several sentences per row. A packed row's attention mask is block-diagonal: each sentence's block is its own
  chunk mask (the family's mask rule), with its relative positions, so no token sees another sentence. These
  rows attend to no memory (the chunk has no ``mem_src``: decided here, on the host, not by a branch on tensor
  values), so their attention has P key columns, not M + P. P is the smallest power of two (at least 16, at
  most the batch's chunk length) holding the longest such sequence of any seed. The rows every seed fills form
  one part over all seeds; each further row count that fewer seeds reach forms a part over those seeds only, so
  no seed computes an empty row;
* **sequences longer than a chunk** keep a row each across their chunks, with their memory, as the solo run
  computes them: a part over the seeds that have one (``stack_chunks``, padded among them only); a step where no
  seed has one has no such part.

A part over some seeds runs the vmapped forward on those seeds' parameters alone (``SeedStack.losses``).

**Static layouts** (``static=True``: a compiled group, ``SeedStack.compile``): a compiled step is specialised to
its tensors' shapes, and a CUDA graph replays one layout only, so the layouts must come from a small set. Then
both parts run over all seeds (a seed with fewer rows gets empty rows, which attend to and predict nothing), and
their row counts are rounded up to a ``bucket`` (a power of two or 1.5 times one: at most a third of the rows
empty), P is a power of two even above the batch's chunk length, and every chunk of the longer sequences is
padded to the length of the first (which such a sequence fills). The layout of a step is then (P, bucketed
rows, and for the longer sequences: chunks, bucketed rows), a few dozen at most for a preset, each compiled
once.

A seed's loss stays its solo run's: the sum of its tokens' NLL over both parts divided by their count. Each
sequence's logits equal its solo ones (a row's attention is restricted to its own sentence and the packed
positions carry its relative positions), float rounding apart.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor

MIN_ROW = 16  # the shortest packed row: smaller rows save nothing and multiply shapes
PER_ROW = ("mem_src", "reset")  # chunk fields per row or over the memory, not per query position

Field = Callable[[Any, str], Tensor | None]


def row_length(longest: int, limit: int) -> int:
    """P: the smallest power of two >= ``longest`` (at least ``MIN_ROW``), at most ``limit``."""
    size = MIN_ROW
    while size < longest:
        size *= 2
    return max(min(size, limit), longest)


def bucket(n: int) -> int:
    """The smallest of 1, 2, 3, 4, 6, 8, 12, 16, 24, ... (powers of two and 1.5 times them) that is >= ``n``."""
    size = 1
    while size < n:
        if size >= 2 and size * 3 // 2 >= n:
            return size * 3 // 2
        size *= 2
    return size


def first_fit(lengths: Sequence[int], capacity: int) -> list[list[int]]:
    """Indices of ``lengths`` in rows of ``capacity``: first fit by decreasing length (ties: index order)."""
    rows: list[list[int]] = []
    free: list[int] = []
    for i in sorted(range(len(lengths)), key=lambda i: (-lengths[i], i)):
        for r, room in enumerate(free):
            if lengths[i] <= room:
                rows[r].append(i)
                free[r] -= lengths[i]
                break
        else:
            rows.append([i])
            free.append(capacity - lengths[i])
    return rows


def _split(chunks: Sequence[Any], field: Field) -> tuple[list[int], list[int], list[int]]:
    """Rows of a batch: single-chunk ones with their lengths (last query that attends + 1), and the others."""
    first = field(chunks[0], "attn_mask")
    occupied = first.any(-1)
    continues = torch.zeros(first.shape[0], dtype=torch.bool)
    for chunk in chunks[1:]:
        continues |= field(chunk, "attn_mask").any(-1).any(-1).cpu()
    positions = torch.arange(1, occupied.shape[1] + 1)
    lengths = (occupied.cpu() * positions).amax(-1)
    single = [b for b in range(first.shape[0]) if not continues[b] and lengths[b] > 0]
    long = [b for b in range(first.shape[0]) if continues[b]]
    return single, [int(lengths[b]) for b in single], long


@dataclass(frozen=True)
class Part:
    """Chunks of stacked [n, ...] tensors for the seeds ``seeds`` (indices into the group, n of them; None: all)."""

    seeds: list[int] | None
    chunks: list[dict[str, Tensor]]


def pack(batches: Sequence[Sequence[Any]], padding: Mapping[str, int | bool], field: Field,
         stack: Callable[[Sequence[Any]], list[dict[str, Tensor]]], static: bool = False) -> list[Part]:
    """S seeds' batches (lists of Transformer-XL chunks) -> the parts of one group step (see the module
    docstring): packed rows of [R, P] without memory — as many rows as every seed fills for all seeds, then the
    further rows over the seeds that fill them — and the rows of sequences longer than a chunk, ``stack``ed
    across the seeds that have them. ``static``: both parts over all seeds, their row counts ``bucket``ed."""
    splits = [_split(chunks, field) for chunks in batches]
    longest = max((n for _, lengths, _ in splits for n in lengths), default=0)
    parts: list[Part] = []
    if longest:
        limit = 2 * longest if static else max(field(chunks[0], "inputs").shape[1] for chunks in batches)
        size = row_length(longest, limit)  # static: always a power of two
        layouts = [first_fit(lengths, size) for _, lengths, _ in splits]
        names = [n for n in padding if n not in PER_ROW and field(batches[0][0], n) is not None]

        def packed(seeds: list[int], rows: slice, count: int) -> dict[str, Tensor]:
            one = [_packed_rows(batches[s][0], splits[s][0], splits[s][1], layouts[s][rows], count, size, names,
                                padding, field) for s in seeds]
            return {n: torch.stack([p[n] for p in one]) for n in names}

        level, seeds = 0, list(range(len(batches)))
        if static:  # one part over all seeds, its row count bucketed
            rows = bucket(max(len(layout) for layout in layouts))
            parts.append(Part(None, [packed(seeds, slice(0, rows), rows)]))
        while seeds and not static:  # rows level.. that the same seeds fill: one part over them, no empty rows
            end = min(len(layouts[s]) for s in seeds)
            parts.append(Part(seeds if len(seeds) < len(batches) else None,
                              [packed(seeds, slice(level, end), end - level)]))
            level, seeds = end, [s for s in seeds if len(layouts[s]) > end]
    longer = [s for s, (_, _, long) in enumerate(splits) if long]
    if longer and static:
        longer = list(range(len(batches)))
    if longer:
        most = max(len(splits[s][2]) for s in longer)
        most = bucket(most) if static else most
        rows = [[_rows(chunk, splits[s][2], most, padding, field)
                 for chunk in batches[s][:_last(batches[s], splits[s][2], field)]] for s in longer]
        chunks = stack(rows)
        if static:  # every chunk as long as the first, which a sequence longer than a chunk fills
            chunks = [_static_length(c, chunks[0]["inputs"].shape[2], padding) for c in chunks]
        parts.append(Part(longer if len(longer) < len(batches) else None, chunks))
    return parts


def _static_length(chunk: dict[str, Tensor], target: int, padding: Mapping[str, int | bool]) -> dict[str, Tensor]:
    """A stacked chunk of [S, R, L, ...] fields with its length L (the collate trims a chunk to its longest
    sequence) padded at the end to ``target``: the queries and their key columns (after the M memory ones),
    padding that attends to and predicts nothing."""
    length = chunk["inputs"].shape[2]
    if target == length:
        return chunk
    out = {}
    for name, value in chunk.items():
        if name in PER_ROW:  # no query positions
            out[name] = value
            continue
        pad = [0, target - length] if value.dim() == 3 else [0, target - length, 0, target - length]
        if value.dtype == torch.bool:
            out[name] = F.pad(value.to(torch.uint8), pad, value=int(padding[name])).bool()
        else:
            out[name] = F.pad(value, pad, value=padding[name])
    return out


def _last(chunks: Sequence[Any], rows: list[int], field: Field) -> int:
    """How many chunks the given rows occupy (0 for none)."""
    if not rows:
        return 0
    index = torch.tensor(rows)
    return max(c + 1 for c, chunk in enumerate(chunks) if field(chunk, "attn_mask")[index].any())


def _rows(chunk: Any, rows: list[int], count: int, padding: Mapping[str, int | bool], field: Field
          ) -> dict[str, Tensor]:
    """The given rows of a chunk, every field it has, and empty rows up to ``count`` (every seed's part has as
    many rows in every chunk)."""
    index = torch.tensor(rows, dtype=torch.long)
    out = {}
    for name in padding:
        value = field(chunk, name)
        if value is not None:
            empty = torch.full((count - len(rows), *value.shape[1:]), padding[name], dtype=value.dtype,
                               device=value.device)
            out[name] = torch.cat([value[index.to(value.device)], empty])
    return out


def _packed_rows(chunk: Any, single: list[int], lengths: list[int], layout: list[list[int]], rows: int,
                 size: int, names: list[str], padding: Mapping[str, int | bool], field: Field) -> dict[str, Tensor]:
    """One seed's single-chunk sequences of ``chunk`` packed into ``rows`` rows of ``size`` (``layout``: the
    indices into ``single`` of each row's sequences, in order)."""
    mask = field(chunk, "attn_mask")
    device = mask.device
    memory = mask.shape[-1] - mask.shape[1]
    source_row = torch.full((rows, size), -1, dtype=torch.long)  # the batch row and position of every slot
    source_pos = torch.zeros((rows, size), dtype=torch.long)
    for r, members in enumerate(layout):
        offset = 0
        for i in members:
            n = lengths[i]
            source_row[r, offset:offset + n] = single[i]
            source_pos[r, offset:offset + n] = torch.arange(n)
            offset += n
    source_row, source_pos = source_row.to(device), source_pos.to(device)
    valid = source_row >= 0
    b, i = source_row.clamp(min=0), source_pos
    same = (source_row[:, :, None] == source_row[:, None, :]) & valid[:, :, None] & valid[:, None, :]
    out: dict[str, Tensor] = {}
    for name in names:
        value = field(chunk, name)
        if name in ("attn_mask", "relpos"):
            gathered = value[b[:, :, None], i[:, :, None], memory + i[:, None, :]]
            out[name] = torch.where(same, gathered, torch.zeros((), dtype=value.dtype, device=device))
        else:
            fill = torch.full((), padding[name], dtype=value.dtype, device=device)
            out[name] = torch.where(valid, value[b, i], fill)
    return out
