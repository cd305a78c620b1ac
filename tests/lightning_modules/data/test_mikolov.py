"""Mikolov-style PTB text from trees: the official sample's lines, number and punctuation rules, the vocabulary
and the stream; and the PaLM stream data (span targets aligned with the stream)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from lightning_modules.data.mikolov import EOS, UNK, mikolov_tree, normalise, stream_ids, vocabulary
from lightning_modules.data.tree import clean, read_bracketed
from lightning_modules.families.palm.data import aligned_targets, stream_sentence

# the official PaLM repository's data/penn/train.txt, lines 2-3 (Mikolov's ptb.train.txt): WSJ_0001's trees
OFFICIAL = ["pierre <unk> N years old will join the board as a nonexecutive director nov. N",
            "mr. <unk> is chairman of <unk> n.v. the dutch publishing group"]


def test_the_first_ptb_trees_give_the_official_mikolov_lines(shared_data: Path):
    trees = [t for _, t in read_bracketed(shared_data / "ptb_nltk_sample" / "combined" / "wsj_0001.mrg")]
    for tree, line in zip(trees, OFFICIAL):
        words = mikolov_tree(clean(tree)).leaves()
        expected = line.split()
        assert len(words) == len(expected)
        assert all(w == e for w, e in zip(words, expected) if e != UNK)


def test_numbers_become_n_and_glued_numbers_stay_words():
    assert normalise("61", "CD") == "N"
    assert normalise("%", "NN") == "N"
    assert normalise("3.5", "CD") == "N"
    assert normalise("1,000", "CD") == "N"
    assert normalise("10-11-89", "CD") == "N"
    assert normalise("1980s", "CD") == "1980s"
    assert normalise("10-year", "JJ") == "10-year"
    assert normalise("747-400s", "CD") == "747-400s"
    assert normalise("Nov.", "NNP") == "nov."
    assert normalise("3\\/4", "CD") == "N"


def test_punctuation_is_removed_from_the_tree_with_emptied_constituents():
    from lightning_modules.data.tree import parse_tree

    tree = parse_tree("(S (NP (NNP John)) (PRN (-LRB- -LRB-) (, ,) (-RRB- -RRB-)) (VP (VBD ran) (NP (CD 3) "
                      "(NNS miles))) (. .))")
    assert str(mikolov_tree(tree)) == "(S (NP (NNP john)) (VP (VBD ran) (NP (CD N) (NNS miles))))"
    assert mikolov_tree(parse_tree("(S (. .))")) is None


def test_vocabulary_and_stream():
    sentences = [["a", "b", "a"], ["c", "a", "b"]]
    tokens = vocabulary(sentences, size=4)
    assert tokens == [EOS, UNK, "a", "b"]
    index = {w: i for i, w in enumerate(tokens)}
    assert stream_ids(sentences, index) == [2, 3, 2, 0, 1, 2, 3, 0]


def test_span_targets_are_aligned_with_the_stream():
    from lightning_modules.data.tree import parse_tree

    first = stream_sentence(parse_tree("(S (NP (DT The) (NN dog)) (VP (VBZ barks)) (. .))"))
    second = stream_sentence(parse_tree("(S (NP (PRP It)) (VP (VBD ran) (ADVP (RB very) (RB fast))))"))
    assert first.words == ("the", "dog", "barks") and first.spans == frozenset({(0, 1)})
    assert second.spans == frozenset({(1, 3), (2, 3)})
    targets = aligned_targets([first, second], 3)
    assert targets.shape == (4 + 5, 3)  # one row per stream token: the words and <eos>
    expected = np.zeros((9, 3), dtype=np.float32)
    expected[2, 1] = 1.0  # "barks" reads after "the dog"
    expected[4 + 4, 1] = expected[4 + 4, 2] = 0.5  # the second sentence's <eos>: "very fast", "ran very fast"
    np.testing.assert_array_equal(targets, expected)


def test_binarized_gold_spans_as_the_official_cnf():
    from lightning_modules.data.tree import parse_tree

    sentence = stream_sentence(parse_tree("(S (NP (DT a) (JJ big) (JJ red) (NN dog)) (VP (VBD slept)))"))
    # right-factored NP: (NP a (NP| big (NP| red dog))) adds [1, 3] and [2, 3]
    assert sentence.spans == frozenset({(0, 3), (1, 3), (2, 3)})
