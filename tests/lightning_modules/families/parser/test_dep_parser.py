"""The dependency parser's canonical arc-standard actions: every projective single-root tree is exactly one
allowed sequence, the oracle's, and every allowed complete sequence decodes to a tree."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from lightning_modules.data.dependency import DepTree
from lightning_modules.families.parser import dep_encoding as enc


def all_sequences(n: int) -> list[list[int]]:
    """Every complete allowed action sequence over n words (depth-first through DepParseState)."""
    out, frontier = [], [[]]
    while frontier:
        prefix = frontier.pop()
        state = enc.DepParseState(np.array([n]))
        for a in prefix:
            state.advance(np.array([a]))
        if state.finished[0]:
            out.append(prefix)
            continue
        allowed = np.flatnonzero(state.allowed()[0])
        assert len(allowed), "a dead end"
        frontier.extend(prefix + [int(a)] for a in allowed)
    return out


def projective_single_root(n: int) -> set[tuple[int, ...]]:
    trees = set()
    for heads in itertools.product(range(n + 1), repeat=n):
        if sum(h == 0 for h in heads) != 1 or any(h == d for d, h in enumerate(heads, 1)):
            continue
        if all(reaches_root(heads, d) for d in range(1, n + 1)) and DepTree(tuple("w" * n), heads,
                                                                            ("_",) * n).is_projective():
            trees.add(heads)
    return trees


def reaches_root(heads: tuple[int, ...], d: int) -> bool:
    for _ in heads:
        d = heads[d - 1]
        if d == 0:
            return True
    return False


@pytest.mark.parametrize("n", [1, 2, 3, 4, 5])
def test_sequences_and_projective_trees_are_one_to_one(n: int) -> None:
    sequences = all_sequences(n)
    heads = [enc.actions_to_heads(s) for s in sequences]
    assert len(set(heads)) == len(heads)  # distinct sequences, distinct trees
    assert len(heads) == [1, 2, 7, 30, 143][n - 1]  # projective single-root trees: C(3n-2, n-1) / n
    if n <= 4:
        assert set(heads) == projective_single_root(n)
    for s, h in zip(sequences, heads):
        assert enc.tree_actions(h) == s  # the allowed sequence of a tree is the oracle's


def test_oracle_of_a_tree_and_its_masks() -> None:
    # the cat sat .  (the <- cat <- sat -> .)
    actions = enc.tree_actions((2, 3, 0, 3))
    S, L, R, ROOT = enc.SHIFT, enc.LEFT, enc.RIGHT, enc.ROOT
    assert actions == [S, S, L, S, L, S, R, ROOT]
    front, mask = enc.gold_masks(actions, 4)
    assert front.tolist() == [0, 1, 2, 2, 3, 3, 4, 4]
    assert mask[0].tolist() == [False, False, True, False, False, False]  # only SHIFT first
    # after "sat ." was attached by RIGHT, LEFT would give sat a left dependent after a right one: forbidden
    assert not mask[7, L] and mask[7, ROOT]
    assert mask[np.arange(len(actions)), actions].all()


def test_forbidden_action_is_an_error() -> None:
    state = enc.DepParseState(np.array([2]))
    with pytest.raises(ValueError):
        state.advance(np.array([enc.LEFT]))
    with pytest.raises(ValueError):
        enc.tree_actions((2, 0, 1, 3)[:3] + (0,))  # two roots: not a tree the system builds
