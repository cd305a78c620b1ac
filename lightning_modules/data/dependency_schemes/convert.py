"""Constituency tree -> Stanford basic (``sd``) or Universal (``ud``) dependency tree, as CoreNLP converts."""

from __future__ import annotations

from dataclasses import dataclass

from lightning_modules.data.dependency import DepTree
from lightning_modules.data.dependency_schemes.head_finders import SemanticHeadFinder
from lightning_modules.data.dependency_schemes.labels import sd_label, ud_label
from lightning_modules.data.dependency_schemes.reading import Node, read_tree
from lightning_modules.data.dependency_schemes.transforms import restructure
from lightning_modules.data.dependency_schemes.upos import upos_tags
from lightning_modules.data.tree import Tree

SCHEMES = ("sd", "ud")
_FINDERS = {"sd": SemanticHeadFinder(universal=False), "ud": SemanticHeadFinder(universal=True)}


@dataclass(frozen=True)
class Attachment:
    """Where a word's dependency comes from: in ``phrase``, the maximal projection ``dependent`` of the word
    attaches to the head child ``head``."""

    phrase: Node
    head: Node
    dependent: Node


def head_words(root: Node, finder: SemanticHeadFinder) -> tuple[dict[int, int], dict[int, Attachment]]:
    """Head of every word (leaf index -> leaf index, 0 for the root word) under the head finder, and the
    constituents each dependency comes from; every node's ``head_word`` is set on the way."""
    heads: dict[int, int] = {}
    where: dict[int, Attachment] = {}

    def visit(node: Node, parent: Node | None) -> int:
        if node.is_preterminal:
            node.head_word = node.children[0].index
            return node.head_word
        head_child = finder.head(node, parent)
        node.head_child = head_child
        words = [(kid, visit(kid, node)) for kid in node.children]
        h = next(w for kid, w in words if kid is head_child)
        node.head_word = h
        for kid, w in words:
            if kid is not head_child:
                heads[w] = h
                where[w] = Attachment(node, head_child, kid)
        return h

    heads[visit(root, None)] = 0
    return heads, where


def raised_objects(root: Node) -> list[tuple[int, int]]:
    """``(word, new head)`` for the subjects of infinitival clauses under a VP (*expects sales to remain
    steady*): CoreNLP's dobj pattern ``VP < (S < (NP|WHNP=target $++ (VP < TO)))`` attaches them to the verb
    as its object (and its nsubj pattern leaves them out)."""
    out = []
    stack = [root]
    while stack:
        node = stack.pop()
        stack.extend(k for k in node.children if k.is_phrasal)
        if node.category != "VP":
            continue
        for clause in node.children:
            if clause.label != "S":
                continue
            kids = clause.children
            for i, np in enumerate(kids):
                if np.label in ("NP", "WHNP") and any(
                        k.label == "VP" and any(c.label == "TO" for c in k.children) for k in kids[i + 1:]):
                    out.append((np.head_word, node.head_word))
    return out


def attach_cc_to_next_conjunct(heads: dict[int, int], labels: dict[int, str]) -> None:
    """UD's ``fixCCAttachment``: a ``cc`` attached to an earlier conjunct moves to the nearest ``conj``
    dependent of that conjunct after it."""
    for cc, gov in list(heads.items()):
        if labels.get(cc) != "cc" or not 0 < gov < cc:
            continue
        later = [d for d, h in heads.items() if h == gov and d > cc and labels.get(d) == "conj"]
        if later:
            heads[cc] = min(later)


def convert(tree: Tree, scheme: str) -> DepTree:
    """The ``scheme`` dependency tree of a raw PTB tree (see ``reading`` for how it is read)."""
    root = restructure(read_tree(tree), universal=scheme == "ud")
    heads, where = head_words(root, _FINDERS[scheme])
    labeler = ud_label if scheme == "ud" else sd_label
    labels = {w: labeler(a.phrase, a.head, a.dependent) for w, a in where.items()}
    for word, head in raised_objects(root):
        heads[word] = head
        labels[word] = "obj" if scheme == "ud" else "dobj"
    leaves = root.leaves()
    tags = [p.label for p in root.preterminals()]
    if scheme == "ud":
        attach_cc_to_next_conjunct(heads, labels)
    return DepTree(
        forms=tuple(leaf.word for leaf in leaves),  # type: ignore[misc]
        heads=tuple(heads[leaf.index] for leaf in leaves),
        deprels=tuple(labels.get(leaf.index, "root") for leaf in leaves),
        xpos=tuple(tags),
        upos=tuple(upos_tags(root, labels)),
    )
