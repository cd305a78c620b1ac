"""SOM's incremental parses and their unlabeled F1 (§4.3, Table 2; Appendix B.1, Table 8).

A parse is the tree the greedy decisions θ_t build (``encodings.som.shape_from_slots``), binary and
unlabelled over words. It is scored with EVALB's unlabeled setting (COLLINS.prm, LABELED 0): punctuation is
deleted by tag and the root is labelled ``TOP`` so that the sentence span is deleted too, which with
binary trees (no unary brackets) discards exactly the trivial spans, as Kim et al. (2019) and the paper's
Appendix B.1 describe. Tags are those ``eval`` reads (XPOS, else UPOS: PTB tags for EWT, whose punctuation
tags EVALB deletes); UD's UPOS ``PUNCT`` becomes ``.`` (deleted). ``eval parse CKPT --gold CORPUS/SPLIT``
reads UD corpora (``VIEW``): the parse of every sentence against its Γ, the right-branching tree beside.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from experiments.evaluate.evalb import UNLABELED, evaluate_lines
from experiments.evaluate.parse import UNKNOWN
from experiments.families.adapter import ParseView
from experiments.families.parser.proposals import with_tags
from lightning_modules.data.dependency import DepTree
from lightning_modules.data.encodings import som
from lightning_modules.data.tree import Tree, to_bracketed
from lightning_modules.errors import InputError

CONVENTION = ("model parse = the tree of the greedy decisions argmax p_t (incremental, one-step look-ahead); "
              "EVALB unlabeled (COLLINS.prm with LABELED 0: punctuation deleted by tag) with the root "
              "labelled TOP (sentence span deleted), against Γ (UD tree converted as Fig. 4) or the given "
              "constituency tree")


def evalb_tags(tags: Sequence[str]) -> list[str]:
    """Tags as EVALB reads them: UD's ``PUNCT`` is punctuation (``.``)."""
    return ["." if t == "PUNCT" else t for t in tags]


def bracket_safe(words: Sequence[str]) -> list[str]:
    """Words as a bracketed line can hold them: ``(``/``)`` as PTB's ``-LRB-``/``-RRB-``, spaces as ``_``."""
    return [w.replace("(", "-LRB-").replace(")", "-RRB-").replace(" ", "_") for w in words]


def evalb_line(tree: som.Shape | Tree, words: Sequence[str], tags: Sequence[str]) -> str:
    """The EVALB line of a shape (or an unlabelled-or-labelled tree over ``words``) with its root as TOP."""
    node = som.shape_to_tree(tree, bracket_safe(words)) if not isinstance(tree, Tree) else tree
    return to_bracketed(with_tags(Tree("TOP", node.children), evalb_tags(tags)))


def unlabeled_f1(gold: Sequence[str], parsed: Sequence[str]) -> dict[str, Any]:
    """EVALB's summary (all sentences) of parsed vs gold lines, unlabeled parameters."""
    return evaluate_lines(gold, parsed, UNLABELED).as_dict()["all"]


def corpus_tags(dep: DepTree) -> list[str]:
    """The tags ``eval`` reads for a UD sentence (``corpora.read_split``): XPOS, else UPOS."""
    return list(dep.xpos if any(x != "_" for x in dep.xpos) else dep.upos)


def gold_line(dep: DepTree) -> str:
    """Γ of a gold UD tree as an EVALB line (the same tags as the parse)."""
    return evalb_line(som.binary_shape(som.gamma(dep)), dep.forms, corpus_tags(dep))


def parsed_line(score: Any, tags: Sequence[str]) -> str:
    """The scorer's parse (the tree of its decisions θ) as an EVALB line."""
    return evalb_line(som.shape_from_slots(score.extra["decisions"]), score.words, tags)


def right_branching_line(words: Sequence[str], tags: Sequence[str]) -> str:
    shape: som.Shape = len(words) - 1
    for i in range(len(words) - 2, -1, -1):
        shape = (i, shape)
    return evalb_line(shape, words, tags)


def excluded(model: Any, sentences: Sequence[Sequence[str]], unknown: str) -> list[bool]:
    """Sentences left out for unknown words: none by default (unknown words have their classes)."""
    if unknown not in UNKNOWN:
        raise InputError(f"expected one of {', '.join(UNKNOWN)}, not {unknown!r}", "--unknown")
    return [unknown == "exclude" and any(model.is_unknown(w) for w in words) for words in sentences]


VIEW = ParseView(gold=gold_line, parsed=parsed_line, baseline=right_branching_line, baseline_name="right_branching",
                 evalb="unlabeled", convention=CONVENTION, gold_name="Γ (Fig. 4)", excluded=excluded,
                 gold_kind="dependency")
