"""Mikolov et al. (2010)-style Penn Treebank preprocessing with the gold trees kept aligned to the text
(PaLM §3 and Appendix A, and the unsupervised-parsing literature that evaluates on the same text).

The text of the standard ``ptb.{train,valid,test}.txt`` files, made from trees: lower-cased words,
punctuation removed, numbers replaced by ``N``, a vocabulary of the 10,000 most frequent training types
(``<eos>`` and ``<unk>`` included; every other word is ``<unk>``), and sentences joined into one stream, each
followed by ``<eos>``. As the official PaLM/ON-LSTM readers (``data.py``'s ``filter_words``):

- **punctuation** is a preterminal tagged ``, . : `` '' -LRB- -RRB-`` (``$`` and ``#`` are words); it is
  removed from the tree too, with the constituents it leaves empty, so the tree's leaves are the text;
- **numbers**: ``%`` and all-digit tokens become ``N``, as do tokens that start like a number (``12.5``,
  ``-3``, ``1,000``, ``2:30``, ``10-11-12``) when tagged CD, LS, JJ, NNP or RB and not a number glued to
  letters (``1980s``, ``10-year``, ``3/4-inch``), except a few model names (``747-400s``).
The tree keeps its labels and POS tags (over the normalised words), so spans and tags stay aligned.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Sequence

from lightning_modules.data.tree import Tree

EOS, UNK = "<eos>", "<unk>"
PUNCTUATION_TAGS = frozenset({",", ".", ":", "``", "''", "-LRB-", "-RRB-"})
_NUMBER_TAGS = frozenset({"CD", "LS", "JJ", "NNP", "RB"})
_NUMBER = re.compile(r"[-+]?\d*\.\d+|[-+]\d+|[-+]?\d*,\d+|\d+|\d+:\d+")
_GLUED = re.compile(r"\d+%?-?[a-zA-Z]|[-+]?\d*\.\d+%?-?[a-zA-Z]|[-+]?\d*,\d+-?%?[a-zA-Z]")
_FRACTION_GLUED = re.compile(r"\d+\\/\d+-?[A-Za-z]")
_DATE = re.compile(r"\d+-\d+-\d+")
_KEEP = frozenset({"a310-300s", "747-100s", "747-400s", "45,000-$60,000", "767-300er"})


def normalise(word: str, tag: str) -> str:
    """The Mikolov form of a (non-punctuation) word with its POS tag."""
    w = word.lower()
    if w in _KEEP:
        return w
    if w == "%" or re.fullmatch(r"\d+", w) or _DATE.match(w):
        return "N"
    if tag in _NUMBER_TAGS and _NUMBER.match(w) and not _GLUED.match(w) and not _FRACTION_GLUED.match(w):
        return "N"
    return w


def strip_punctuation(tree: Tree) -> Tree | None:
    """The tree without punctuation preterminals and the constituents they leave empty (None if nothing is
    left); words and labels unchanged."""
    if tree.is_preterminal:
        return None if tree.label in PUNCTUATION_TAGS else tree
    children = [c for c in (strip_punctuation(k) if isinstance(k, Tree) else k for k in tree.children)
                if c is not None]
    return Tree(tree.label, tuple(children)) if children else None


def mikolov_tree(tree: Tree) -> Tree | None:
    """A cleaned tree without its punctuation, words normalised; None if nothing is left."""
    stripped = strip_punctuation(tree)
    return None if stripped is None else _normalised(stripped)


def _normalised(tree: Tree) -> Tree:
    if tree.is_preterminal:
        word = tree.children[0]
        assert isinstance(word, str)
        return Tree(tree.label, (normalise(word, tree.label),))
    return Tree(tree.label, tuple(_normalised(c) if isinstance(c, Tree) else c for c in tree.children))


def vocabulary(sentences: Iterable[Sequence[str]], size: int = 10000) -> list[str]:
    """``<eos>``, ``<unk>`` and the ``size`` − 2 most frequent training words (ties: first seen first)."""
    counts: Counter[str] = Counter()
    for words in sentences:
        counts.update(words)
    ranked = sorted(counts, key=lambda w: -counts[w])  # stable: first occurrence breaks ties
    return [EOS, UNK] + [w for w in ranked if w not in (EOS, UNK)][: size - 2]


def stream_ids(sentences: Iterable[Sequence[str]], index: dict[str, int]) -> list[int]:
    """The sentences as one stream of ids, each followed by ``<eos>``; unknown words are ``<unk>``."""
    unk = index[UNK]
    out: list[int] = []
    for words in sentences:
        out.extend(index.get(w, unk) for w in words)
        out.append(index[EOS])
    return out
