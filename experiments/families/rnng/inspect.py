"""``synbench inspect rnng``: the RNNG's action sequences of a tree, as rnng-pytorch's preprocessing writes them.

Input: bracketed trees (``--tree`` or ``--trees-file``), cleaned as the corpora are (root unwrapped, ``-NONE-``
elements and function tags removed); preterminals are POS tags, which the RNNG does not generate (a
``SHIFT`` each). One JSON object per tree:

- ``words``: the words;
- ``tree``: the cleaned tree;
- ``nonterminals``: the labels of its constituents, sorted (the official action ids number them so);
- ``top_down`` and ``in_order``: ``actions`` (``NT(X)``, ``SHIFT``, ``REDUCE``; in-order ends with ``FINISH``)
  and ``stack_size``, the most elements the fixed stack holds at once (what the batch's stack must fit).
"""

from __future__ import annotations

from typing import Any

from lightning_modules.data.tree import Tree, clean, to_bracketed
from lightning_modules.errors import InputError
from lightning_modules.families.rnng.encoding import STRATEGIES, max_stack_size, nonterminals, tree_actions


def record(tree: Any) -> dict[str, Any]:
    """The JSON object of one tree (module docstring)."""
    if not isinstance(tree, Tree):
        raise InputError("rnng reads bracketed constituency trees")
    tree = clean(tree)
    out: dict[str, Any] = {"words": tree.leaves(), "tree": to_bracketed(tree), "nonterminals": nonterminals([tree])}
    for strategy in STRATEGIES:
        actions = tree_actions(tree, strategy)
        out[strategy] = {"actions": actions, "stack_size": max_stack_size(actions, strategy)}
    return out
