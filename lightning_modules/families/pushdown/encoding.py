"""The Pushdown Layers encoding: attachment labels and the depth stack tape (Murty et al. 2023, §3, Alg. 1).

As the official code computes them (``process_bllip.py``, ``text_helpers.py``; reference-impls §2.2):

- **Tree.** Unary chains are collapsed, preterminals included, so every word is a leaf; n-ary nodes are
  right-factored as nltk's default ``chomsky_normal_form`` (``(A a b c)`` -> ``(A a (A|<b-c> b c))``). A
  word split into pieces (Appendix C, ``split``) becomes a right-factored subtree of its pieces.
- **Tokens.** ``<s>``, the leaves, ``<eos>``: ``<s>`` is position 0, leaf i (0-based) is position i + 1.
- **Attachment.** The binary tree read as shift-reduce: the shift of the token at position k is followed
  by one reduce per node whose last token is k. The token's label is the position of the rightmost token
  of the leftmost constituent it reduces with (the left child of the largest node ending at k), or k
  itself when it only shifts. ``<s>`` and ``<eos>`` get 0: ``[0] + per token + [0]``.
- **Stack tape** (the depth variant, ``with_depth_info``): row k is the state after tokens 0..k, and a
  token's depth is the number of reduces it has taken part in (Alg. 1), i.e. ``tape[k, x]`` is the number
  of nodes spanning positions ``a <= x <= e <= k``. Row 0 is zeros; the ``<eos>`` row is a copy of the
  last token's row (the ``<eos>`` reduce with ``<s>``, which closes the stack, is not written).

``encode`` reads all of this off the binary tree at once (Algorithm 1 one token at a time, for a beam's
hypotheses, is ``stack_states``: it needs torch, this module only numpy, so the family's light paths stay
light); ``attachments_to_tree`` turns labels back into a tree and ``merge_pieces`` that tree over subword
pieces into the tree over words (Appendix C).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from lightning_modules.data.transforms import binarize, collapse_unary
from lightning_modules.data.tree import Tree
from lightning_modules.data.vocab import EOS, SOS

Node = Tree | str
UNLABELLED = "X"  # label of the nodes of a tree decoded from attachments


# -- the tree the official code encodes ---------------------------------------------------------------
def pushdown_tree(tree: Tree, split: Callable[[str, int], Sequence[str]] | None = None) -> Tree:
    """Collapse unary chains (POS included), split words into pieces, right-factor n-ary nodes.

    ``split(word, index)`` returns the pieces of the word at 0-based ``index`` (the official code uses
    GPT-2 BPE, with a prefix space for every word but the first); a word of several pieces becomes a flat
    node labelled like its preterminal, which the factoring then right-branches (Appendix C). Labels
    follow nltk's ``collapse_unary`` (``NP+NN``) where the official code keeps the lowest label (``NN``):
    the structure, which is all the encoding reads, is the same.
    """
    collapsed = collapse_unary(tree, collapse_pos=True, collapse_root=True)
    if split is not None:
        collapsed = _split_words(collapsed, split)
    return binarize(collapsed, "right")


def _split_words(tree: Tree, split: Callable[[str, int], Sequence[str]]) -> Tree:
    index = iter(range(len(tree.leaves())))

    def pieces(word: str, label: str) -> Node:
        i = next(index)
        parts = list(split(word, i))
        if not parts:
            raise ValueError(f"word {i} ({word!r}) was split into no pieces")
        if len(parts) == 1:
            return parts[0]
        return Tree(label, tuple(Tree(label, (p,)) for p in parts))

    def go(node: Tree) -> Tree:
        if node.is_preterminal:
            out = pieces(node.children[0], node.label)  # type: ignore[arg-type]
            return out if isinstance(out, Tree) else Tree(node.label, (out,))
        return Tree(node.label, tuple(pieces(c, node.label) if isinstance(c, str) else go(c)
                                      for c in node.children))

    return go(tree)


# -- encoding -----------------------------------------------------------------------------------------
@dataclass(frozen=True, eq=False)
class PushdownExample:
    """One encoded sentence: its leaves, attachment labels, and the spans that define the stack tape.

    ``spans`` lists the binary tree's nodes as (first, last) token positions in post-order; the dense tape
    is built from them on demand (``stack_tape``), so an example costs O(n) to keep, not O(n^2).
    """

    leaves: tuple[str, ...]
    attachment: np.ndarray  # int64[n+2]: [0] + per token + [0]
    spans: np.ndarray  # int64[n-1, 2]

    @property
    def tokens(self) -> list[str]:
        return [SOS, *self.leaves, EOS]

    def __len__(self) -> int:
        return len(self.leaves) + 2

    def stack_tape(self) -> np.ndarray:
        """The depth tape, int64[n+2, n+2]: row k = depths after tokens 0..k (module docstring)."""
        return stack_tape(self.spans, len(self))


def encode(tree: Tree, split: Callable[[str, int], Sequence[str]] | None = None) -> PushdownExample:
    """Encode a (cleaned) constituency tree as the official code does; see the module docstring.

    Reads the nodes of ``pushdown_tree(tree, split)`` without building it: unary nodes are transparent and
    an n-ary node's right factoring is implicit (tests check the two agree on random trees and the PTB
    sample); building the labelled tree alone takes longer than the whole encoding.
    """
    leaves, nodes = _binary_nodes(tree, split)
    attachment = list(range(len(leaves) + 2))
    attachment[0] = attachment[-1] = 0
    for _, left_last, last in nodes:  # post-order: the largest node ending at a position comes last
        attachment[last] = left_last
    spans = np.array(nodes, dtype=np.int64).reshape(-1, 3)[:, ::2]
    return PushdownExample(tuple(leaves), np.array(attachment, dtype=np.int64), spans)


def _binary_nodes(tree: Tree, split: Callable[[str, int], Sequence[str]] | None
                  ) -> tuple[list[str], list[tuple[int, int, int]]]:
    """Leaves, and each node of the binarized tree as (first, last of its left child, last), in post-order.

    A node with one child is transparent (a preterminal is its word); children c1..cm of an n-ary node
    (or the pieces of a split word) combine right-factored: (c1 (c2 (... (cm-1 cm)))). Iterative, so
    right-branching sentences of any length do not hit the recursion limit.
    """
    leaves: list[str] = []
    nodes: list[tuple[int, int, int]] = []
    spans: list[tuple[int, int]] = []  # (first, last) of finished subtrees not yet combined

    def combine(m: int) -> None:
        kids = spans[-m:]
        del spans[-m:]
        last = kids[-1][1]
        for first, left_last in reversed(kids[:-1]):  # innermost node first: post-order
            nodes.append((first, left_last, last))
        spans.append((kids[0][0], last))

    words = 0
    work: list[Node | int] = [tree]  # an int m: combine the m spans on top
    while work:
        node = work.pop()
        if isinstance(node, int):
            combine(node)
        elif isinstance(node, str):
            pieces = [node] if split is None else list(split(node, words))
            if not pieces:
                raise ValueError(f"word {words} ({node!r}) was split into no pieces")
            words += 1
            for piece in pieces:
                leaves.append(piece)
                spans.append((len(leaves), len(leaves)))
            if len(pieces) > 1:
                combine(len(pieces))
        elif len(node.children) == 1:
            work.append(node.children[0])
        else:
            work.append(len(node.children))
            work.extend(reversed(node.children))
    return leaves, nodes


def stack_tape(spans: np.ndarray, length: int) -> np.ndarray:
    """Depth tape int64[length, length] from node spans: each node (a, e) adds 1 to rows >= e, columns a..e.

    A 2-D difference array and two cumulative sums; no node ends at ``<eos>``, so its row repeats the
    last token's.
    """
    first, last = np.asarray(spans, dtype=np.int64).reshape(-1, 2).T
    width = length + 1
    row = last * width
    diff = (np.bincount(row + first, minlength=width * width)
            - np.bincount(row + last + 1, minlength=width * width))
    return diff.reshape(width, width).cumsum(axis=1).cumsum(axis=0)[:length, :length]


# -- decoding -----------------------------------------------------------------------------------------
def attachments_to_tree(attachment: Sequence[int], leaves: Sequence[str]) -> Node:
    """The binary tree (nodes labelled ``X``) built by attachment labels ``[0] + per token + [0]``.

    Each token reduces with the stack constituents down to the one whose rightmost token is its label;
    ``<eos>`` then closes whatever is left on the stack (as the official decoder does). A single leaf is
    returned as a string. Raises ``ValueError`` on a label that names no constituent on the stack.
    """
    n = len(leaves)
    if len(attachment) != n + 2 or attachment[0] != 0 or attachment[-1] != 0:
        raise ValueError(f"expected [0] + {n} labels + [0], got {list(attachment)}")
    stack: list[tuple[int, Node]] = []  # (position of the rightmost token, constituent)
    for k in range(1, n + 1):
        label, node = int(attachment[k]), leaves[k - 1]
        if label != k:
            while True:
                if not stack or stack[-1][0] < label:
                    raise ValueError(f"token {k}: attachment {label} is not the end of a constituent on "
                                     "the stack")
                end, top = stack.pop()
                node = Tree(UNLABELLED, (top, node))
                if end == label:
                    break
        stack.append((k, node))
    if not stack:
        raise ValueError("no tokens")
    node = stack.pop()[1]
    while stack:
        node = Tree(UNLABELLED, (stack.pop()[1], node))
    return node


def merge_pieces(tree: Node, word_of: Sequence[int], words: Sequence[str]) -> Node:
    """Appendix C: a tree over subword pieces -> the tree over words, merging leaf siblings of one word.

    Leaf i of ``tree`` (in order) is a piece of word ``word_of[i]``; a node whose children are all leaves of
    the same word becomes that word, bottom-up, so ``(ab, (ra, (ca, dabra)))`` becomes ``abracadabra``.
    Raises ``ValueError`` when a word's pieces do not form a constituent (the merge is then undefined).
    """
    leaf = iter(range(len(word_of)))
    placed: list[int] = []  # the word of every leaf of the merged tree, in order

    def word(index: int) -> str:
        placed.append(index)
        return words[index]

    def go(node: Node) -> Node | int:  # int: a merged word, by index
        if isinstance(node, str):
            return word_of[next(leaf)]
        children = [go(c) for c in node.children]
        if all(isinstance(c, int) for c in children) and len(set(children)) == 1:
            return children[0]
        return Tree(node.label, tuple(word(c) if isinstance(c, int) else c for c in children))

    merged = go(tree)
    out = word(merged) if isinstance(merged, int) else merged
    split = [w for k, w in enumerate(placed) if k and placed[k - 1] == w]
    if split:
        raise ValueError(f"the pieces of word {split[0]} ({words[split[0]]!r}) do not form a constituent")
    return out


def unlabelled(tree: Node) -> Node:
    """The bare structure of a tree: unary nodes removed, every other node labelled ``X``."""
    if isinstance(tree, str):
        return tree
    if len(tree.children) == 1:
        return unlabelled(tree.children[0])
    return Tree(UNLABELLED, tuple(unlabelled(c) for c in tree.children))
