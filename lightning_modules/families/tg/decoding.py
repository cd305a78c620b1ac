"""The attention of each next token of many growing TG or TXL sequences, as the chunked forward pass sees it.

Incremental decoding (``TransformerXL.step``) must give every token exactly the keys and relative positions
that ``segment`` + ``chunk_attention`` give it over the whole sequence: its attend list (the TG rule of
``encoding.TGState`` for TG, every earlier position for the causal TXL) restricted to keys in its own chunk of
L tokens or in that chunk's memory. The memory of chunk c is fixed when chunk c starts, from the prefix alone:

- ``plain`` (and every causal sequence, whose smart memory is the same thing): the positions of chunk c-1;
- ``smart``: the TG stack after the last token of chunk c-1, keeping the items that were in chunk c-1 or in
  its memory, the newest M = L of them.

``DecodingRows`` holds that state for many sequences (beam hypotheses) as rows of tensors — each position's
depth and memory flag, the TG stack (positions) and its open constituents (stack indices, the root first) —
and ``AttentionRule.advance`` applies the rule to one token of each of some rows with tensor operations (no
per-sequence Python); a branch is an ``index_select`` of the rows. ``AttentionRule.live`` marks the positions
a later token may still attend, so a decoder can drop the keys of all others.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from lightning_modules.data.encodings.choe_charniak import TokenType
from lightning_modules.data.encodings.example import RELPOS_MODES
from lightning_modules.data.encodings.segmentation import MEMORY_MODES


@dataclass
class DecodingRows:
    """Sequences being decoded, one row each; widths (positions P, stack S, open constituents O) are the
    caller's to keep large enough (``AttentionRule.advance`` writes at column ``position``, ``stack_len`` and
    ``open_len``)."""

    depths: Tensor  # [H, P] depth of each position
    memory: Tensor  # [H, P] bool: held in the memory of the current chunk
    position: Tensor  # [H] of the next token
    stack: Tensor  # [H, S] TG stack (positions, ascending)
    stack_len: Tensor  # [H]
    open_at: Tensor  # [H, O] stack index of each open TG constituent (the root first)
    open_len: Tensor  # [H]

    @staticmethod
    def empty(count: int, device: torch.device | str = "cpu") -> dict[str, Tensor]:
        """The fields of ``count`` sequences before their first token (one column each)."""
        def zeros(*shape: int) -> Tensor:
            return torch.zeros(shape, dtype=torch.long, device=device)

        return {"depths": zeros(count, 1), "memory": zeros(count, 1).bool(), "position": zeros(count),
                "stack": zeros(count, 1), "stack_len": zeros(count), "open_at": zeros(count, 1),
                "open_len": zeros(count)}


class AttentionRule:
    """The attend lists of a model's sequences: TG (``causal`` False) or TXL, its relpos, chunk and memory."""

    def __init__(self, causal: bool, relpos: str, length: int, memory: str = "smart"):
        if relpos not in RELPOS_MODES:
            raise ValueError(f"relpos must be one of {RELPOS_MODES}, not {relpos!r}")
        if memory not in MEMORY_MODES:
            raise ValueError(f"memory must be one of {MEMORY_MODES}, not {memory!r}")
        if length < 1:
            raise ValueError(f"segment length must be positive, not {length}")
        self.causal, self.relpos, self.length = causal, relpos, length
        self.smart = memory == "smart" and not causal

    def advance(self, h: DecodingRows, index: Tensor | None, ttype: Tensor, first_chunk: bool = False
                ) -> tuple[Tensor, Tensor, Tensor]:
        """Advance rows ``index`` (distinct; None: every row, whose fields are then replaced, not written)
        over one token each, of ``TokenType`` ``ttype`` (the first token of a sequence is its root whatever
        its type): (key positions [n, W] ascending, -1 padding among them; raw relative positions [n, W];
        COMPOSE [n]). ``first_chunk``: the caller knows every token is in its sequence's first chunk (no
        memory yet, none to start), so that bookkeeping is skipped."""
        def rows(t: Tensor) -> Tensor:
            return t if index is None else t[index]

        pos = rows(h.position)
        size = self.length
        if self.causal:
            start = pos - pos % size
            first = (start - size).clamp(min=0)
            keys = first[:, None] + torch.arange(min(h.depths.shape[1], 2 * size), device=pos.device)
            keys = keys.masked_fill(keys > pos[:, None], -1)
            rel = (pos[:, None] - keys) if self.relpos == "linear" else torch.zeros_like(keys)
            _store(h, index, position=pos + 1)
            return keys, rel.masked_fill(keys < 0, 0), torch.zeros_like(pos, dtype=torch.bool)
        stack, stack_len, open_at, open_len = rows(h.stack), rows(h.stack_len), rows(h.open_at), rows(h.open_len)
        depths, memory = rows(h.depths), None if first_chunk else rows(h.memory)
        slots = torch.arange(stack.shape[1], device=pos.device)
        in_stack = slots < stack_len[:, None]
        compose = (ttype == TokenType.CNT) & (pos > 0)
        top = open_at.gather(1, (open_len - 1).clamp(min=0)[:, None])[:, 0]  # innermost open constituent
        valid = in_stack & (slots >= torch.where(compose, top, 0)[:, None])
        if not first_chunk:
            start = pos - pos % size
            new_chunk = (pos > 0) & (pos == start)
            if self.smart:  # the stack's items from the last chunk or its memory, the newest L of them
                keep = in_stack & ((stack >= (start - size)[:, None]) | memory.gather(1, stack))
                keep &= keep.flip(1).cumsum(1).flip(1) <= size
                fresh = scatter_true(memory.shape, stack, keep)
            else:
                columns = torch.arange(memory.shape[1], device=pos.device)
                fresh = (columns >= (start - size)[:, None]) & (columns < start[:, None])
            memory = torch.where(new_chunk[:, None], fresh, memory)
            valid &= (start[:, None] == 0) | (stack >= start[:, None]) | memory.gather(1, stack)
        depth = torch.where(compose, depths.gather(1, stack.gather(1, top[:, None]))[:, 0], open_len)
        keys = torch.cat([stack.masked_fill(~valid, -1), pos[:, None]], dim=1)
        if self.relpos == "depth":
            rel = depth[:, None] - depths.gather(1, keys.clamp(min=0))
            rel[:, -1] = 0
        elif self.relpos == "linear":
            rel = pos[:, None] - keys
        else:
            rel = torch.zeros_like(keys)
        # the state after the token: COMPOSE pops the constituent and pushes itself; STACK pushes itself
        # (not CNT2), an opening one (or the root) also opens a constituent
        depths = depths.scatter(1, pos[:, None], depth[:, None])
        pushes = ttype != TokenType.CNT2
        slot = torch.where(compose, top, stack_len)
        stack = torch.where(pushes[:, None] & (slots == slot[:, None]), pos[:, None], stack)
        opens = ((ttype == TokenType.ONT) | (pos == 0)) & ~compose
        open_slots = torch.arange(open_at.shape[1], device=pos.device)
        open_at = torch.where(opens[:, None] & (open_slots == open_len[:, None]), stack_len[:, None], open_at)
        _store(h, index, open_len=open_len + opens.long() - compose.long(),
               stack_len=torch.where(compose, top + 1, stack_len + pushes.long()), stack=stack, open_at=open_at,
               depths=depths, position=pos + 1, **({} if first_chunk else {"memory": memory}))
        return keys, rel.masked_fill(keys < 0, 0), compose

    def live(self, h: DecodingRows) -> Tensor:
        """[H, P] bool: the positions a later token of each row may still attend (a superset)."""
        columns = torch.arange(h.depths.shape[1], device=h.depths.device)
        if self.causal:
            start = h.position - h.position % self.length
            return (columns >= (start - self.length)[:, None]) & (columns < h.position[:, None])
        slots = torch.arange(h.stack.shape[1], device=h.stack.device)
        return h.memory | scatter_true(h.memory.shape, h.stack, slots < h.stack_len[:, None])


def _store(h: DecodingRows, index: Tensor | None, **values: Tensor) -> None:
    """Write the rows ``index`` of the fields ``values`` (None: the fields become them)."""
    for name, value in values.items():
        if index is None:
            setattr(h, name, value)
        else:
            getattr(h, name)[index] = value


def scatter_true(shape: torch.Size, index: Tensor, flags: Tensor) -> Tensor:
    """A bool tensor of ``shape`` true at columns ``index`` [n, k] where ``flags`` [n, k]."""
    out = torch.zeros((shape[0], shape[1] + 1), dtype=torch.bool, device=index.device)
    out.scatter_(1, torch.where(flags, index, shape[1]), True)
    return out[:, : shape[1]]
