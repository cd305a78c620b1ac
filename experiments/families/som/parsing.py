"""SOM's incremental parses and their unlabeled F1 (§4.3, Table 2; Appendix B.1, Table 8).

A parse is the tree the greedy decisions θ_t build (``encodings.som.shape_from_slots``), binary and
unlabelled over words. It is scored with EVALB's unlabeled setting (COLLINS.prm, LABELED 0): punctuation is
deleted by tag and the root is labelled ``TOP`` so that the sentence span is deleted too, which with
binary trees (no unary brackets) discards exactly the trivial spans, as Kim et al. (2019) and the paper's
Appendix B.1 describe. Tags: UD's UPOS ``PUNCT`` becomes ``.`` (deleted); other tags are kept as given.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from experiments.evaluate.evalb import UNLABELED, evaluate_lines
from experiments.families.parser.proposals import with_tags
from lightning_modules.data.encodings import som
from lightning_modules.data.tree import Tree, to_bracketed

CONVENTION = ("model parse = the tree of the greedy decisions argmax p_t (incremental, one-step look-ahead); "
              "EVALB unlabeled (COLLINS.prm with LABELED 0: punctuation deleted by tag) with the root "
              "labelled TOP (sentence span deleted), against Γ (UD tree converted as Fig. 4) or the given "
              "constituency tree")


def evalb_tags(tags: Sequence[str]) -> list[str]:
    """Tags as EVALB reads them: UD's ``PUNCT`` is punctuation (``.``)."""
    return ["." if t == "PUNCT" else t for t in tags]


def evalb_line(tree: som.Shape | Tree, words: Sequence[str], tags: Sequence[str]) -> str:
    """The EVALB line of a shape (or an unlabelled-or-labelled tree over ``words``) with its root as TOP."""
    node = som.shape_to_tree(tree, words) if not isinstance(tree, Tree) else tree
    return to_bracketed(with_tags(Tree("TOP", node.children), evalb_tags(tags)))


def unlabeled_f1(gold: Sequence[str], parsed: Sequence[str]) -> dict[str, Any]:
    """EVALB's summary (all sentences) of parsed vs gold lines, unlabeled parameters."""
    return evaluate_lines(gold, parsed, UNLABELED).as_dict()["all"]
