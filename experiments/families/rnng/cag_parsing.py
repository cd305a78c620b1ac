"""How a CAG's parses are scored by ``eval parse`` (EVALB): its ``ParseView``.

The model's parse is the best finished parse of the word-synchronous beam (the family's default method; the
official ``beam_search.py`` prints it as the sentence's tree), labelled and POS-free; EVALB's COLLINS.prm
(labelled brackets, punctuation and TOP deleted) compares it, with the gold POS tags put back, with the
cleaned gold tree. The baseline beside it is the right-branching tree with every constituent labelled ``S``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from experiments.evaluate.proposal_files import with_tags
from experiments.families.adapter import ParseView
from lightning_modules.data.tree import Tree, parse_tree, to_bracketed

CONVENTION = ("model parse = the best finished parse of the word-synchronous beam (osekilab/CAG beam_search.py); "
              "EVALB COLLINS.prm (labelled) against the cleaned gold trees, both with the gold POS tags")


def right_branching(words: Sequence[str], label: str = "S") -> Tree:
    """``(S w1 (S w2 (... wn)))``."""
    node: Tree | str = Tree(label, (words[-1],)) if len(words) == 1 else words[-1]
    for word in reversed(words[:-1]):
        node = Tree(label, (word, node))
    assert isinstance(node, Tree)
    return node


def _parsed(score: Any, tags: Sequence[str]) -> str:
    return to_bracketed(with_tags(parse_tree(score.best_tree), tags))


VIEW = ParseView(gold=to_bracketed, parsed=_parsed,
                 baseline=lambda words, tags: to_bracketed(with_tags(right_branching(words), tags)),
                 baseline_name="right_branching", evalb="collins", convention=CONVENTION, gold_name="cleaned")
