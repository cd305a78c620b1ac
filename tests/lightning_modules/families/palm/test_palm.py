"""PaLM encoding: span targets (Eq. 5, Appendix A) against the official code's golden rows and hand-worked
trees, and the greedy top-down parser (§2.2, Eq. 4) on hand-worked score tables."""

from __future__ import annotations

import random

import numpy as np
import pytest

from lightning_modules.data.tree import Tree, constituent_spans, nontrivial_spans, parse_tree, to_bracketed
from lightning_modules.families.palm.encoding import UNLABELLED, greedy_parse, span_targets

X = UNLABELLED

# reference-impls §4.2: the official data.py rows for max_span_length 10 (a zero row first; entries are
# msl − 1 − column for a gold span, the column being k − max(0, t − msl + 1) for the span of words k..t−1)
GOLDEN_MSL = 10
GOLDEN = {
    "(S (A a b) (B c d))": [[0] * 9, [0] * 9, [9] + [0] * 8, [0] * 9, [0, 0, 7] + [0] * 6],
    "(S a (A b (B c d)))": [[0] * 9] * 4 + [[0, 8, 7] + [0] * 6],
}


def official_spans(rows: list[list[int]], msl: int) -> set[tuple[int, int, int]]:
    """(row, first word, last word) of every nonzero entry of the official layout."""
    out = set()
    for t, row in enumerate(rows):
        start = max(0, t - msl + 1)
        for column, value in enumerate(row):
            if value:
                assert value == msl - 1 - column
                out.add((t, start + column, t - 1))
    return out


def our_spans(targets: np.ndarray) -> set[tuple[int, int, int]]:
    return {(int(r), int(r) - 1 - int(i), int(r) - 1) for r, i in zip(*np.nonzero(targets))}


@pytest.mark.parametrize("bracketed", sorted(GOLDEN))
def test_targets_mark_the_spans_of_the_official_golden_rows(bracketed):
    tree = parse_tree(bracketed)
    n = len(tree.leaves())
    # the official rows offer spans of length <= msl − 1, i.e. our m = msl − 1
    targets = span_targets(nontrivial_spans(tree), n, GOLDEN_MSL - 1)
    assert targets.shape == (len(GOLDEN[bracketed]), GOLDEN_MSL - 1)
    assert our_spans(targets) == official_spans(GOLDEN[bracketed], GOLDEN_MSL)
    sums = targets.sum(axis=1)
    assert np.allclose(sums[sums > 0], 1.0)


def test_targets_of_a_hand_worked_tree_are_normalised_and_limited_to_m_spans():
    tree = parse_tree("(S (NP (DT the) (JJ old) (NN man)) (VP (VBD saw) (NP (DT a) (NN dog))))")
    assert nontrivial_spans(tree) == {(0, 2), (3, 5), (4, 5)}  # S, words and POS nodes are trivial
    targets = span_targets(nontrivial_spans(tree), 6, 4)
    expected = np.zeros((7, 4), dtype=np.float32)
    expected[3, 2] = 1.0  # input "saw": span [0, 2] "the old man" ends at the previous word
    expected[6, 1] = expected[6, 2] = 0.5  # input <eos>: "a dog" and "saw a dog" both end at "dog"
    np.testing.assert_array_equal(targets, expected)
    short = span_targets(nontrivial_spans(tree), 6, 2)  # m = 2: only spans of length <= 2 can be selected
    assert short[3].sum() == 0 and short[6].tolist() == [0.0, 1.0]


def test_targets_reject_spans_outside_the_sentence():
    with pytest.raises(ValueError):
        span_targets([(2, 5)], 4, 3)


def scores_from_table(n: int, table: dict[tuple[int, int], float], default: float = 0.0) -> np.ndarray:
    scores = np.full((n, n), default)
    for (a, b), s in table.items():
        scores[b, b - a] = s
    return scores


def test_parser_splits_where_the_right_part_scores_highest():
    words = "a b c d".split()
    # root [0,3]: right parts [1,3]=0.1, [2,3]=0.9, [3,3]=0.3 -> split after b
    scores = scores_from_table(4, {(1, 3): 0.1, (2, 3): 0.9, (3, 3): 0.3})
    assert to_bracketed(greedy_parse(scores, words)) == f"({X} ({X} a b) ({X} c d))"


def test_parser_ignores_the_left_part_score():
    words = "a b c d".split()
    # root: [3,3]=0.5 beats [1,3]=0.4 and [2,3]=0.2; the left part [0,2] scoring 100 changes nothing
    # [0,2]: right parts [1,2]=0.7 and [2,2]=0.0 -> split after a
    table = {(1, 3): 0.4, (2, 3): 0.2, (3, 3): 0.5, (0, 2): 100.0, (1, 2): 0.7, (2, 2): 0.0, (0, 1): 100.0}
    assert to_bracketed(greedy_parse(scores_from_table(4, table), words)) == f"({X} ({X} a ({X} b c)) d)"


def test_parser_ties_go_to_the_longest_right_part():
    assert to_bracketed(greedy_parse(np.zeros((3, 3)), ["a", "b", "c"])) == f"({X} a ({X} b c))"


def test_parser_on_one_and_two_words():
    assert greedy_parse(np.zeros((1, 1)), ["a"]) == Tree(X, ("a",))
    assert greedy_parse(np.zeros((2, 2)), ["a", "b"]) == Tree(X, ("a", "b"))
    with pytest.raises(ValueError):
        greedy_parse(np.zeros((0, 0)), [])


def test_parser_with_palm_rb_scores_is_right_branching_and_reversed_is_left_branching():
    words = [str(i) for i in range(6)]
    lengths = np.arange(1, 7)[None, :].repeat(6, axis=0).astype(float)
    assert to_bracketed(greedy_parse(lengths, words)) == f"({X} 0 ({X} 1 ({X} 2 ({X} 3 ({X} 4 5)))))"
    assert to_bracketed(greedy_parse(-lengths, words)) == f"({X} ({X} ({X} ({X} ({X} 0 1) 2) 3) 4) 5)"


def random_binary_tree(words: list[str], rng: random.Random) -> Tree | str:
    if len(words) == 1:
        return words[0]
    k = rng.randrange(1, len(words))
    return Tree(X, (random_binary_tree(words[:k], rng), random_binary_tree(words[k:], rng)))


def test_parser_recovers_any_binary_tree_from_its_indicator_scores():
    """§3: s = 1 on the tree's nodes (words as their one-word nodes), 0 elsewhere, gives back the tree."""
    rng = random.Random(0)
    for _ in range(200):
        words = [f"w{i}" for i in range(rng.randrange(2, 25))]
        tree = random_binary_tree(words, rng)
        assert isinstance(tree, Tree)
        table = {span: 1.0 for span in constituent_spans(tree)} | {(i, i): 1.0 for i in range(len(words))}
        assert greedy_parse(scores_from_table(len(words), table), words) == tree


def test_parser_handles_long_sentences_without_recursion():
    words = [str(i) for i in range(1500)]
    lengths = np.broadcast_to(np.arange(1, 1501, dtype=float), (1500, 1500))
    tree = greedy_parse(lengths, words)
    assert tree.leaves() == words


def test_constituent_spans_close_in_post_order():
    tree = parse_tree("(S (NP (DT the) (NN dog)) (VP (VBZ barks)))")
    assert constituent_spans(tree) == [(0, 0), (1, 1), (0, 1), (2, 2), (2, 2), (0, 2)]
