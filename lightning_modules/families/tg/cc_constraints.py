"""Well-formedness of Choe–Charniak action sequences, checked one action at a time.

Sampling (``experiments/sample.py``) and the word-synchronous beam search (``experiments/evaluate/scorers``)
grow action sequences left to right and must only produce prefixes of trees. The rules: the first action
opens the root; a terminal only inside an open constituent; a closing nonterminal only for the constituent on
top of the stack and only once it dominates a terminal; nothing after the root closes. Between two terminals
a well-formed sequence therefore has some closing nonterminals followed by some opening ones.

``CCState`` is immutable (hypotheses of a beam share it freely); ``ActionMasks`` turns a state into the
boolean mask of allowed vocabulary ids; ``build_tree`` turns a complete sequence back into a ``Tree``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from lightning_modules.data.encodings.choe_charniak import EOS, ActionVocab, TokenType
from lightning_modules.data.tree import Tree, TreeBuilder


@dataclass(frozen=True, slots=True)
class CCState:
    """Open constituents of a prefix (labels, outermost first) and how many innermost ones are still empty.

    A terminal fills every open constituent, so the empty ones are always the ``empty`` innermost.
    """

    open: tuple[str, ...] = ()
    empty: int = 0
    started: bool = False

    @property
    def finished(self) -> bool:
        """The root has been closed: the sequence is complete."""
        return self.started and not self.open

    @property
    def can_close(self) -> bool:
        """The top constituent may close now (it dominates a terminal)."""
        return bool(self.open) and self.empty == 0

    def advance(self, ttype: int, token: str) -> CCState:
        """The state after one more action (``token`` with its ``TokenType``); ValueError if not allowed."""
        if self.finished:
            raise ValueError(f"{token!r} after the root closed")
        if ttype == TokenType.ONT:
            return CCState(self.open + (token[1:],), self.empty + 1, True)
        if ttype == TokenType.T:
            if not self.open:
                raise ValueError(f"terminal {token!r} outside any constituent")
            return CCState(self.open, 0, True)
        if ttype == TokenType.CNT:
            if not self.can_close or token != f"{self.open[-1]})":
                raise ValueError(f"{token!r} cannot close here (open: {self.open}, {self.empty} empty)")
            return CCState(self.open[:-1], 0, True)
        raise ValueError(f"token {token!r} of type {ttype} is not a Choe-Charniak action")


class ActionMasks:
    """Vocabulary-wide masks of the action kinds, and the allowed next actions of a state."""

    def __init__(self, vocab: ActionVocab):
        types = vocab.token_types(np.arange(len(vocab)))
        self.vocab = vocab
        self.opening = types == TokenType.ONT
        self.terminal = types == TokenType.T
        if EOS in vocab:
            self.terminal[vocab.id(EOS)] = False  # </s> ends a terminal-only sequence; it is not a word
        self.opening_ids = np.flatnonzero(self.opening)
        self._closing = {vocab.tokens[i][1:]: vocab.id(f"{vocab.tokens[i][1:]})") for i in self.opening_ids}

    def closing_id(self, label: str) -> int:
        return self._closing[label]

    def allowed(self, state: CCState, *, opening: bool = True, terminal: bool = True,
                close_root: bool = True) -> np.ndarray:
        """Boolean mask of the next actions that keep the prefix well-formed.

        ``opening``/``terminal``: whether those kinds are permitted at all now (a length limit, a word
        that is forced); ``close_root``: whether the root may close (not while words remain to be read).
        Before the root opens only opening nonterminals are allowed, whatever the flags.
        """
        if not state.started:
            return self.opening.copy()
        allowed = np.zeros(len(self.opening), dtype=bool)
        if state.finished:
            return allowed
        if opening:
            allowed |= self.opening
        if terminal:
            allowed |= self.terminal
        if state.can_close and (close_root or len(state.open) > 1):
            allowed[self._closing[state.open[-1]]] = True
        return allowed


def build_tree(tokens: Sequence[str], types: Sequence[int]) -> Tree:
    """The tree of a complete Choe–Charniak sequence (``<s>`` and other non-actions are skipped)."""
    builder = TreeBuilder()
    for token, ttype in zip(tokens, types):
        if ttype == TokenType.ONT:
            builder.open(token[1:])
        elif ttype == TokenType.T and builder.stack:
            builder.add(token)
        elif ttype == TokenType.CNT:
            builder.close()
    return builder.tree("the action sequence is not a complete tree")
