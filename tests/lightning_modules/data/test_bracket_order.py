"""Walking a tree in bracket order and building it back (``tree.bracket_order``, ``tree.TreeBuilder``)."""

from __future__ import annotations

import pytest

from lightning_modules.data.tree import Tree, TreeBuilder, bracket_order, parse_tree


def _rebuild(tree: Tree) -> Tree:
    builder = TreeBuilder()
    for item, closing in bracket_order(tree):
        if isinstance(item, str):
            builder.add(item)
        elif closing:
            builder.close()
        else:
            builder.open(item.label)
    return builder.tree("incomplete")


def test_bracket_order_opens_and_closes_every_node_around_its_words():
    tree = parse_tree("(S (NP the dog) (VP barks))")
    events = [(item if isinstance(item, str) else item.label, closing) for item, closing in bracket_order(tree)]
    assert events == [("S", False), ("NP", False), ("the", False), ("dog", False), ("NP", True),
                      ("VP", False), ("barks", False), ("VP", True), ("S", True)]


def test_the_builder_gives_back_the_walked_tree_even_a_very_deep_one():
    tree = parse_tree("(S (NP (DT the) (NN dog)) (VP (VBZ barks)))")
    assert _rebuild(tree) == tree
    deep: Tree | str = "w"
    for _ in range(5000):  # deeper than Python's recursion limit
        deep = Tree("X", (deep,))
    rebuilt = _rebuild(deep)  # (== would recurse: compare iteratively)
    assert rebuilt.labels() == ["X"] * 5000 and rebuilt.leaves() == ["w"]


def test_an_unclosed_or_empty_sequence_is_an_error():
    builder = TreeBuilder()
    with pytest.raises(ValueError, match="incomplete"):
        builder.tree("incomplete")
    builder.open("S")
    builder.add("w")
    with pytest.raises(ValueError, match="incomplete"):
        builder.tree("incomplete")
