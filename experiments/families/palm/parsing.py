"""How a PaLM model's parses are scored by ``eval parse`` (EVALB): its ``ParseView``.

The model's parse is the greedy top-down tree of its span attention scores (§2.2), over the words it reads,
with punctuation put back under the smallest node covering its neighbours (``scorers.with_words``). Gold
trees are the cleaned treebank trees, unbinarized (the paper compares with the gold annotation), both scored
with EVALB's unlabeled parameters (COLLINS.prm with LABELED 0: punctuation and TOP deleted, the sentence span
counted) and the gold POS tags. The paper's own protocol — sentence-level F1 without trivial spans, WSJ-40 —
is the ``unsupervised-f1`` task; this view is the harness's common EVALB comparison.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from experiments.evaluate.proposal_files import with_tags
from experiments.families.adapter import ParseView
from lightning_modules.data.tree import Tree, parse_tree, to_bracketed
from lightning_modules.families.palm.encoding import UNLABELLED

CONVENTION = ("model parse = greedy top-down splits maximising the right part's span attention score (PaLM "
              "§2.2, Eq. 4), punctuation re-attached; EVALB unlabeled (COLLINS.prm with LABELED 0) against the "
              "cleaned gold trees, both with the gold POS tags")


def right_branching(words: Sequence[str]) -> Tree:
    """``(X w1 (X w2 (... wn)))``."""
    node: Tree | str = Tree(UNLABELLED, (words[-1],)) if len(words) == 1 else words[-1]
    for word in reversed(words[:-1]):
        node = Tree(UNLABELLED, (word, node))
    assert isinstance(node, Tree)
    return node


def unlabelled(tree: Tree) -> Tree:
    """The gold tree without POS tags and with every label ``X``."""
    return Tree(UNLABELLED, tuple(c.children[0] if isinstance(c, Tree) and c.is_preterminal
                                  else unlabelled(c) if isinstance(c, Tree) else c for c in tree.children))


def _tagged(tree: Tree, tags: Sequence[str]) -> str:
    return to_bracketed(with_tags(tree, tags))


def _parsed(score: Any, tags: Sequence[str]) -> str:
    return _tagged(parse_tree(score.best_tree), tags)


VIEW = ParseView(gold=lambda tree: _tagged(unlabelled(tree), [t for _, t in tree.pos()]), parsed=_parsed,
                 baseline=lambda words, tags: _tagged(right_branching(words), tags), baseline_name="right_branching",
                 evalb="unlabeled", convention=CONVENTION, gold_name="cleaned")
