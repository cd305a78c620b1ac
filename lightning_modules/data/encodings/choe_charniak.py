"""Choe–Charniak action sequences and the TG action vocabulary.

A POS-free tree ``(S (NP the hungry cat) (VP meows))`` becomes the actions
``<s> (S (NP the hungry cat NP) (VP meows VP) S)``: ``<s>`` first, an opening nonterminal ``(NP`` per
constituent, the terminals, a typed closing nonterminal ``NP)``, and no ``</s>`` (the last closing
nonterminal ends the sequence; TG's configs set ``add_eos=False`` "not needed for Choe-Charniak").
Terminal-only sequences (TXL terminals) are ``<s> w1 ... wn </s>``: their end must be predicted.

Terminals come from a caller-supplied mapping ``word -> terminal strings`` (identity, a vocabulary's
unkify, a SentencePiece splitter giving several pieces per word); every terminal token keeps the index of
the word it came from, so per-word scores can be summed over pieces.

Token types and the vocabulary id layout follow the official TG code (``masking/constants.py``,
``tools/build_dictionary.py``): ``<PAD>=0, <s>=1, </s>=2, <XXX>=3``, then terminals, opening and closing
nonterminals, each block sorted.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from enum import IntEnum

import numpy as np

from lightning_modules.data import transforms
from lightning_modules.data.tree import Tree, bracket_order
from lightning_modules.errors import InputError


class TokenType(IntEnum):
    """Token types of the official masking library (``CNT2`` only exists after the TG transform)."""

    PAD = 0
    SOS = 1
    ONT = 2
    T = 3
    CNT = 4
    PLACEHOLDER = 5
    CNT2 = 14


PAD, BOS, EOS, PLACEHOLDER = "<PAD>", "<s>", "</s>", "<XXX>"
RESERVED = (PAD, BOS, EOS, PLACEHOLDER)

Terminals = Callable[[str], Sequence[str]]
"""Maps one word to its terminal tokens (one or more strings)."""


def word_terminals(word: str) -> tuple[str]:
    """The identity mapping: every word is one terminal."""
    return (word,)


@dataclass(frozen=True)
class Actions:
    """An action sequence: token strings, their ``TokenType``, each terminal's word index (else -1)."""

    tokens: tuple[str, ...]
    types: tuple[int, ...]
    word_index: tuple[int, ...]

    def __len__(self) -> int:
        return len(self.tokens)


class _Builder:
    def __init__(self, terminals: Terminals):
        self.terminals = terminals
        self.tokens: list[str] = []
        self.types: list[int] = []
        self.word_index: list[int] = []
        self.words = 0

    def add(self, token: str, ttype: int) -> None:
        self.tokens.append(token)
        self.types.append(ttype)
        self.word_index.append(-1)

    def word(self, word: str) -> None:
        pieces = self.terminals(word)
        if not pieces:
            raise InputError(f"the terminal mapping gave no tokens for the word {word!r}")
        for piece in pieces:
            self.tokens.append(piece)
            self.types.append(TokenType.T)
            self.word_index.append(self.words)
        self.words += 1

    def tree(self, tree: Tree) -> None:
        for item, closing in bracket_order(tree):
            if isinstance(item, str):
                self.word(item)
            elif closing:
                self.add(f"{item.label})", TokenType.CNT)
            else:
                self.add(f"({item.label}", TokenType.ONT)

    def done(self) -> Actions:
        return Actions(tuple(self.tokens), tuple(int(t) for t in self.types), tuple(self.word_index))


def choe_charniak(tree: Tree, terminals: Terminals = word_terminals) -> Actions:
    """``<s>`` + the Choe–Charniak actions of a POS-free tree (see ``drop_pos_tags``); no ``</s>``."""
    b = _Builder(terminals)
    b.add(BOS, TokenType.SOS)
    b.tree(tree)
    return b.done()


def document_choe_charniak(trees: Sequence[Tree], terminals: Terminals = word_terminals,
                           root_label: str | None = "DOC") -> Actions:
    """One ``<s>`` then the actions of every sentence of a document; word indices run over the document.

    The official TG code represents a document as one tree ``(DOC (S ...) (S ...))`` (``tools/
    transform_trees.py --document_level``), so by default the sentences are wrapped in a ``root_label``
    constituent: ``<s> (DOC (S ... S) (S ... S) DOC)``. ``root_label=None`` concatenates the sentences'
    actions without a wrapper. There is never a ``<s>`` per sentence.
    """
    if not trees:
        raise InputError("a document needs at least one sentence")
    if root_label is not None:
        return choe_charniak(Tree(root_label, tuple(trees)), terminals)
    b = _Builder(terminals)
    b.add(BOS, TokenType.SOS)
    for tree in trees:
        b.tree(tree)
    return b.done()


