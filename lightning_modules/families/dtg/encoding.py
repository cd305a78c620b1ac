"""The Dependency Transformer Grammar encoding: generative arc-standard, arc-eager and arc-swift sequences with
their STACK/COMPOSE attention, stack-depth relative positions and arc representations (DTG §3, Appendix A).

Transitions and their oracles: ``lightning_modules/data/encodings/transitions.py``.

**Sequence.** ``<s>`` (the root), then one token per transition with every arc doubled: the COMPOSE copy
(types ``LA``/``RA``, no prediction) and the STACK copy (``LA2``/``RA2``, predicts the next transition). Labels
are the next item of the undoubled sequence, ``</s>`` after the last transition; no ``</s>`` input.
arc-standard: n words give 3n tokens. An arc token's input adds the embedding of its head word's token
(``arc_heads``: the position of the head's GEN token, 0 for the root; §3.3).

**Attention** over *units*: the representations still on the stack (and, in arc-eager/-swift, the buffer
word), bottom first. ``<s>`` and GEN tokens are pushed (a GEN first shifts the buffer word); LA2/RA2/POP
tokens never are.

- STACK (SOS, W, LA2, RA2, eager POP): every unit plus itself; relpos = the number of units above the key
  (top 0, self 0). An eager POP first pops the stack top ("POPSTACK", §3.4).
- COMPOSE (LA, RA, pop_root): the head and the dependent units and itself; the dependent gets relpos -1, the
  head and itself 0. Both are popped and the COMPOSE position takes the head's place. arc-eager and arc-swift
  RIGHTARC leave the dependent unmasked: it is shifted onto the stack above its head (§3.4). arc-swift
  arcs also attend to the k-1 units between s_k and b and mask them; they belong to s_k's subtree, so they
  take s_k's relpos (-1 under LEFTARC, 0 under RIGHTARC; the paper does not state it).

The stack keeps the transition system's order: after a RIGHTARC the composed head (a later position) lies
below its dependent, and an eager POP pops that logical top. §3.4 calls the top the most (or second most)
recent unmasked token, which is the same thing except right after a RIGHTARC, where only the logical top
gives the transition system's behaviour.

**Subword pieces** (the paper's appendix "Using subword tokenizers"; the official sequence): a word may be
several pieces, one token each, its first a GEN token (``W``), the others ``T`` tokens. They form one unit: a
later piece attends to the stack (and the buffer) like its first, its word's earlier pieces and itself at
relpos 0, and is pushed into its word's unit. A COMPOSE attends to every piece of its head and dependent
(all of a masked word's pieces are masked) and then stands alone for the head; arcs link the words' last
pieces: an arc token's head position (``arc_heads``) is its head word's last piece (the official
``composed_position``). One piece per word gives the word-level sequence.

``DTGState`` is the system one transition at a time with the §3.5 constraints (``check``), for the oracle
decoder, the encoder and generation; ``encode`` returns a ``DTGSequence`` (strings, types, attention lists).

**When pop_root may come** (arc-standard; ``POP_ROOT_RULES``). ``single-word``: only on a one-word stack, and
nothing but ``</s>`` follows: every sequence is one complete tree (the encoder's and the decoder's rule; the
oracle's sequences are such). ``official``: the official beam search's rule (``beam_search_standard.py``):
``pop_root`` is a terminal that its action mask never blocks, so it comes on any stack with a word, and its
masking agent (``TGAgent``) composes the stack's top two units as a right arc: the top word becomes the
dependent of the root (one word) or of the word below it (more). Arcs may follow it before ``</s>`` (the
official count mask still allows them), each composing the top two units, the root's included (a right arc
over the root attaches the word to it); ``</s>`` may come at any point after it, so a sequence may leave words
unattached. Two arcs that the official count mask lets through are left out, as they compose no two words
of a tree: an arc over a single unit (the official agent then composes nothing) and a left arc making the root
a dependent.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import IntEnum
from typing import NamedTuple

import numpy as np

from lightning_modules.data.dependency import DepTree, require_projective
from lightning_modules.data.encodings.transitions import (  # noqa: F401  (the systems are part of the encoding's API)
    GEN,
    LEFT_ARC,
    POP,
    POP_ROOT,
    RIGHT_ARC,
    SYSTEMS,
    Transition,
    oracle,
)

BOS, EOS = "<s>", "</s>"
POP_ROOT_RULES = ("official", "single-word")  # when pop_root may come (module docstring)


class DTGType(IntEnum):
    """Token types; the numbers of the official masking library where it has them (``masking_rules.cc``)."""

    PAD = 0
    SOS = 1
    POP = 2  # pop_root (arc-standard), COMPOSE
    T = 3  # the official TERMINAL: a word's later piece
    LA = 4
    W = 6  # the official STARTOFWORD: a word's first (or only) piece
    LA2 = 14
    RA = 15
    RA2 = 16
    POPSTACK = 17  # arc-eager POP, STACK after popping the top


TYPE_NAMES = {t.value: t.name for t in DTGType if t is not DTGType.PAD}
COMPOSE_TYPES = frozenset({DTGType.LA, DTGType.RA, DTGType.POP})


class Token(NamedTuple):
    """One token of the sequence: its type, attention (keys ascending, raw relpos) and arc head position."""

    type: int
    keys: list[int]
    relpos: list[int]
    arc_head: int | None


class DTGState:
    """A generative transition system (``standard``, ``eager`` or ``swift``) with its attention units.

    Word w (1-based; 0 = the root) is represented by the unit at positions ``unit[w]``: its pieces' tokens (the
    GEN token first), later the last COMPOSE that made it a head. ``<s>`` (position 0) is the root's unit, at
    the bottom. ``gen_position[w]`` is the position of w's last piece, the head position of its arcs.
    """

    def __init__(self, system: str = "standard", pop_root: str = "single-word"):
        if system not in SYSTEMS:
            raise ValueError(f"system must be one of {SYSTEMS}, not {system!r}")
        if pop_root not in POP_ROOT_RULES:
            raise ValueError(f"pop_root must be one of {POP_ROOT_RULES}, not {pop_root!r}")
        self.system, self.pop_root = system, pop_root
        self.root_popped = False  # arc-standard: after pop_root
        self.stack: list[int] = [0]  # words, the root first
        self.buffer: int | None = None  # eager/swift: the generated word not yet shifted
        self.unit: dict[int, tuple[int, ...]] = {0: (0,)}
        self.gen_position: dict[int, int] = {0: 0}
        self.heads: dict[int, int] = {}
        self.words = 0  # generated so far
        self.position = 1  # of the next token
        self.ended = False  # nothing follows: after pop_root (single-word rule) / the final pop

    def copy(self) -> DTGState:
        """An independent copy (beam search branches states)."""
        state = DTGState.__new__(DTGState)
        state.system, state.pop_root, state.root_popped = self.system, self.pop_root, self.root_popped
        state.buffer, state.words = self.buffer, self.words
        state.position, state.ended = self.position, self.ended
        state.stack, state.unit, state.gen_position = self.stack[:], dict(self.unit), dict(self.gen_position)
        state.heads = dict(self.heads)
        return state

    # -- constraints (§3.5) ------------------------------------------------------------------------------------
    def check(self, t: Transition) -> str | None:
        """Why ``t`` cannot come next (None when it can)."""
        if self.ended:
            return "the sequence has ended"
        if (t.k is not None) != (self.system == "swift" and t.action in (LEFT_ARC, RIGHT_ARC)):
            return f"{t.token()} is not a transition of arc-{self.system}"
        if t.action == "gen":
            return "no word follows pop_root" if self.root_popped else None
        if self.system == "standard":
            words_on_stack = len(self.stack) - 1
            if t.action in (LEFT_ARC, RIGHT_ARC):
                if not self.root_popped:
                    return None if words_on_stack >= 2 else "an arc needs two words on the stack"
                if words_on_stack < 1:  # after pop_root (official rule): the top two units, the root's included
                    return "an arc needs two units on the stack"
                return "the root is never a dependent" if t.action == LEFT_ARC and self.stack[-2] == 0 else None
            if t.action == POP_ROOT:
                if self.root_popped:
                    return "pop_root comes once"
                if self.pop_root == "official":
                    return None if words_on_stack >= 1 else "pop_root needs a word on the stack"
                return None if words_on_stack == 1 else "pop_root needs exactly one word on the stack"
        elif t.action in (LEFT_ARC, RIGHT_ARC):
            if self.buffer is None:
                return "an arc needs a generated word in the buffer"
            k = t.k or 1
            if k < 1 or k > len(self.stack) - (t.action == LEFT_ARC):
                return f"{t.token()} reaches beyond the stack"
            if any(s not in self.heads for s in self.stack[len(self.stack) - k + 1:]):
                return f"{t.token()} would pop a word that has no head"
            if t.action == LEFT_ARC and self.stack[-k] in self.heads:
                return "the dependent of a left arc already has a head"
            return None
        elif t.action == POP and self.system == "eager":
            top = self.stack[-1] if self.stack else None
            if top is None:
                return "the stack is empty"
            if top != 0:
                return None if top in self.heads else "pop needs a stack top that has its head"
            return None if self.buffer is None and self.words else "the root is popped last, after every word"
        return f"{t.token()} is not a transition of arc-{self.system}"

    def can_end(self) -> bool:
        """Whether ``</s>`` may come next: after pop_root / the final pop, or (swift) once every word is attached."""
        if self.system == "swift":
            return self.buffer is None and self.words > 0 and len(self.heads) == self.words
        return self.ended or self.root_popped

    def complete(self) -> bool:
        """Whether the sequence so far is one complete tree that may end (every word has its head)."""
        return self.can_end() and len(self.heads) == self.words

    # -- applying transitions ----------------------------------------------------------------------------------
    def start(self) -> Token:
        """The ``<s>`` token at position 0."""
        return Token(DTGType.SOS, [0], [0], None)

    def apply(self, t: Transition, pieces: int = 1) -> list[Token]:
        """Apply ``t`` (``ValueError`` if the system forbids it); the tokens it adds: one or two, or a GEN's
        ``pieces`` (the word's subword pieces, the first a ``W`` token, the others ``T``)."""
        reason = self.check(t)
        if reason is None and pieces != 1 and (t.action != "gen" or pieces < 1):
            reason = f"{t.token()} cannot have {pieces} pieces"
        if reason is not None:
            raise ValueError(f"position {self.position}: {reason}")
        p = self.position
        if t.action == "gen":
            out = self._gen(p, pieces)
        elif t.action in (LEFT_ARC, RIGHT_ARC):
            compose, head = self._arc(t.action == LEFT_ARC, t.k or 1, p)
            arc_type = DTGType.LA if t.action == LEFT_ARC else DTGType.RA
            second = DTGType.LA2 if t.action == LEFT_ARC else DTGType.RA2
            out = [Token(arc_type, *compose, head), self._stack_token(second, p + 1, head)]
        elif t.action == POP_ROOT:  # a right arc over the top two units: the root and its word (module docstring)
            compose, head = self._arc(False, 1, p)
            out = [Token(DTGType.POP, *compose, head)]
            self.root_popped = True
            self.ended = self.pop_root == "single-word"
        else:  # eager POP
            self.stack.pop()
            self.ended = not self.stack
            out = [self._stack_token(DTGType.POPSTACK, p, None)]
        self.position += len(out)
        return out

    def _gen(self, p: int, pieces: int) -> list[Token]:
        self.words += 1
        w = self.words
        self.unit[w] = (p,)
        self.gen_position[w] = p + pieces - 1
        if self.system == "standard":
            self.stack.append(w)
        else:
            if self.buffer is not None:
                self.stack.append(self.buffer)
            self.buffer = w
        out = [self._stack_token(DTGType.W, p, None, pushed=True)]
        for q in range(p + 1, p + pieces):  # the later pieces join the word's unit
            self.unit[w] += (q,)
            out.append(self._stack_token(DTGType.T, q, None, pushed=True))
        return out

    def _arc(self, left: bool, k: int, p: int) -> tuple[tuple[list[int], list[int]], int]:
        """The COMPOSE attention of an arc and its head word's last piece position; updates the system."""
        stack, unit = self.stack, self.unit
        if self.system == "standard":
            s1, s0 = stack[-2], stack[-1]
            head, dep = (s0, s1) if left else (s1, s0)
            pairs = [*((u, -1) for u in unit[dep]), *((u, 0) for u in unit[head]), (p, 0)]
            stack.remove(dep)
        else:
            b = self.buffer
            assert b is not None
            s_k, between = stack[-k], stack[len(stack) - k + 1:]
            head, dep = (b, s_k) if left else (s_k, b)
            side = -1 if left else 0  # the units between s_k and b are s_k's subtree
            pairs = [*((u, side) for s in (s_k, *between) for u in unit[s]), *((u, -1 - side) for u in unit[b]),
                     (p, 0)]
            del stack[len(stack) - k + (0 if left else 1):]
            if not left:  # the dependent stays unmasked: shifted onto the stack above its head
                stack.append(b)
                self.buffer = None
        self.heads[dep] = head
        unit[head] = (p,)
        return _sorted(pairs), self.gen_position[head]

    def units(self) -> list[tuple[int, ...]]:
        """The units that the next token may attend to (each its positions), bottom (the root) first."""
        out = [self.unit[w] for w in self.stack]
        if self.buffer is not None:
            out.append(self.unit[self.buffer])
        return out

    def _stack_token(self, ttype: int, p: int, arc_head: int | None, pushed: bool = False) -> Token:
        units = self.units()
        pairs = [(u, len(units) - 1 - i) for i, positions in enumerate(units) for u in positions]
        if not pushed:
            pairs.append((p, 0))
        return Token(ttype, *_sorted(pairs), arc_head)


def _sorted(pairs: list[tuple[int, int]]) -> tuple[list[int], list[int]]:
    pairs.sort()
    return [k for k, _ in pairs], [r for _, r in pairs]


def decode(transitions: Sequence[Transition], system: str = "standard") -> tuple[int, ...]:
    """Heads (1-based, 0 = root) of a complete transition sequence; ``ValueError`` if it is not one."""
    state = DTGState(system)
    for t in transitions:
        state.apply(t)
    if not state.can_end():
        raise ValueError("the transition sequence does not end in a complete tree")
    return tuple(state.heads[w] for w in range(1, state.words + 1))


# -- the encoded sequence --------------------------------------------------------------------------------------
@dataclass(frozen=True, eq=False)
class DTGSequence:
    """One sentence encoded: token strings and types, labels (None = no prediction), arc head positions (-1 =
    not an arc) and the attention in CSR form (keys ascending per query, raw relpos)."""

    tokens: list[str]
    labels: list[str | None]
    types: np.ndarray  # int8[N], DTGType
    arc_heads: np.ndarray  # int32[N], -1 where the token is not an arc
    word_index: np.ndarray  # int32[N], the 0-based word of a GEN or later-piece token, -1 elsewhere
    attend_ptr: np.ndarray  # int64[N+1]
    attend_key: np.ndarray  # int32[nnz]
    attend_rel: np.ndarray  # int32[nnz]
    system: str

    def __len__(self) -> int:
        return len(self.tokens)

    def attend(self, i: int) -> tuple[np.ndarray, np.ndarray]:
        lo, hi = self.attend_ptr[i], self.attend_ptr[i + 1]
        return self.attend_key[lo:hi], self.attend_rel[lo:hi]


def transitions_of(tree: DepTree, system: str = "standard", location: str | None = None) -> list[Transition]:
    """The oracle transitions of a CoNLL-U tree; ``InputError`` naming the crossing arc if it is not projective."""
    require_projective(tree, location)
    return oracle(tree.heads, system)


def encode(tree: DepTree, system: str = "standard", location: str | None = None) -> DTGSequence:
    """Encode one sentence (one token per word, FORM as written) with the oracle of ``system``."""
    return encode_transitions(tree.forms, transitions_of(tree, system, location), system)


def items(words: Sequence[str], transitions: Sequence[Transition]) -> list[str]:
    """The undoubled sequence: each transition's word (GEN, in order) or token (what TXL (trans) reads)."""
    return [item for item, _ in piece_items([(w,) for w in words], transitions)]


def piece_items(pieces: Sequence[Sequence[str]], transitions: Sequence[Transition]) -> list[tuple[str, int]]:
    """The undoubled sequence over subword pieces: each GEN's pieces in order (with their 0-based word) or a
    transition's token (with -1); ``pieces[i]`` are word i's (at least one)."""
    it = iter(pieces)
    out: list[tuple[str, int]] = []
    words = 0
    for t in transitions:
        if t.action != "gen":
            out.append((t.token(), -1))
            continue
        word = next(it, None)
        if not word:
            raise ValueError(f"the transitions do not generate the {len(pieces)} words"
                             if word is None else f"word {words + 1} has no pieces")
        out.extend((piece, words) for piece in word)
        words += 1
    if next(it, None) is not None:
        raise ValueError(f"the transitions do not generate the {len(pieces)} words")
    return out


def encode_transitions(words: Sequence[str], transitions: Sequence[Transition],
                       system: str = "standard") -> DTGSequence:
    """Encode a transition sequence over ``words`` (e.g. a proposal tree's); it must be complete."""
    return encode_pieces([(w,) for w in words], transitions, system)


def encode_pieces(pieces: Sequence[Sequence[str]], transitions: Sequence[Transition],
                  system: str = "standard") -> DTGSequence:
    """Encode a transition sequence over words given as their subword pieces (``pieces[i]``: word i's, at
    least one; one each is ``encode_transitions``); it must be complete."""
    undoubled = piece_items(pieces, transitions)
    state = DTGState(system)
    tokens, word_index = [BOS], [-1]
    made = [state.start()]
    position = 0  # in the undoubled sequence
    for t in transitions:
        if t.action == "gen":
            word = pieces[state.words]
            new = state.apply(t, len(word))
            tokens.extend(word)
            word_index.extend([state.words - 1] * len(word))
            position += len(word)
        else:
            new = state.apply(t)
            tokens.extend([undoubled[position][0]] * len(new))
            word_index.extend([-1] * len(new))
            position += 1
        made.extend(new)
    if not state.can_end():
        raise ValueError("the transitions do not generate the sentence as one complete tree")
    # every transition adds one predicting token per item (all but the COMPOSE copies LA/RA); each predicts the
    # next item
    nexts = iter([*(item for item, _ in undoubled), EOS])
    labels = [None if tok.type in (DTGType.LA, DTGType.RA) else next(nexts) for tok in made]
    counts = [len(tok.keys) for tok in made]
    ptr = np.zeros(len(made) + 1, dtype=np.int64)
    np.cumsum(counts, out=ptr[1:])
    return DTGSequence(
        tokens=tokens,
        labels=labels,
        types=np.asarray([tok.type for tok in made], dtype=np.int8),
        arc_heads=np.asarray([-1 if tok.arc_head is None else tok.arc_head for tok in made], dtype=np.int32),
        word_index=np.asarray(word_index, dtype=np.int32),
        attend_ptr=ptr,
        attend_key=np.asarray([k for tok in made for k in tok.keys], dtype=np.int32),
        attend_rel=np.asarray([r for tok in made for r in tok.relpos], dtype=np.int32),
        system=system,
    )
