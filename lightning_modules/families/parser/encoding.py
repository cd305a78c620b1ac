"""The proposal parser's action encoding: Choe–Charniak actions with every word replaced by one SHIFT.

A POS-free tree ``(S (NP the cat) (VP meows))`` over the words ``the cat meows`` is the action sequence
``(S (NP SHIFT SHIFT NP) (VP SHIFT VP) S)``. The words themselves are never predicted: they are the input
the encoder reads, and SHIFT moves the next one into the tree ("grammar as a foreign language" with the
word actions forced). The decoder vocabulary is ``<pad>=0, <s>=1, SHIFT=2``, then one opening action per
label, then the closing actions in the same label order. ``<s>`` is only ever an input (the first one).

Constraints, the same in training (the loss is the log-probability under the constrained softmax) and in
search, make every complete sequence a tree over exactly the input words:

* an opening action only while words remain to be shifted and fewer than ``max_depth`` constituents are
  open (this also bounds unary chains, so the sequence length is finite);
* SHIFT only inside an open constituent, while words remain;
* a closing action only for the label on top of the stack, only once that constituent has a child (no
  terminal-free constituents), and for the root only once every word is shifted;
* the sequence ends when the root closes.

``constraint_fields`` computes, per position of a gold sequence, the three numbers that define the allowed
set (``can_open``, ``can_shift``, ``close_id`` with 0 = no closing allowed); ``ParseState`` computes the same
for many partial sequences at once during search. ``allowed_mask`` turns them into a vocabulary mask.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from lightning_modules.data.tree import Tree, TreeBuilder, bracket_order
from lightning_modules.errors import InputError

PAD, BOS, SHIFT = 0, 1, 2
RESERVED = ("<pad>", "<s>", "SHIFT")


@dataclass(frozen=True)
class ParserVocab:
    """Decoder action ids: reserved, opening actions ``(X``, closing actions ``X)`` (labels sorted)."""

    labels: tuple[str, ...]

    def __post_init__(self) -> None:
        if len(set(self.labels)) != len(self.labels):
            raise InputError("parser vocabulary lists a label twice")
        object.__setattr__(self, "_index", {label: i for i, label in enumerate(self.labels)})

    @classmethod
    def build(cls, trees: Sequence[Tree]) -> ParserVocab:
        """Every constituent label of ``trees`` (POS-free trees: each node is a constituent)."""
        return cls(tuple(sorted({node.label for tree in trees for node in tree.subtrees()})))

    def __len__(self) -> int:
        return len(RESERVED) + 2 * len(self.labels)

    @property
    def first_open(self) -> int:
        return len(RESERVED)

    @property
    def first_close(self) -> int:
        return len(RESERVED) + len(self.labels)

    def open_id(self, label: str) -> int:
        try:
            return self.first_open + self._index[label]  # type: ignore[attr-defined]
        except KeyError:
            raise InputError(f"label {label!r} is not in the parser vocabulary") from None

    def token(self, action: int) -> str:
        """Readable form of an action id: ``(NP``, ``NP)``, ``SHIFT``, ``<s>``."""
        if action < self.first_open:
            return RESERVED[action]
        if action < self.first_close:
            return f"({self.labels[action - self.first_open]}"
        return f"{self.labels[action - self.first_close]})"

    def to_json(self) -> list[str]:
        return list(self.labels)

    @classmethod
    def from_json(cls, data: object) -> ParserVocab:
        if not (isinstance(data, list) and all(isinstance(x, str) for x in data)):
            raise InputError("malformed parser vocabulary (expected a list of labels)")
        return cls(tuple(data))


@dataclass(frozen=True)
class ParserExample:
    """One sentence for the parser: encoder ids and the gold actions with their constraints.

    ``source`` are the encoder's token ids (words, or SentencePiece pieces; never 0), ``word_first[i]`` the
    position in ``source`` of word i's first token. ``actions[t]`` is the action predicted at step t,
    ``inputs[t]`` the decoder input there (``<s>`` then the previous action), ``front[t]`` how many words
    have been shifted before step t (the buffer front; ``n`` once all are shifted).
    """

    source: np.ndarray
    word_first: np.ndarray
    actions: np.ndarray
    inputs: np.ndarray
    front: np.ndarray
    can_open: np.ndarray
    can_shift: np.ndarray
    close_id: np.ndarray

    def __len__(self) -> int:
        return len(self.actions)


def tree_actions(tree: Tree, vocab: ParserVocab) -> list[int]:
    """Action ids of a POS-free tree (each word is one SHIFT); an iterative walk, safe for deep trees."""
    out: list[int] = []
    for item, closing in bracket_order(tree):
        if isinstance(item, str):
            out.append(SHIFT)
        else:
            out.append(vocab.open_id(item.label) + (len(vocab.labels) if closing else 0))
    return out


def constraint_fields(actions: Sequence[int], n_words: int, vocab: ParserVocab, max_depth: int
                      ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(front, can_open, can_shift, close_id) before each action; ValueError if an action breaks a rule."""
    size = len(actions)
    front = np.zeros(size, dtype=np.int64)
    can_open = np.zeros(size, dtype=bool)
    can_shift = np.zeros(size, dtype=bool)
    close_id = np.zeros(size, dtype=np.int64)
    stack: list[int] = []  # label index of each open constituent
    filled: list[bool] = []  # whether it has a child yet
    shifted, done = 0, False
    for t, a in enumerate(actions):
        if done:
            raise ValueError("action after the root closed")
        front[t] = shifted
        can_open[t] = shifted < n_words and len(stack) < max_depth
        can_shift[t] = shifted < n_words and bool(stack)
        if stack and filled[-1] and (len(stack) > 1 or shifted == n_words):
            close_id[t] = vocab.first_close + stack[-1]
        if a == SHIFT and can_shift[t]:
            shifted += 1
            filled[-1] = True
        elif vocab.first_open <= a < vocab.first_close and can_open[t]:
            if filled:
                filled[-1] = True
            stack.append(a - vocab.first_open)
            filled.append(False)
        elif a != 0 and a == close_id[t]:
            stack.pop()
            filled.pop()
            done = not stack
        else:
            raise ValueError(f"action {vocab.token(a)!r} is not allowed at step {t}")
    if not done or shifted != n_words:
        raise ValueError("the actions do not form a complete tree over the words")
    return front, can_open, can_shift, close_id