def terminal_actions(trees: Tree | Sequence[Tree], terminals: Terminals = word_terminals) -> Actions:
    """``<s> w1 ... wn </s>`` for a sentence or a document (sentences concatenated, one ``</s>``).

    TG's configs add ``</s>`` to every sequence that is not Choe–Charniak (``add_eos``), so a word-level
    model predicts where the string ends. ``</s>`` gets type ``T``: it is a predicted token like a word.
    """
    b = _Builder(terminals)
    b.add(BOS, TokenType.SOS)
    for tree in [trees] if isinstance(trees, Tree) else trees:
        for word in tree.leaves():
            b.word(word)
    b.add(EOS, TokenType.T)
    return b.done()


# -- tree transforms of the TG ablations (Table 2), applied to POS-free trees -------------------------
TREE_TRANSFORMS: dict[str, Callable[[Tree], Tree]] = {
    "none": lambda tree: tree,
    "left": transforms.left_branching,
    "right": transforms.right_branching,
    "reversed": transforms.reverse_structure,
}


def transform_tree(tree: Tree, name: str) -> Tree:
    """Apply one of ``TREE_TRANSFORMS`` (``none``, ``left``, ``right``, ``reversed``)."""
    if name not in TREE_TRANSFORMS:
        raise InputError(f"unknown tree transform {name!r}; expected one of {', '.join(TREE_TRANSFORMS)}")
    return TREE_TRANSFORMS[name](tree)


# -- vocabulary ----------------------------------------------------------------------------------------
@dataclass(frozen=True)
class ActionVocab:
    """Token strings <-> ids in the official layout: reserved, terminals, opening NTs, closing NTs."""

    terminals: tuple[str, ...]
    opening: tuple[str, ...]
    closing: tuple[str, ...]

    def __post_init__(self) -> None:
        tokens = RESERVED + self.terminals + self.opening + self.closing
        index = {t: i for i, t in enumerate(tokens)}
        if len(index) != len(tokens):
            raise InputError("vocabulary has a token listed twice (or a reserved token as a terminal)")
        object.__setattr__(self, "_tokens", tokens)
        object.__setattr__(self, "_index", index)
        types = np.full(len(tokens), TokenType.T, dtype=np.int8)
        types[:4] = (TokenType.PAD, TokenType.SOS, TokenType.T, TokenType.PLACEHOLDER)
        start = len(RESERVED) + len(self.terminals)
        types[start : start + len(self.opening)] = TokenType.ONT
        types[start + len(self.opening) :] = TokenType.CNT
        object.__setattr__(self, "_types", types)

    @classmethod
    def build(cls, sequences: Iterable[Actions]) -> ActionVocab:
        """Collect the tokens of action sequences, each block sorted as ``build_dictionary.py`` does."""
        blocks: dict[int, set[str]] = {TokenType.T: set(), TokenType.ONT: set(), TokenType.CNT: set()}
        for actions in sequences:
            for token, ttype in zip(actions.tokens, actions.types):
                if token not in RESERVED:
                    blocks[ttype].add(token)
        return cls(tuple(sorted(blocks[TokenType.T])), tuple(sorted(blocks[TokenType.ONT])),
                   tuple(sorted(blocks[TokenType.CNT])))

    @property
    def tokens(self) -> tuple[str, ...]:
        return self._tokens  # type: ignore[attr-defined]

    def __len__(self) -> int:
        return len(self.tokens)

    def __contains__(self, token: str) -> bool:
        return token in self._index  # type: ignore[attr-defined]

    def id(self, token: str) -> int:
        try:
            return self._index[token]  # type: ignore[attr-defined]
        except KeyError:
            raise InputError(f"token {token!r} is not in the vocabulary") from None

    def ids(self, tokens: Sequence[str], unknown: str | None = None) -> np.ndarray:
        """int64 ids; a token missing from the vocabulary maps to ``unknown`` if given, else is an error."""
        index = self._index  # type: ignore[attr-defined]
        if unknown is None:
            return np.fromiter((self.id(t) for t in tokens), dtype=np.int64, count=len(tokens))
        fallback = self.id(unknown)
        return np.fromiter((index.get(t, fallback) for t in tokens), dtype=np.int64, count=len(tokens))

    def token_types(self, ids: np.ndarray) -> np.ndarray:
        """``TokenType`` of each id (``</s>`` counts as a terminal, ``<XXX>`` as a placeholder)."""
        return self._types[ids]  # type: ignore[attr-defined]

    def to_json(self) -> dict:
        return {"terminals": list(self.terminals), "opening": list(self.opening),
                "closing": list(self.closing)}

    @classmethod
    def from_json(cls, data: dict) -> ActionVocab:
        try:
            return cls(tuple(data["terminals"]), tuple(data["opening"]), tuple(data["closing"]))
        except (KeyError, TypeError) as e:
            raise InputError(f"malformed action vocabulary: {e}") from None
