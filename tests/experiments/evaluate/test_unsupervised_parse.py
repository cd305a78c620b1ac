"""Unsupervised-parsing F1 and branching statistics (PaLM Tables 3–4; the ON-LSTM/PaLM evaluation scripts) on
hand-worked trees."""

from __future__ import annotations

import pytest

from experiments.evaluate.unsupervised_parse import (
    branching,
    gold_view,
    sentence_scores,
    split_percentages,
    splits,
    summarize,
)
from lightning_modules.data.tree import nontrivial_spans, parse_tree, to_bracketed

GOLD = parse_tree("(S (NP (DT The) (NN cat)) (VP (VBD sat) (PP (IN on) (NP (DT the) (NN mat)))) (. .))")


def test_gold_view_removes_punctuation_and_trivial_spans_are_dropped():
    view = gold_view(GOLD)
    assert view.leaves() == "The cat sat on the mat".split()
    # NP (0,1), VP (2,5), PP (3,5), NP (4,5); S (0,5) is the whole sentence
    assert nontrivial_spans(view) == {(0, 1), (2, 5), (3, 5), (4, 5)}
    assert gold_view(parse_tree("(S (. .))")) is None


def test_sentence_scores_hand_worked():
    gold = {(0, 1), (2, 5), (3, 5), (4, 5)}
    right = nontrivial_spans(branching("The cat sat on the mat".split(), right=True))
    assert right == {(1, 5), (2, 5), (3, 5), (4, 5)}
    precision, recall, f1 = sentence_scores(right, gold)
    assert (precision, recall) == (0.75, 0.75) and f1 == pytest.approx(0.75)
    assert sentence_scores(set(), set()) == (1.0, 1.0, 1.0)  # a two-word sentence: nothing to find
    assert sentence_scores({(0, 1)}, set()) == (0.0, 1.0, 0.0)
    assert sentence_scores(set(), {(0, 1)}) == (0.0, 0.0, 0.0)


def test_sentence_f1_is_the_mean_over_sentences_and_corpus_f1_pools_brackets():
    predicted = [{(0, 1)}, {(0, 1), (1, 2)}]
    gold = [{(0, 1)}, {(2, 3), (1, 3), (0, 1)}]
    result = summarize(predicted, gold)
    # sentence 1: F1 1; sentence 2: P 1/2, R 1/3, F1 0.4 -> mean 0.7; corpus: P 2/3, R 2/4 -> F1 4/7
    assert result["sentence_f1"] == pytest.approx(70.0)
    assert result["corpus_f1"] == pytest.approx(100 * 4 / 7)
    assert result["sentences"] == 2


def test_splits_count_left_and_right_branching_nodes_over_three_or_more_words():
    tree = parse_tree("(X (X (X a b) c) (X d (X e (X f g))))")
    # nodes over 3+ words: root (neither), [a b c] (left), [d e f g] (right), [e f g] (right)
    assert splits(tree) == (1, 2, 4)
    assert split_percentages([tree]) == {"left_splits_pct": 25.0, "right_splits_pct": 50.0}
    assert splits(branching(list("abcde"), right=True)) == (0, 3, 3)
    assert splits(branching(list("abcde"), right=False)) == (3, 0, 3)
    assert split_percentages([branching(["a", "b"], True)]) == {"left_splits_pct": None, "right_splits_pct": None}


def test_splits_of_unbinarized_trees_count_a_node_by_its_first_and_last_child():
    # (S (NP The cat) (VP sat (PP on (NP the mat)))), punctuation removed, n-ary nodes kept:
    # S [0,6] neither, VP [2,6] right (sat + [on the mat]), PP [3,6] right; NPs of two words are trivial
    assert splits(gold_view(GOLD)) == (0, 2, 3)
    # (NP (DT the) (JJ big) (NN cat)): first and last children single words -> neither; (X (X a b) c d): left;
    # (X a b (X c d)): right; a unary chain does not count
    tree = parse_tree("(S (NP (DT the) (JJ big) (NN cat)) (X (X a b) c d) (X a b (X c d)) (Y (Z (W u v w))))")
    assert splits(tree) == (1, 1, 5)


def test_branching_baselines():
    assert to_bracketed(branching(list("abcd"), right=True)) == "(X a (X b (X c d)))"
    assert to_bracketed(branching(list("abcd"), right=False)) == "(X (X (X a b) c) d)"
    assert to_bracketed(branching(["a"], right=True)) == "(X a)"
