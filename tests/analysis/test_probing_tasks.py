"""The four probing tasks on hand-made trees and on the PTB sample."""

from __future__ import annotations

import numpy as np
import pytest

from analysis.probing_tasks import OTHER, TaskSettings, build_tasks, tree_nodes, word_content_targets
from lightning_modules.data.tree import parse_tree, read_bracketed
from lightning_modules.errors import InputError

CAT = "(S (NP-SBJ (DT the) (NN cat)) (VP (VBD sat) (PP (IN on) (NP (DT the) (NN mat)))) (. .))"
DOG = "(S (NP (DT the) (NN dog)) (VP (VBD sat)) (. .))"
SMALL = TaskSettings(top_k=2, word_content_k=2, word_content_start=0)


def test_tree_nodes_post_order_spans_and_parents():
    nodes = tree_nodes(parse_tree(f"( {CAT} )"))  # the PTB wrapper and function tags are cleaned away
    assert nodes.words == ("the", "cat", "sat", "on", "the", "mat", ".")
    assert nodes.tags == ("DT", "NN", "VBD", "IN", "DT", "NN", ".")
    summary = [(c.label, c.start, c.end, " ".join(c.children), c.parent) for c in nodes.constituents]
    assert summary == [("NP", 0, 2, "DT NN", 4), ("NP", 4, 6, "DT NN", 2), ("PP", 3, 6, "IN NP", 3),
                       ("VP", 2, 6, "VBD PP", 4), ("S", 0, 7, "NP VP .", -1)]
    assert tree_nodes(parse_tree("(NN hello)")).constituents == ()


def labels(data):
    return [data.classes[i] for i in data.labels]


def test_the_four_tasks_on_a_hand_made_tree():
    tasks = build_tasks([parse_tree(CAT), parse_tree(DOG)], [parse_tree(CAT)], settings=SMALL)
    pos, pos_dev = tasks["pos"]
    assert pos.kind == "word" and labels(pos)[:7] == ["DT", "NN", "VBD", "IN", "DT", "NN", "."]
    assert pos.sentence.tolist() == [0] * 7 + [1] * 4 and pos.node.tolist() == list(range(7)) + list(range(4))
    assert pos.classes == (".", "DT", "IN", "NN", "VBD") and len(pos_dev) == 7
    grand, _ = tasks["grandparent"]  # (the mat) -> VP, (on the mat) -> S; the others have no grandparent
    assert grand.node.tolist() == [1, 2] and labels(grand) == ["VP", "S"] and grand.classes == ("S", "VP")
    top, _ = tasks["top_constituents"]  # "DT NN" x3, "NP VP ." x2, the others once
    assert top.classes == ("DT NN", "NP VP .", OTHER)
    assert labels(top) == ["DT NN", "DT NN", OTHER, OTHER, "NP VP .", "DT NN", OTHER, "NP VP ."]
    content, _ = tasks["word_content"]  # ranks 0, 1: "the" (3) and "." (2; "sat" (2) loses the tie)
    assert content.classes == ("the", ".")
    # exactly one distinct target word: (the cat), (the mat), (on the mat), (sat on the mat), (the dog)
    nodes = list(zip(content.sentence.tolist(), content.node.tolist()))
    assert nodes == [(0, 0), (0, 1), (0, 2), (0, 3), (1, 0)]
    assert labels(content) == ["the"] * 5


def test_dev_labels_unknown_to_training_are_other_or_dropped():
    dev = parse_tree("(S (NP (PRP it)) (VP (VBZ rains) (ADVP (RB today))))")
    tasks = build_tasks([parse_tree(CAT)], [dev], settings=SMALL)
    pos_dev = tasks["pos"][1]
    assert len(pos_dev) == 0 and pos_dev.dropped == 3  # PRP, VBZ, RB never seen in training
    grand_dev = tasks["grandparent"][1]
    assert labels(grand_dev) == ["S"] and grand_dev.dropped == 0  # ADVP's grandparent
    top_dev = tasks["top_constituents"][1]
    assert labels(top_dev) == [OTHER] * 4 and top_dev.dropped == 0


def test_word_content_targets_rank_window():
    nodes = [tree_nodes(parse_tree(t)) for t in (CAT, DOG, CAT)]
    # counts: the 6, . 3, sat 3, cat 2, mat 2, on 2, dog 1
    window = TaskSettings(word_content_k=3, word_content_start=1)
    assert word_content_targets(nodes, window) == (".", "sat", "cat")
    with pytest.raises(InputError, match="7 distinct words"):
        word_content_targets(nodes, TaskSettings(word_content_k=3, word_content_start=5))


def test_bad_input():
    with pytest.raises(InputError, match="no POS tag"):
        build_tasks([parse_tree("(S (NP the cat) (VP (VBD sat)))")], [parse_tree(CAT)], settings=SMALL)
    with pytest.raises(InputError, match="unknown probing task"):
        build_tasks([parse_tree(CAT)], [parse_tree(CAT)], tasks=["depth"])
    with pytest.raises(InputError, match="no grandparent targets"):
        build_tasks([parse_tree(DOG)], [parse_tree(DOG)], tasks=["grandparent"])
    with pytest.raises(InputError, match="top_k"):
        build_tasks([parse_tree(CAT)], [parse_tree(CAT)], settings=TaskSettings(top_k=0))


def test_ptb_sample_counts(shared_data):
    folder = shared_data / "ptb_nltk_sample" / "combined"
    train = [t for i in range(1, 21) for _, t in read_bracketed(folder / f"wsj_{i:04d}.mrg")]
    dev = [t for i in range(160, 165) for _, t in read_bracketed(folder / f"wsj_{i:04d}.mrg")]
    settings = TaskSettings(top_k=19, word_content_k=50, word_content_start=50)
    tasks = build_tasks(train, dev, settings=settings)
    nodes = [tree_nodes(t) for t in train]
    pos, _ = tasks["pos"]
    assert len(pos) == sum(len(n.words) for n in nodes)  # overt words only (-NONE- removed)
    assert {"NN", "NNP", "VBD", "DT", ","} <= set(pos.classes)
    top, top_dev = tasks["top_constituents"]
    assert top.n_classes == 20 and top.classes[-1] == OTHER
    assert len(top) == sum(len(n.constituents) for n in nodes) and 0 < (top_dev.labels == 19).mean() < 1
    grand, _ = tasks["grandparent"]
    assert len(grand) < len(top) and "S" in grand.classes and "VP" in grand.classes
    content, content_dev = tasks["word_content"]
    assert content.n_classes == 50 and len(content) > 0 and len(content_dev) > 0
    assert all(np.bincount(d.sentence).sum() == len(d) for d in (pos, top, grand, content))
