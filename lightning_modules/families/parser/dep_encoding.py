"""The dependency proposal parser's actions: canonical unlabelled arc-standard, one SHIFT per input word.

A projective single-root tree over n words is the discriminative form of DTG's arc-standard oracle
(``data/encodings/transitions.py``: the official ``conll_to_dep.py``): GEN becomes SHIFT (the word is read, not
predicted), then LEFT (s1 <- s0), RIGHT (s1 -> s0) and ROOT (the last word on the stack is the root). The
decoder vocabulary is ``<pad>=0, <s>=1, SHIFT=2, LEFT=3, RIGHT=4, ROOT=5``; ``<s>`` is only an input.

Constraints, the same in training (the loss is the log-probability under the constrained softmax) and in
search, make every complete sequence a tree over exactly the input words, **and each tree one sequence**:

* SHIFT while words remain; LEFT and RIGHT with two words on the stack; ROOT with one word and none left;
* LEFT only while s0 has no right dependent yet (*canonical order*: a head takes its left dependents before its
  right ones, as the oracle does). Plain arc-standard reaches a head with left and right dependents in several
  orders; this rule keeps exactly the oracle's, so distinct sequences are distinct trees (sampling sequences
  without replacement samples trees without replacement), and q(y | x) is the probability of the sequence.

No state is a dead end: with two or more words RIGHT is always allowed, with one word either SHIFT or ROOT.
``DepParseState`` holds many partial sequences at once (numpy, vectorised over rows) for search; the same
state run over a gold sequence gives its training masks (``gold_masks``).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from lightning_modules.data.encodings import transitions as tr

PAD, BOS, SHIFT, LEFT, RIGHT, ROOT = range(6)
TOKENS = ("<pad>", "<s>", "SHIFT", "LEFT", "RIGHT", "ROOT")
VOCAB_SIZE = len(TOKENS)
_TO_TRANSITION = {SHIFT: tr.GEN, LEFT: tr.Transition(tr.LEFT_ARC), RIGHT: tr.Transition(tr.RIGHT_ARC),
                  ROOT: tr.Transition(tr.POP_ROOT)}
_FROM_ACTION = {t.action: a for a, t in _TO_TRANSITION.items()}


def tree_actions(heads: Sequence[int]) -> list[int]:
    """The action ids of a projective tree (``heads`` 1-based, 0 = root): DTG's arc-standard oracle with SHIFT
    for GEN. ``ValueError`` if the tree is not projective."""
    return [_FROM_ACTION[t.action] for t in tr.oracle(heads, "standard")]


def actions_to_heads(actions: Sequence[int]) -> tuple[int, ...]:
    """The heads of a complete action sequence (PAD entries ignored); ``ValueError`` if it is not one."""
    return tr.arc_standard_heads([_TO_TRANSITION[a] for a in actions if a != PAD])


class DepParseState:
    """Constraint state of R partial action sequences (row r parses ``n_words[r]`` words).

    ``allowed()`` is the [R, VOCAB_SIZE] mask of the next action (nothing for finished rows), ``shifted`` the
    buffer front (the next word SHIFT reads), ``advance`` applies one action per row (PAD: unchanged),
    ``select`` reorders rows (search keeps the children of some rows).
    """

    def __init__(self, n_words: np.ndarray):
        self.n_words = np.asarray(n_words, dtype=np.int64)
        rows, width = len(self.n_words), int(self.n_words.max(initial=0)) + 1
        self.stack = np.zeros((rows, width), dtype=np.int64)  # word indices (0-based), bottom first
        self.has_right = np.zeros((rows, width), dtype=bool)  # the stack word has a right dependent
        self.depth = np.zeros(rows, dtype=np.int64)
        self.shifted = np.zeros(rows, dtype=np.int64)
        self.finished = np.zeros(rows, dtype=bool)

    def allowed(self) -> np.ndarray:
        live = ~self.finished
        rows = np.arange(len(self.depth))
        top_right = self.has_right[rows, np.maximum(self.depth - 1, 0)]
        mask = np.zeros((len(rows), VOCAB_SIZE), dtype=bool)
        remaining = self.shifted < self.n_words
        mask[:, SHIFT] = live & remaining
        mask[:, LEFT] = live & (self.depth >= 2) & ~top_right
        mask[:, RIGHT] = live & (self.depth >= 2)
        mask[:, ROOT] = live & (self.depth == 1) & ~remaining
        return mask

    def advance(self, actions: np.ndarray) -> None:
        """Apply one allowed action per row (``ValueError`` for a forbidden one); PAD leaves a row as it is."""
        actions = np.asarray(actions, dtype=np.int64)
        real = actions != PAD
        if not self.allowed()[np.arange(len(actions))[real], actions[real]].all():
            raise ValueError("an action the constraints forbid")
        rows = np.arange(len(actions))
        top = np.maximum(self.depth - 1, 0)
        shift = rows[actions == SHIFT]
        self.stack[shift, self.depth[shift]] = self.shifted[shift]
        self.has_right[shift, self.depth[shift]] = False
        self.shifted[shift] += 1
        self.depth[shift] += 1
        left = rows[actions == LEFT]  # s1 <- s0: s0 moves down into s1's place
        self.stack[left, top[left] - 1] = self.stack[left, top[left]]
        self.has_right[left, top[left] - 1] = self.has_right[left, top[left]]
        self.depth[left] -= 1
        right = rows[actions == RIGHT]  # s1 -> s0: s0 is popped, s1 has a right dependent
        self.has_right[right, top[right] - 1] = True
        self.depth[right] -= 1
        root = rows[actions == ROOT]
        self.depth[root] = 0
        self.finished[root] = True

    def select(self, rows: np.ndarray) -> None:
        """Keep rows ``rows`` (in that order, repeats allowed)."""
        for name in ("n_words", "stack", "has_right", "depth", "shifted", "finished"):
            setattr(self, name, getattr(self, name)[rows])


def gold_masks(actions: Sequence[int], n_words: int) -> tuple[np.ndarray, np.ndarray]:
    """(buffer front, allowed-action mask [T, VOCAB_SIZE]) before each action of a gold sequence."""
    state = DepParseState(np.array([n_words]))
    front, masks = [], []
    for a in actions:
        front.append(int(state.shifted[0]))
        masks.append(state.allowed()[0])
        state.advance(np.array([a]))
    if not state.finished[0]:
        raise ValueError("the actions do not end in a complete tree")
    return np.asarray(front, dtype=np.int64), np.asarray(masks, dtype=bool).reshape(len(masks), VOCAB_SIZE)
