"""The attention of each next token of a growing TG or TXL sequence, as the chunked forward pass sees it.

Incremental decoding (``TransformerXL.step``) must give every token exactly the keys and relative positions
that ``segment`` + ``chunk_attention`` give it over the whole sequence: its attend list (``TGState`` for TG,
every earlier position for the causal TXL) restricted to keys in its own chunk of L tokens or in that
chunk's memory. The memory of chunk c is fixed when chunk c starts, from the prefix alone:

- ``plain`` (and every causal sequence, whose smart memory is the same thing): the positions of chunk c-1;
- ``smart``: the TG stack after the last token of chunk c-1, keeping the items that were in chunk c-1 or in
  its memory, the newest M = L of them.

``DecodingState`` is that rule one token at a time; ``copy`` branches it (beam search); ``live`` lists the
positions a later token may still attend, so a decoder can drop the keys of all others.
"""

from __future__ import annotations

from lightning_modules.data.encodings.example import RELPOS_MODES
from lightning_modules.data.encodings.segmentation import MEMORY_MODES
from lightning_modules.families.tg.encoding import TGState


class DecodingState:
    """Keys (absolute positions, ascending), raw relative positions and COMPOSE flag of each next token."""

    __slots__ = ("rule", "relpos", "length", "smart", "memory", "position")

    def __init__(self, causal: bool, relpos: str, length: int, memory: str = "smart"):
        if relpos not in RELPOS_MODES:
            raise ValueError(f"relpos must be one of {RELPOS_MODES}, not {relpos!r}")
        if memory not in MEMORY_MODES:
            raise ValueError(f"memory must be one of {MEMORY_MODES}, not {memory!r}")
        if length < 1:
            raise ValueError(f"segment length must be positive, not {length}")
        self.rule = None if causal else TGState(relpos)
        self.relpos = relpos
        self.length = length
        self.smart = memory == "smart" and not causal
        self.memory: frozenset[int] = frozenset()  # positions held in the memory of the current chunk
        self.position = 0  # of the next token

    def copy(self) -> DecodingState:
        state = DecodingState.__new__(DecodingState)
        state.rule = None if self.rule is None else self.rule.copy()
        state.relpos, state.length, state.smart = self.relpos, self.length, self.smart
        state.memory, state.position = self.memory, self.position
        return state

    def step(self, ttype: int) -> tuple[list[int], list[int], bool]:
        """Advance over the next token (its ``TokenType``): (keys, raw relpos, compose)."""
        pos, size = self.position, self.length
        start = pos - pos % size
        if pos and pos == start:
            self.memory = self._next_memory(start)
        if self.rule is None:
            keys = list(range(max(0, start - size), pos + 1))
            depth, depths, compose = 0, None, False
        else:
            keys, depth, compose = self.rule.advance(ttype)
            if start:
                memory = self.memory
                keys = [k for k in keys if k >= start or k in memory]
            depths = self.rule.depths
        self.position = pos + 1
        if self.relpos == "depth":
            return keys, [depth - depths[k] for k in keys], compose
        if self.relpos == "linear":
            return keys, [pos - k for k in keys], compose
        return keys, [0] * len(keys), compose

    def _next_memory(self, start: int) -> frozenset[int]:
        """The memory of the chunk starting at ``start`` (see the module docstring)."""
        if not self.smart:
            return frozenset(range(start - self.length, start))
        previous, memory = start - self.length, self.memory
        kept = [k for k in self.rule.stack if k >= previous or k in memory]
        return frozenset(kept[-self.length:])

    def live(self) -> list[int]:
        """Positions that a later token may still attend (a superset; ascending for causal sequences)."""
        pos, size = self.position, self.length
        start = pos - pos % size
        if self.rule is None:
            return list(range(max(0, start - size), pos))
        return sorted(set(self.rule.stack) | self.memory)
