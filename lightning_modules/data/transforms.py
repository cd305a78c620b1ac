"""Pure tree transforms: TG §4.1.1 ablations, binarization, unary collapsing, dependency → constituency.

All functions take and return immutable trees and preserve the terminal sequence. The TG ablations
(``reverse_structure``, ``left_branching``, ``right_branching``) operate on POS-free trees, as TG applies
them after ``drop_pos_tags``; all three keep the multiset of node labels, left/right branching also keep
their pre-order sequence.
"""

from __future__ import annotations

from collections.abc import Iterator

from lightning_modules.data.dependency import DepTree, require_projective
from lightning_modules.data.tree import Tree

Node = Tree | str


def _labels_preorder(tree: Node) -> list[str]:
    return tree.labels() if isinstance(tree, Tree) else []


def _mirror(node: Node) -> Node:
    if isinstance(node, str):
        return node
    return Tree(node.label, tuple(_mirror(c) for c in reversed(node.children)))


def _relabel_leaves(node: Node, leaves: Iterator[str]) -> Node:
    if isinstance(node, str):
        return next(leaves)
    return Tree(node.label, tuple(_relabel_leaves(c, leaves) for c in node.children))


def reverse_structure(tree: Tree) -> Tree:
    """Mirror the tree, then put the terminals back in their original order.

    ``(A x (B y))`` -> ``(A (B x) y)`` (TG §4.1.1 "reversed trees").
    """
    return _relabel_leaves(_mirror(tree), iter(tree.leaves()))  # type: ignore[return-value]


def left_branching(tree: Tree) -> Tree:
    """Same labels (pre-order) and terminals on a left-branching binary spine plus a trail of words.

    ``(S (NP the hungry cat) (VP meows))`` -> ``(S (NP (VP the hungry) cat) meows)``.
    """
    return _branching(tree, leftwards=True)


def right_branching(tree: Tree) -> Tree:
    """Mirror image of ``left_branching``: ``(S the (NP hungry (VP cat meows)))``."""
    return _branching(tree, leftwards=False)


def _branching(tree: Tree, leftwards: bool) -> Tree:
    labels = _labels_preorder(tree)
    leaves = tree.leaves()
    # a binary spine with k labels holds k+1 leaves; labels that do not fit become a unary chain on top
    k = min(len(labels), max(len(leaves) - 1, 0))
    extra, spine = labels[: len(labels) - k], labels[len(labels) - k :]
    if leftwards:
        inner, trail = leaves[: k + 1], leaves[k + 1 :]
    else:
        inner, trail = leaves[len(leaves) - k - 1 :], leaves[: len(leaves) - k - 1]
    node: Node = _spine(spine, inner, leftwards)
    if trail:  # k >= 1 here, so the spine is a tree; the trail of words hangs off its root
        assert isinstance(node, Tree)
        kids = node.children + tuple(trail) if leftwards else tuple(trail) + node.children
        node = Tree(node.label, kids)
    for label in reversed(extra):
        node = Tree(label, (node,))
    assert isinstance(node, Tree)
    return node


def _spine(labels: list[str], leaves: list[str], leftwards: bool) -> Node:
    if not labels:
        return leaves[0]
    if leftwards:
        node: Node = Tree(labels[-1], (leaves[0], leaves[1]))
        for label, leaf in zip(reversed(labels[:-1]), leaves[2:]):
            node = Tree(label, (node, leaf))
    else:
        node = Tree(labels[-1], (leaves[-2], leaves[-1]))
        for label, leaf in zip(reversed(labels[:-1]), reversed(leaves[:-2])):
            node = Tree(label, (leaf, node))
    return node


def binarize(tree: Tree, factor: str = "right", child_char: str = "|") -> Tree:
    """Chomsky-normal-form factoring as nltk's ``chomsky_normal_form`` (no Markovisation).

    With ``factor="right"``: ``(A a b c)`` -> ``(A a (A|<b-c> b c))``; ``"left"``: ``(A (A|<a-b> a b) c)``.
    The intermediate labels list the remaining children's labels (a terminal child contributes itself).
    """
    if factor not in ("right", "left"):
        raise ValueError(f"factor must be 'right' or 'left', not {factor!r}")
    return _binarize(tree, factor, child_char)  # type: ignore[return-value]


def _binarize(node: Node, factor: str, cc: str) -> Node:
    if isinstance(node, str):
        return node
    kids = [_binarize(c, factor, cc) for c in node.children]
    if len(kids) <= 2:
        return Tree(node.label, tuple(kids))
    names = [c.label if isinstance(c, Tree) else c for c in node.children]
    n = len(kids)
    if factor == "right":
        cur: Node = Tree(f"{node.label}{cc}<{'-'.join(names[n - 2:])}>", (kids[-2], kids[-1]))
        for i in range(n - 3, 0, -1):
            cur = Tree(f"{node.label}{cc}<{'-'.join(names[i:])}>", (kids[i], cur))
        return Tree(node.label, (kids[0], cur))
    cur = Tree(f"{node.label}{cc}<{'-'.join(names[:2])}>", (kids[0], kids[1]))
    for i in range(2, n - 1):
        cur = Tree(f"{node.label}{cc}<{'-'.join(names[: i + 1])}>", (cur, kids[i]))
    return Tree(node.label, (cur, kids[-1]))


def collapse_unary(tree: Tree, collapse_pos: bool = False, collapse_root: bool = False,
                   join_char: str = "+") -> Tree:
    """Merge unary chains ``(A (B ...))`` into ``(A+B ...)`` as nltk's ``collapse_unary``.

    ``collapse_pos`` also merges a node into its only preterminal child (``(NP (NN x))`` -> ``(NP+NN x)``);
    ``collapse_root`` allows the root itself to be merged.
    """

    def go(node: Node, is_root: bool) -> Node:
        if isinstance(node, str):
            return node
        label, kids = node.label, node.children
        if not is_root or collapse_root:
            while (len(kids) == 1 and isinstance(kids[0], Tree)
                   and (collapse_pos or not kids[0].is_preterminal)):
                label = f"{label}{join_char}{kids[0].label}"
                kids = kids[0].children
        return Tree(label, tuple(go(c, False) for c in kids))

    return go(tree, True)  # type: ignore[return-value]


def dependency_to_constituency(dep: DepTree, binarize_left: bool = True) -> Tree:
    """SOM Fig. 4: merge every head with its dependents into one constituent; binarize left-branching.

    Each word is a preterminal ``(UPOS word)``; the constituent of head h spans h's subtree and is labelled
    with h's dependency relation (``root`` for the root). Requires a projective tree (a non-projective
    subtree is not a contiguous span) and raises ``InputError`` otherwise.
    """
    require_projective(dep)
    kids = dep.children()
    upos = dep.upos or tuple("X" for _ in dep.forms)

    def build(h: int) -> Node:
        leaf = Tree(upos[h - 1], (dep.forms[h - 1],))
        if not kids[h]:
            return leaf
        parts = [build(d) for d in kids[h] if d < h] + [leaf] + [build(d) for d in kids[h] if d > h]
        label = dep.deprels[h - 1].split(":")[0] or "X"
        if binarize_left and len(parts) > 2:
            node: Node = Tree(label, (parts[0], parts[1]))
            for p in parts[2:]:
                node = Tree(label, (node, p))
            return node
        return Tree(label, tuple(parts))

    (root,) = kids[0]
    out = build(root)
    return out if isinstance(out, Tree) and not out.is_preterminal else Tree("root", (out,))
