"""The Transformer Grammar encoding: duplicated closing nonterminals and STACK/COMPOSE attention.

TG §2.1 (Algorithm 1) as the official C++ library computes it (``masking_rules.cc``):

- **Transform.** Every closing nonterminal becomes two tokens: CNT1 (type ``CNT``, COMPOSE, label 0 = no
  prediction) and CNT2 (type ``CNT2``, STACK, labelled with the token that followed the closing NT). The
  closing NT itself is predicted from the token before CNT1.
- **Depth.** ``<s>`` is the root (depth 0); every other token is a child of the innermost open
  constituent (depth = parent + 1); a closing NT first closes that constituent, so CNT1 and CNT2 have the
  depth of their opening NT.
- **Attention.** COMPOSE (CNT1): the opening NT and its children still on the stack, then itself; those
  are popped and CNT1 is pushed. STACK (everything else): the whole stack plus itself; the token is pushed
  unless it is CNT2.
- **Relative positions.** depth(i) - depth(j) (``linear``: i - j; ``none``: 0; see ``example``).

``TGState`` is the rule one token at a time (sampling, beam search); ``encode`` runs the same state over a
whole sequence and stores the result sparsely in an ``Example``.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from lightning_modules.data.encodings.choe_charniak import Actions, ActionVocab, TokenType
from lightning_modules.data.encodings.example import RELPOS_MODES, Example, relative_positions


class Step(NamedTuple):
    """One token's attention: keys (ascending), their raw relpos, its depth, COMPOSE or not."""

    keys: list[int]
    relpos: list[int]
    depth: int
    compose: bool


class TGState:
    """Incremental STACK/COMPOSE rule over TG-transformed token types (``CNT`` = CNT1, ``CNT2``)."""

    __slots__ = ("relpos", "stack", "open", "depths", "_previous")

    def __init__(self, relpos: str = "depth"):
        if relpos not in RELPOS_MODES:
            raise ValueError(f"relpos must be one of {RELPOS_MODES}, not {relpos!r}")
        self.relpos = relpos
        self.stack: list[int] = []  # positions that may still be attended, ascending
        self.open: list[int] = []  # stack indices of the open constituents, the root (<s>) first
        self.depths: list[int] = []  # depth of every token so far
        self._previous = TokenType.PAD

    def copy(self) -> TGState:
        """An independent state with the same prefix (hypotheses of a beam branch from it)."""
        state = TGState.__new__(TGState)
        state.relpos, state._previous = self.relpos, self._previous
        state.stack, state.open, state.depths = self.stack[:], self.open[:], self.depths[:]
        return state

    @property
    def position(self) -> int:
        """Position of the next token."""
        return len(self.depths)

    def advance(self, ttype: int) -> tuple[list[int], int, bool]:
        """Apply the rule to the next token; returns (keys, depth, compose). ``step`` adds relpos."""
        pos = len(self.depths)
        stack = self.stack
        if ttype == TokenType.PAD:
            raise ValueError(f"position {pos}: padding is not a token of the sequence")
        if pos == 0:  # the root: <s>, whatever its type
            if ttype in (TokenType.CNT, TokenType.CNT2):
                raise ValueError("a sequence cannot start with a closing nonterminal")
            keys, depth, compose = [0], 0, False
            stack.append(0)
            self.open.append(0)
        elif ttype == TokenType.CNT:  # CNT1: COMPOSE
            if len(self.open) == 1:
                raise ValueError(f"position {pos}: closing nonterminal without an open constituent")
            if self._previous == TokenType.ONT:
                raise ValueError(f"position {pos}: empty constituent (a constituent needs a child)")
            k = self.open.pop()
            depth = self.depths[stack[k]]
            keys = stack[k:]
            keys.append(pos)
            del stack[k:]
            stack.append(pos)
            compose = True
        else:  # STACK
            depth = len(self.open)
            keys = stack + [pos]
            if ttype != TokenType.CNT2:
                stack.append(pos)
                if ttype == TokenType.ONT:
                    self.open.append(len(stack) - 1)
            compose = False
        self.depths.append(depth)
        self._previous = ttype
        return keys, depth, compose

    def step(self, ttype: int) -> Step:
        """Apply the rule to the next token and return its attention (keys with raw relpos) and depth."""
        pos = len(self.depths)
        keys, depth, compose = self.advance(ttype)
        key = np.asarray(keys)
        rel = relative_positions(self.relpos, pos, depth, key, np.asarray(self.depths)[key])
        return Step(keys, rel.tolist(), depth, compose)


def transform(actions: Actions, vocab: ActionVocab, unknown: str | None = None
              ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Duplicate closing NTs: (tokens, labels, types, word_index) of the TG sequence, ids from ``vocab``."""
    ids = vocab.ids(actions.tokens, unknown)
    types = np.asarray(actions.types, dtype=np.int8)
    word_index = np.asarray(actions.word_index, dtype=np.int32)
    is_cnt = types == TokenType.CNT
    copies = 1 + is_cnt
    source = np.repeat(np.arange(len(ids)), copies)
    first = np.cumsum(copies) - copies  # transformed position of each original token's first copy
    next_ids = np.append(ids[1:], 0)
    tokens, labels = ids[source], next_ids[source]
    ttypes, windex = types[source], word_index[source]
    labels[first[is_cnt]] = 0  # CNT1 predicts nothing
    ttypes[first[is_cnt] + 1] = TokenType.CNT2
    return tokens, labels, ttypes, windex


def encode(actions: Actions, vocab: ActionVocab, relpos: str = "depth",
           unknown: str | None = None) -> Example:
    """TG-encode one Choe–Charniak sequence (sentence or document) into a sparse ``Example``."""
    tokens, labels, types, word_index = transform(actions, vocab, unknown)
    advance = TGState(relpos).advance
    keys: list[int] = []
    counts: list[int] = []
    depths: list[int] = []
    composes: list[bool] = []
    for ttype in types.tolist():
        k, d, c = advance(ttype)
        keys += k
        counts.append(len(k))
        depths.append(d)
        composes.append(c)
    n = len(tokens)
    depth = np.asarray(depths, dtype=np.int32)
    compose = np.asarray(composes, dtype=bool)
    ptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(counts, out=ptr[1:])
    key = np.asarray(keys, dtype=np.int32)
    query = np.repeat(np.arange(n, dtype=np.int32), counts)
    rel = relative_positions(relpos, query, depth[query], key, depth[key]).astype(np.int32)
    return Example(tokens, labels, types, depth, compose, word_index, ptr, key, rel, relpos)