def encode(tree: Tree, source: Sequence[int], word_first: Sequence[int], vocab: ParserVocab,
           max_depth: int) -> ParserExample:
    """The example of a POS-free gold tree whose words the encoder reads as ``source``."""
    actions = tree_actions(tree, vocab)
    n_words = len(word_first)
    try:
        front, can_open, can_shift, close_id = constraint_fields(actions, n_words, vocab, max_depth)
    except ValueError as e:
        raise InputError(f"{e} (the tree nests deeper than model.max_depth={max_depth}?)") from None
    return ParserExample(
        source=np.asarray(source, dtype=np.int64),
        word_first=np.asarray(word_first, dtype=np.int64),
        actions=np.asarray(actions, dtype=np.int64),
        inputs=np.asarray([BOS, *actions[:-1]], dtype=np.int64),
        front=front, can_open=can_open, can_shift=can_shift, close_id=close_id,
    )


def actions_to_tree(actions: Sequence[int], words: Sequence[str], vocab: ParserVocab) -> Tree:
    """The POS-free tree of a complete action sequence over ``words`` (PAD entries are ignored)."""
    builder, shifted = TreeBuilder(), 0
    for a in actions:
        if a == PAD:
            continue
        if a == SHIFT:
            builder.add(words[shifted])
            shifted += 1
        elif vocab.first_open <= a < vocab.first_close:
            builder.open(vocab.labels[a - vocab.first_open])
        elif a >= vocab.first_close:
            builder.close()
    error = "the action sequence is not a complete tree over the words"
    if shifted != len(words):
        raise ValueError(error)
    return builder.tree(error)


class ParseState:
    """Constraint state of R partial action sequences at once (numpy, vectorised over rows).

    Row r parses a sentence of ``n_words[r]`` words. ``fields()`` gives the arrays ``constraint_fields``
    gives for one gold sequence; ``advance`` applies one action per row (PAD: no change, for rows that are
    finished or unused); ``select`` reorders rows (beam search keeps the children of some rows).
    """

    def __init__(self, n_words: np.ndarray, vocab: ParserVocab, max_depth: int):
        rows = len(n_words)
        self.vocab = vocab
        self.max_depth = max_depth
        self.n_words = np.asarray(n_words, dtype=np.int64)
        self.stack = np.zeros((rows, max_depth), dtype=np.int64)
        self.filled = np.zeros((rows, max_depth), dtype=bool)
        self.depth = np.zeros(rows, dtype=np.int64)
        self.shifted = np.zeros(rows, dtype=np.int64)
        self.finished = np.zeros(rows, dtype=bool)

    def fields(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(can_open, can_shift, close_id) of every row; finished rows allow nothing."""
        live = ~self.finished
        remaining = self.shifted < self.n_words
        can_open = live & remaining & (self.depth < self.max_depth)
        can_shift = live & remaining & (self.depth > 0)
        top = np.maximum(self.depth - 1, 0)
        rows = np.arange(len(top))
        may_close = live & (self.depth > 0) & self.filled[rows, top] & ((self.depth > 1) | ~remaining)
        close_id = np.where(may_close, self.vocab.first_close + self.stack[rows, top], 0)
        return can_open, can_shift, close_id

    def advance(self, actions: np.ndarray) -> None:
        """Apply one (allowed) action per row; PAD leaves a row unchanged."""
        actions = np.asarray(actions, dtype=np.int64)
        rows = np.arange(len(actions))
        first_open, first_close = self.vocab.first_open, self.vocab.first_close
        top = np.maximum(self.depth - 1, 0)
        shift = actions == SHIFT
        opening = (actions >= first_open) & (actions < first_close)
        closing = actions >= first_close
        # a shift or a new child fills the constituent on top
        self.filled[rows[shift | (opening & (self.depth > 0))], top[shift | (opening & (self.depth > 0))]] = True
        self.shifted += shift
        o = rows[opening]
        self.stack[o, self.depth[o]] = actions[o] - first_open
        self.filled[o, self.depth[o]] = False
        self.depth += opening
        self.depth -= closing
        self.finished |= closing & (self.depth == 0)

    def select(self, rows: np.ndarray) -> None:
        """Keep rows ``rows`` (in that order, repeats allowed)."""
        for name in ("n_words", "stack", "filled", "depth", "shifted", "finished"):
            setattr(self, name, getattr(self, name)[rows])


def allowed_mask(can_open: np.ndarray, can_shift: np.ndarray, close_id: np.ndarray, vocab: ParserVocab
                 ) -> np.ndarray:
    """Boolean mask ``[..., len(vocab)]`` of the allowed actions given the constraint fields."""
    mask = np.zeros((*can_open.shape, len(vocab)), dtype=bool)
    mask[..., vocab.first_open : vocab.first_close] = can_open[..., None]
    mask[..., SHIFT] = can_shift
    np.put_along_axis(mask, close_id[..., None], True, axis=-1)
    mask[..., PAD] = False  # close_id 0 means "no closing"
    return mask
