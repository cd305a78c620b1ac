"""SOM structure: Γ, grid labels, the grid view and Algorithm 1 on the paper's figures and hand-worked cases.

The figures are images; Fig. 2's tree is pinned down by the text: 3 slots (the mask example π = (0, 1, 1)),
"c is written into the slot 2, then d, e should be written into the slot 1" and the split point i = 2
when e is read (Fig. 3b). The only binary tree over a..e with those slots is ((a b) ((c d) e)).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lightning_modules.data.dependency import DepTree, read_conllu
from lightning_modules.data.tree import parse_tree, to_bracketed
from lightning_modules.families.som import encoding as som

FIG2 = ((0, 1), ((2, 3), 4))  # ((a b) ((c d) e))
SHE_ATE = DepTree(forms=tuple("She ate the red apple quickly .".split()), heads=(2, 0, 5, 5, 2, 2, 2),
                  deprels=tuple("nsubj root det amod obj advmod punct".split()),
                  upos=tuple("PRON VERB DET ADJ NOUN ADV PUNCT".split()))


def test_figure_2_grid_labels_and_first_siblings() -> None:
    assert som.token_slots(FIG2, 3).tolist() == [3, 2, 2, 1, 1]
    assert som.first_siblings(FIG2).tolist() == [-1, 0, 0, 2, 2]
    assert som.shape_from_slots([3, 2, 2, 1, 1]) == FIG2


def test_figure_2_grid_view() -> None:
    # rows: slots 3, 2, 1, 0; columns: a..e; cells: 1-based spans
    assert som.grid(FIG2, 3) == [
        [[1, 1], [1, 2], [1, 2], [1, 2], [1, 5]],
        [None, [2, 2], [3, 3], [3, 4], [3, 5]],
        [None, None, None, [4, 4], [5, 5]],
        [None, None, None, None, None],
    ]


def test_figure_2_algorithm_1_with_gold_decisions() -> None:
    gold = som.token_slots(FIG2, 3)
    labels = som.structure_labels(som.first_siblings(FIG2), gold, 3)
    assert labels.tolist() == gold.tolist()
    # Fig. 3b: reading e (step 5) the split point is i = 2, i.e. e is written into slot i - 1 = 1
    assert labels[4] + 1 == 2


def test_figure_4_dependency_to_gamma() -> None:
    # the head and its dependents merged into one constituent, n-ary nodes binarized left
    gamma = som.gamma(SHE_ATE)
    assert to_bracketed(gamma) == ("(root (root (root (root (PRON She) (VERB ate)) (obj (obj (DET the) (ADJ red))"
                                   " (NOUN apple))) (ADV quickly)) (PUNCT .))")
    shape = som.binary_shape(gamma)
    assert shape == ((((0, 1), ((2, 3), 4)), 5), 6)
    assert som.token_slots(shape, 4).tolist() == [4, 3, 3, 2, 2, 3, 3]
    assert som.first_siblings(shape).tolist() == [-1, 0, 0, 2, 2, 0, 0]


def test_binary_shape_binarizes_left_and_ignores_unary_nodes() -> None:
    assert som.binary_shape(parse_tree("(S (NP (DT a) (NN b) (NN c)) (VP (V d)))")) == (((0, 1), 2), 3)
    assert som.binary_shape(parse_tree("(S (X a))")) == 0
    assert to_bracketed(som.shape_to_tree(((0, 1), 2), ["a", "b", "c"])) == "(X (X a b) c)"
    assert to_bracketed(som.shape_to_tree(0, ["a"])) == "(X a)"


def test_algorithm_1_model_writes_a_token_too_high() -> None:
    # the model writes d into slot 2 (attaching it to ((a b) c)) where the gold slot is 1: e, whose first
    # sibling is c, must follow d into slot 2 (mu_5 = theta_4 = 2) instead of the gold slot 1
    labels = som.structure_labels(som.first_siblings(FIG2), [3, 2, 2, 2, 2], 3)
    assert labels.tolist() == [3, 2, 2, 1, 2]


def test_algorithm_1_model_writes_a_token_too_low() -> None:
    # the model writes c into slot 1 (under b) where the gold slot is 2, and d into slot 0: the labels
    # bring d and e back to slot 1, the siblings of c's constituent
    labels = som.structure_labels(som.first_siblings(FIG2), [3, 2, 1, 0, 1], 3)
    assert labels.tolist() == [3, 2, 2, 1, 1]


def test_algorithm_1_label_stays_inside_the_mask() -> None:
    # (a (b (c d))) with 4 slots: gold slots 4 3 2 1. The model writes c into slot 3 (above its label 2).
    # d's first sibling is c = i - 1, so the paper's formula gives xi_c - 1 = 1, which the mask of step 4
    # (theta_4 >= theta_3 - 1 = 2) forbids; the label is raised to 2, the nearest slot still allowed
    shape = (0, (1, (2, 3)))
    assert som.token_slots(shape, 4).tolist() == [4, 3, 2, 1]
    labels = som.structure_labels(som.first_siblings(shape), [4, 3, 3, 2], 4)
    assert labels.tolist() == [4, 3, 2, 2]


def test_algorithm_1_is_batched_over_leading_dimensions() -> None:
    fs = np.stack([som.first_siblings(FIG2)] * 3)
    decisions = np.array([[3, 2, 2, 1, 1], [3, 2, 2, 2, 2], [3, 2, 1, 0, 1]])
    expected = [som.structure_labels(fs[0], d, 3).tolist() for d in decisions]
    assert som.structure_labels(fs, decisions, 3).tolist() == expected


def test_labels_are_clamped_at_slot_zero() -> None:
    right = (0, (1, (2, (3, 4))))  # right depth 4 does not fit 3 slots
    assert som.token_slots(right, 3).tolist() == [3, 2, 1, 0, 0]
    assert som.structure_labels(som.first_siblings(right), som.token_slots(right, 3), 3).tolist() == [3, 2, 1, 0, 0]


def test_left_branching_labels() -> None:
    shape = som.left_branching(4)
    assert shape == (((0, 1), 2), 3)
    assert som.token_slots(shape, 5).tolist() == [5, 4, 4, 4]


def test_encode_wraps_the_sentence_between_sos_and_eos() -> None:
    example = som.encode([7, 8, 9], (0, (1, 2)), 5, sos=1, eos=2)
    assert example.inputs.tolist() == [1, 7, 8, 9] and example.targets.tolist() == [7, 8, 9, 2]
    # ((<s> (a (b c))) <eos>): <s> slot 5, the sentence one slot below, <eos> back at 4
    assert example.slots.tolist() == [5, 4, 3, 2, 4]
    assert example.first_sibling.tolist() == [-1, 0, 1, 2, 0]
    with pytest.raises(ValueError):
        som.encode([7, 8], (0, (1, 2)), 5, sos=1, eos=2)


@st.composite
def shapes(draw: st.DrawFn, n: int | None = None) -> som.Shape:
    n = draw(st.integers(1, 12)) if n is None else n
    if n == 1:
        return 0
    k = draw(st.integers(1, n - 1))
    left, right = draw(shapes(k)), draw(shapes(n - k))

    def shift(node: som.Shape) -> som.Shape:
        return node + k if isinstance(node, int) else (shift(node[0]), shift(node[1]))

    return (left, shift(right))


@given(shapes(), st.randoms(use_true_random=False))
@settings(max_examples=200, deadline=None)
def test_gold_decisions_rebuild_random_trees(shape: som.Shape, rng) -> None:
    n_slots = 12
    slots = som.token_slots(shape, n_slots)
    assert som.structure_labels(som.first_siblings(shape), slots, n_slots).tolist() == slots.tolist()
    assert som.shape_from_slots(slots) == shape
    # any decisions the mask allows give labels the mask allows at every step
    size = len(slots)
    decisions = [n_slots]
    for t in range(1, size):
        low = max(decisions[-1] - 1, 0)
        decisions.append(n_slots - 1 if t == 1 else rng.randint(low, n_slots - 1))
    labels = som.structure_labels(som.first_siblings(shape), decisions, n_slots)
    assert all(max(decisions[t - 1] - 1, 0) <= labels[t] <= n_slots - 1 for t in range(1, size))


@given(shapes(), st.integers(2, 6))
@settings(max_examples=100, deadline=None)
def test_depth_slots_keep_the_tree_that_clamping_loses(shape: som.Shape, n_slots: int) -> None:
    """The unclamped labels rebuild every tree, deeper than the memory or not; the clamped ones only trees
    that fit, which is why parses are scored against the former (``val_uf1`` and ``eval parse`` alike)."""
    depth = som.depth_slots(som.first_siblings(shape), n_slots)
    assert som.shape_from_slots(depth) == shape
    assert np.maximum(depth, 0).tolist() == som.token_slots(shape, n_slots).tolist()
    if depth.min() >= 0:
        assert som.shape_from_slots(som.token_slots(shape, n_slots)) == shape


def test_depth_slots_of_a_right_branching_tree_deeper_than_the_memory() -> None:
    right = (0, (1, (2, (3, 4))))
    assert som.depth_slots(som.first_siblings(right), 3).tolist() == [3, 2, 1, 0, -1]
    # clamped, tokens 3 and 4 share slot 0: the tree they rebuild is another one
    assert som.shape_from_slots(som.token_slots(right, 3)) == (0, (1, ((2, 3), 4)))


def test_gold_grid_labels_rebuild_gamma_on_ewt_dev(shared_data: Path) -> None:
    """With gold decisions Algorithm 1 returns the grid labels, and they rebuild Γ exactly, on every dev
    sentence with the paper's 15 slots: the deepest sentence reaches down to slot 4 (11 slots in use)."""
    lowest = 15
    for _, dep in read_conllu(shared_data / "ud" / "UD_English-EWT" / "en_ewt-ud-dev.conllu.gz"):
        shape = som.binary_shape(som.gamma(dep))
        full = som.sentence_shape(shape)
        slots = som.token_slots(full, 15)
        lowest = min(lowest, int(slots.min()))
        labels = som.structure_labels(som.first_siblings(full), slots, 15)
        assert labels.tolist() == slots.tolist()
        assert som.shape_from_slots(labels) == full
        assert som.shape_from_slots(som.token_slots(shape, 15)) == shape
    assert lowest == 4
