"""RNNG actions: every PTB-sample tree round-trips (top-down and in-order), and the first 20 match the official
rnng-pytorch preprocessing (tests/golden/rnng, written by benchmarks/golden_rnng.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lightning_modules.data.tree import clean, drop_pos_tags, parse_tree
from lightning_modules.errors import InputError
from lightning_modules.families.rnng.encoding import (
    IN_ORDER,
    STRATEGIES,
    TOP_DOWN,
    ActionDict,
    WordDict,
    actions_tree,
    berkeley_class,
    encode,
    max_stack_size,
    nonterminals,
    tree_actions,
)

GOLDEN = Path(__file__).resolve().parents[3] / "golden" / "rnng" / "golden.json"


@pytest.fixture(scope="module")
def ptb_trees(prepared_data_dir):
    from lightning_modules.data.corpora import load_corpus

    corpus = load_corpus("ptb-sample", prepared_data_dir)
    return [clean(tree) for split in ("train", "valid", "test") for _, tree in corpus.sentences(split)]


@pytest.fixture(scope="module")
def golden():
    return json.loads(GOLDEN.read_text())


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_every_ptb_sample_tree_round_trips(ptb_trees, strategy):
    assert len(ptb_trees) > 3000
    for tree in ptb_trees:
        actions = tree_actions(tree, strategy)
        words, tags = zip(*tree.pos(), strict=True)
        assert actions_tree(actions, words, tags, strategy) == tree
        bare = drop_pos_tags(tree)
        assert tree_actions(bare, strategy, pos_tags=False) == actions  # POS tags make no difference
        assert actions_tree(actions, words, None, strategy) == bare


def test_actions_match_the_official_preprocessing(golden):
    assert len(golden["sentences"]) == 20
    trees = [parse_tree(s["tree"]) for s in golden["sentences"]]
    assert nonterminals(trees) == golden["nonterminals"]
    vocab = ActionDict(tuple(golden["nonterminals"]))
    for tree, s in zip(trees, golden["sentences"], strict=True):
        assert tree_actions(tree, TOP_DOWN) == s["top_down"]
        assert tree_actions(tree, IN_ORDER) == s["in_order"]
        assert max_stack_size(s["top_down"], TOP_DOWN) == s["top_down_max_stack_size"]
        assert max_stack_size(s["in_order"], IN_ORDER) == s["in_order_max_stack_size"]
        assert vocab.to_ids(s["top_down"]) == s["action_ids"]
        assert tree.leaves() == s["tokens"]


def test_word_ids_follow_the_official_vocabulary(golden):
    """The same words in the same order; the unknown classes as a set (the official order is a Python set's)."""
    trees = [parse_tree(s["tree"]) for s in golden["sentences"]]
    ours = WordDict.build([w for t in trees for w in t.leaves()], min_count=2)
    official = golden["i2w"]
    n_special = 1 + len(golden["specials"])
    assert set(ours.i2w[:n_special]) == set(official[:n_special])
    assert ours.i2w[n_special:] == tuple(official[n_special:])
    actions = ActionDict(tuple(golden["nonterminals"]))
    for tree, s in zip(trees, golden["sentences"], strict=True):
        example = encode(tree, ours, actions, pos_tags=True)
        assert [ours.i2w[i] for i in example.token_ids] == [official[i] for i in s["token_ids"]]
        assert example.stack_size == s["top_down_max_stack_size"]


def test_berkeley_classes():
    assert [berkeley_class(w) for w in ("nominally", "Running", "1987", "un-do", "abc", "x.y.zz", "Walked")] == [
        "<unkly>", "<cunking>", "<unkn>", "<ununk>", "<unk>", "<unk.>", "<cunked>"]
    vocab = WordDict.build(["the", "the", "cat"], min_count=2)
    assert vocab.token("the") == "the" and vocab.token("cat") == "<unk>" and vocab.token("Zebras") == "<unk>"
    assert vocab.is_unknown("cat") and not vocab.is_unknown("the")


def test_bad_actions_and_labels_are_input_errors():
    vocab = ActionDict(("NP", "S"))
    with pytest.raises(InputError, match="unknown action 'NT\\(VP\\)'") as e:
        vocab.to_ids(["NT(S)", "NT(VP)"], "tree 3")
    assert e.value.location == "tree 3"
    with pytest.raises(InputError, match="not one finished tree"):
        actions_tree(["NT(S)", "SHIFT"], ["a"], location="x")
    with pytest.raises(InputError, match="SHIFT past the last word"):
        actions_tree(["NT(S)", "SHIFT", "SHIFT", "REDUCE"], ["a"])
    with pytest.raises(InputError, match="FINISH"):
        actions_tree(["SHIFT", "NT(S)", "REDUCE"], ["a"], strategy=IN_ORDER)
    with pytest.raises(InputError, match="strategy"):
        tree_actions(parse_tree("(S a)"), "bottom_up")
    assert ActionDict.from_json(ActionDict(("NP",), IN_ORDER).to_json()).i2a == (
        "<pad>", "SHIFT", "REDUCE", "FINISH", "NT(NP)")
