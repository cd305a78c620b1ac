"""Constituency trees read as CoreNLP's dependency converters read them.

``GrammaticalStructureConversionUtils`` reads PTB trees with ``NPTmpRetainingTreeNormalizer`` and
``CoordinationTransformer`` first runs ``DependencyTreeTransformer``; together they give:

* ``-NONE-`` empty elements removed, and every constituent left without children;
* a unary node whose label equals its only child's label (``NP-SBJ`` over ``NP-SBJ``) spliced out;
* labels cut to their basic category (``NP-SBJ-1`` -> ``NP``, ``NP=2`` -> ``NP``), except that an ``NP`` or
  ``UCP`` carrying ``-TMP`` or ``-ADV`` keeps it (``NP-TMP``, ``NP-ADV``): the converters read those two;
* the PTB wrapper ``( (S ...) )`` labelled ``ROOT``; punctuation kept.

The result is a mutable ``Node`` tree (the converters restructure it) whose leaves are numbered 1.. in order.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field

from lightning_modules.data.tree import Tree
from lightning_modules.errors import InputError

PUNCTUATION_TAGS = frozenset({"''", "``", "-LRB-", "-RRB-", ".", ":", ","})  # PennTreebankLanguagePack
_ANNOTATION_CHARS = "-=|#^~_["
_TMP = re.compile(r"(NP|UCP).*-TMP.*")
_ADV = re.compile(r"(NP|UCP).*-ADV.*")


@dataclass(eq=False)
class Node:
    """A constituent (``children``) or a word (``word`` set, ``index`` its 1-based position)."""

    label: str
    children: list[Node] = field(default_factory=list)
    word: str | None = None
    index: int = 0
    head_word: int = 0  # set by the converter: the index of the node's lexical head
    head_child: Node | None = None  # set by the converter: the head child of a phrase

    is_leaf: bool = field(init=False)
    is_preterminal: bool = field(init=False)  # fixed at construction: restructuring only regroups phrases

    def __post_init__(self) -> None:
        self.is_leaf = self.word is not None
        self.is_preterminal = len(self.children) == 1 and self.children[0].is_leaf

    @property
    def is_phrasal(self) -> bool:
        return not self.is_leaf and not self.is_preterminal

    @property
    def category(self) -> str:
        return basic_category(self.label)

    def leaves(self) -> list[Node]:
        return [p.children[0] for p in self.preterminals()] if not self.is_leaf else [self]

    def preterminals(self) -> list[Node]:
        """The preterminals below (or at) this node, left to right."""
        out: list[Node] = []
        stack = [self]
        while stack:
            node = stack.pop()
            if node.is_preterminal:
                out.append(node)
            else:
                stack.extend(reversed(node.children))
        return out

    def text(self) -> str:
        """The leaf's word, or a preterminal's word (the tregex ``<`` a word test)."""
        return self.word if self.is_leaf else (self.children[0].word if self.is_preterminal else "")  # type: ignore[return-value]

    def __repr__(self) -> str:
        if self.is_leaf:
            return self.word  # type: ignore[return-value]
        return f"({self.label} {' '.join(map(repr, self.children))})"


@functools.lru_cache(maxsize=4096)
def basic_category(label: str) -> str:
    """``PennTreebankLanguagePack.basicCategory``: the label up to its first annotation character, where a
    label that starts with one (``-LRB-``, ``-NONE-``) runs to the matching closing one."""
    at_zero = ""
    for i, ch in enumerate(label):
        if ch in _ANNOTATION_CHARS:
            if i == 0:
                at_zero = ch
            elif at_zero and i > 1 and ch == at_zero:
                at_zero = ""
            else:
                return label[:i]
    return label


@functools.lru_cache(maxsize=4096)
def dependency_label(label: str) -> str:
    """``DependencyTreeTransformer.cleanUpLabel``: the basic category, ``-TMP``/``-ADV`` kept on NP and UCP."""
    base = basic_category(label)
    if _TMP.fullmatch(label):
        return base + "-TMP"
    if _ADV.fullmatch(label):
        return base + "-ADV"
    return base


def read_tree(tree: Tree) -> Node:
    """The CoreNLP reading of a raw PTB tree (see the module doc); ``InputError`` when nothing overt is left
    or a word has no POS tag."""
    root = _normalize(tree)
    if root is None:
        raise InputError("tree has no overt terminals after removing -NONE- elements")
    if root.label in ("", "TOP", "ROOT") and not root.is_preterminal:
        root.label = "ROOT"
    else:
        root = Node("ROOT", [root])
    _relabel(root)
    for i, leaf in enumerate(root.leaves(), start=1):
        leaf.index = i
    return root


def _normalize(tree: Tree | str) -> Node | None:
    if isinstance(tree, str):
        return Node(tree, word=tree)
    if tree.label == "-NONE-":
        return None
    if len(tree.children) == 1 and isinstance(tree.children[0], str):
        return Node(tree.label, [Node(tree.children[0], word=tree.children[0])])
    kids = [k for k in (_normalize(c) for c in tree.children) if k is not None]
    if not kids:
        return None
    if any(k.is_leaf for k in kids):
        raise InputError(f"constituent ({tree.label} ...) has a word without a POS tag; the dependency "
                         "converters need POS-tagged trees")
    if len(kids) == 1 and kids[0].label == tree.label:
        return kids[0]  # X over X with the same label: the normalizer splices the upper node out
    return Node(tree.label, kids)


def _relabel(node: Node) -> None:
    if node.is_leaf:
        return
    if node.label != "ROOT":
        node.label = dependency_label(node.label)
    for c in node.children:
        _relabel(c)
