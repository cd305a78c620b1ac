"""Syntactic Ordered Memory structure (Shen et al. 2021, §3.1, §3.3, Figs. 2–4, Algorithm 1).

SOM reads a sentence through an ordered memory of N slots, numbered 1 (bottom) to N (top) as in the paper.
Its structure is a **binary tree Γ** and the **grid view** of Γ (Fig. 2): every node sits in a slot.

- **Γ from a dependency tree** (Fig. 4): every head is merged with its dependents into one constituent and
  n-ary constituents are binarized with a left-branching bias, ``((((l1 l2) h) r1) r2)``
  (``transforms.dependency_to_constituency``). The paper does not say what it does with non-projective
  trees (its PTB conversions are projective); we lift crossed arcs first (``dependency.projectivize``), so
  every UD sentence has a Γ.
- **Grid labels** (the slot each token is written into): the first token is written into slot N; the
  left child of a node shares the node's slot and its right child sits one slot lower (Eq. 1–3: x_t is
  written into slot i − 1 below the split point i and composed upwards with the memory of slots ≥ i). So a
  token's slot is N minus the number of right-child edges from the root to it. Slot 0 is the virtual
  slot below slot 1 (split point 1: x_t composes at once with slot 1's memory), so trees whose right depth
  exceeds N do not fit; their labels are clamped at 0 (the paper leaves this open).
- **Decisions.** A decision θ_t, like a label ξ_t, is the slot x_t is written into, for t ≥ 2 a value in
  0..N − 1. It is also the 0-based index of the one-step look-ahead parser's split point (p_t's 1-based
  split i = θ_t + 1). The memory mask (Eq. 4) allows θ_t >= θ_{t-1} − 1 and forces θ_2 = N − 1.
- **first_sibling_Γ(i)**: the first token of the smallest constituent containing w_i in which w_i is not
  the first token: for a binary tree, the first token of the node whose right child starts at w_i.
- **Algorithm 1**: ξ_1 = N and ξ_i = max(ξ_j − 1, μ_i) with j = first_sibling_Γ(i) and
  μ_i = max(θ_{j+1}, …, θ_{i−1}). With gold decisions it returns the grid labels. Decision left open by
  the paper: when j = i − 1 and the model wrote x_{i−1} above its label, ξ_j − 1 lies below the mask of
  step i (θ_i >= θ_{i−1} − 1) and p_i could never give it probability; the label is then raised to
  θ_{i−1} − 1, the nearest slot the model can still choose. (For j < i − 1, μ_i >= θ_{i−1} already.)

The model's sequence (``encode``): inputs ``<s> w_1 … w_n`` predicting ``w_1 … w_n <eos>``, under the
tree ``((<s> Γ) <eos>)``: ``<s>`` is written into slot N, the sentence hangs one slot below it, and the
``<eos>`` label (that of the zero-step look-ahead parser after the last word) closes the sentence at
slot N − 1. Trees here are shapes: a leaf is its 0-based token index, a node a pair (left, right).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from lightning_modules.data.dependency import DepTree, projectivize
from lightning_modules.data.transforms import dependency_to_constituency
from lightning_modules.data.tree import Tree

Shape = int | tuple["Shape", "Shape"]
SOS, EOS = "<s>", "<eos>"
UNLABELLED = "X"
TREE_LABELS = ("gold", "left_branching")  # the tree a model learns: Γ, or Table 2's left-branching ablation


# -- Γ ------------------------------------------------------------------------------------------------
def gamma(dep: DepTree) -> Tree:
    """Γ of a dependency tree (Fig. 4): labelled with relations over ``(UPOS word)`` preterminals."""
    return dependency_to_constituency(projectivize(dep))


def binary_shape(tree: Tree) -> Shape:
    """The binary shape of a tree over its leaves: preterminals and unary nodes are transparent, n-ary
    nodes are binarized with a left-branching bias (Fig. 4), ``(a b c) -> ((a b) c)``."""
    counter = iter(range(len(tree.leaves())))

    def go(node: Tree | str) -> Shape:
        if isinstance(node, str):
            return next(counter)
        kids = [go(c) for c in node.children]
        out = kids[0]
        for kid in kids[1:]:
            out = (out, kid)
        return out

    return go(tree)


def left_branching(n: int) -> Shape:
    """The left-branching shape over ``n`` tokens (Table 2's trivial tree labels)."""
    out: Shape = 0
    for i in range(1, n):
        out = (out, i)
    return out


def shape_to_tree(shape: Shape, words: Sequence[str]) -> Tree:
    """An unlabelled tree over ``words`` (every node ``X``), as EVALB reads it; one word is ``(X w)``."""
    def go(node: Shape) -> Tree | str:
        if isinstance(node, int):
            return words[node]
        return Tree(UNLABELLED, (go(node[0]), go(node[1])))

    out = go(shape)
    return out if isinstance(out, Tree) else Tree(UNLABELLED, (out,))


def size(shape: Shape) -> int:
    """Number of tokens of a shape."""
    return 1 if isinstance(shape, int) else size(shape[0]) + size(shape[1])


# -- the grid view ------------------------------------------------------------------------------------
def token_slots(shape: Shape, n_slots: int) -> np.ndarray:
    """Grid labels (Fig. 2): the slot each token is written into, N minus its right depth, clamped at 0."""
    out = np.zeros(size(shape), dtype=np.int64)
    stack: list[tuple[Shape, int]] = [(shape, n_slots)]
    while stack:
        node, slot = stack.pop()
        if isinstance(node, int):
            out[node] = max(slot, 0)
        else:
            stack.append((node[0], slot))
            stack.append((node[1], slot - 1))
    return out


def depth_slots(first_sibling: np.ndarray, n_slots: int) -> np.ndarray:
    """The grid labels before clamping (Algorithm 1 with gold decisions and no floor): ξ_1 = N, ξ_i = ξ_j − 1
    with j = first_sibling(i), below 0 for tokens deeper than the memory. ``shape_from_slots`` of them is the
    tree itself, clamped or not (``token_slots`` loses that tree where it clamps)."""
    out = np.empty(len(first_sibling), dtype=np.int64)
    for i, j in enumerate(first_sibling):
        out[i] = n_slots if j < 0 else out[j] - 1
    return out


def first_siblings(shape: Shape) -> np.ndarray:
    """first_sibling_Γ(i) for every token (0-based; -1 for the first token)."""
    out = np.full(size(shape), -1, dtype=np.int64)

    def go(node: Shape) -> int:  # returns the node's first token
        if isinstance(node, int):
            return node
        first = go(node[0])
        out[go(node[1])] = first
        return first

    go(shape)
    return out


def shape_from_slots(slots: Sequence[int]) -> Shape:
    """The binary tree whose grid labels are ``slots`` (the inverse of ``token_slots``): also the parse
    that a sequence of decisions θ builds. Token t closes every pending constituent whose first token's
    slot is at most its own, then waits as the right sibling of the constituent below it on the stack."""
    stack: list[tuple[Shape, int]] = []
    for t, slot in enumerate(slots):
        while len(stack) >= 2 and stack[-1][1] <= slot:
            right, _ = stack.pop()
            left, left_slot = stack.pop()
            stack.append(((left, right), left_slot))
        stack.append((t, int(slot)))
    while len(stack) >= 2:
        right, _ = stack.pop()
        left, left_slot = stack.pop()
        stack.append(((left, right), left_slot))
    return stack[0][0]


def grid(shape: Shape, n_slots: int) -> list[list[list[int] | None]]:
    """The grid view M̃ of Fig. 2: one row per slot from N (top) down to 0, one column per token.

    Column t holds the memory once w_t has been read and composed: on the path from the root to w_t, the
    node where the path turns right at slot s puts at s either itself, if it ends at w_t (a node generated
    at step t, orange in the figure), or its left child, a finished constituent waiting for its right
    sibling (copied from an earlier step, gray); w_t itself sits at its own slot. A cell is the node's span
    ``[first, last]`` (1-based tokens) or None (an empty slot). Nodes below slot 0 are not shown.
    """
    n = size(shape)
    spans: dict[int, tuple[int, int]] = {}  # id(node) -> 0-based span

    def span(node: Shape) -> tuple[int, int]:
        if isinstance(node, int):
            return node, node
        key = id(node)
        if key not in spans:
            spans[key] = (span(node[0])[0], span(node[1])[1])
        return spans[key]

    rows: list[list[list[int] | None]] = [[None] * n for _ in range(n_slots + 1)]
    for t in range(n):
        node, slot = shape, n_slots
        while not isinstance(node, int):
            left, right = node
            if span(right)[0] <= t:  # the path turns right at this slot
                first, last = span(node) if span(node)[1] == t else span(left)
                if slot >= 0:
                    rows[n_slots - slot][t] = [first + 1, last + 1]
                node, slot = right, slot - 1
            else:
                node = left
        if slot >= 0:
            rows[n_slots - slot][t] = [t + 1, t + 1]
    return rows


# -- Algorithm 1 ----------------------------------------------------------------------------------------
def structure_labels(first_sibling: np.ndarray, decisions: np.ndarray, n_slots: int) -> np.ndarray:
    """Algorithm 1: the structure labels ξ from Γ (its ``first_siblings``) and earlier decisions θ.

    Both arrays are ``int[..., T]`` (any leading batch dimensions; θ_1 is not read). Returns ``int64[...,
    T]``: ξ_1 = N, ξ_i = max(ξ_j − 1, μ_i, θ_{i−1} − 1, 0) (module docstring: the last two terms keep the
    label inside the model's mask and the memory). ξ_i depends on θ_{<i} only, so the labels of a whole
    sequence can be computed after its decisions have been taken.
    """
    first_sibling = np.asarray(first_sibling, dtype=np.int64)
    decisions = np.asarray(decisions, dtype=np.int64)
    steps = first_sibling.shape[-1]
    k = np.arange(steps)
    # μ_i = max θ_k over j < k < i (-1 when the range is empty): one masked max for every i at once
    between = (k > first_sibling[..., :, None]) & (k < k[:, None])
    mu = np.where(between, decisions[..., None, :], -1).max(axis=-1, initial=-1)
    labels = np.empty(first_sibling.shape, dtype=np.int64)
    labels[..., 0] = n_slots
    for i in range(1, steps):
        j = np.maximum(first_sibling[..., i], 0)
        at_j = np.take_along_axis(labels, j[..., None], axis=-1)[..., 0]
        labels[..., i] = np.maximum.reduce([at_j - 1, mu[..., i], decisions[..., i - 1] - 1,
                                            np.zeros_like(at_j)])
    return labels


# -- the model's sequence ---------------------------------------------------------------------------------
@dataclass(frozen=True, eq=False)
class SOMExample:
    """One sentence as SOM reads it (module docstring): ``n + 1`` inputs and the structure of ``n + 2``
    tokens ``<s> w_1 … w_n <eos>`` under ``((<s> Γ) <eos>)``."""

    inputs: np.ndarray  # int64[n+1]: <s>, the words
    targets: np.ndarray  # int64[n+1]: the words, <eos>
    first_sibling: np.ndarray  # int64[n+2], over <s> w_1..w_n <eos>
    slots: np.ndarray  # int64[n+2]: the gold grid labels of the same tokens
    tags: tuple[str, ...] = ()  # the words' POS tags, for scoring parses (not read by the model)

    def __len__(self) -> int:
        return len(self.inputs)


def sentence_shape(shape: Shape) -> Shape:
    """``((<s> Γ) <eos>)`` over ``n + 2`` tokens: Γ's tokens move one position right."""
    def shift(node: Shape) -> Shape:
        return node + 1 if isinstance(node, int) else (shift(node[0]), shift(node[1]))

    return ((0, shift(shape)), size(shape) + 1)


def encode(ids: Sequence[int], shape: Shape, n_slots: int, sos: int, eos: int, tags: Sequence[str] = ()
           ) -> SOMExample:
    """Encode a sentence of word ids with its binary shape (Γ, or a left-branching tree)."""
    if len(ids) != size(shape):
        raise ValueError(f"{len(ids)} words but a tree over {size(shape)}")
    full = sentence_shape(shape)
    return SOMExample(np.array([sos, *ids], dtype=np.int64), np.array([*ids, eos], dtype=np.int64),
                      first_siblings(full), token_slots(full, n_slots), tuple(tags))
