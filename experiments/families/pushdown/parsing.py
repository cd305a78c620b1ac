"""How a Pushdown-LM's parses are scored (Murty et al. 2023, §5 and Table 4): its ``ParseView``.

The model's parse of a sentence is the best tree of its final beam over attachment decisions (approximately
argmax_y p(x, y); beam 300 in the paper), binary and unlabelled, over words (subword pieces merged as in
Appendix C). The gold trees are binarized as the model's training trees are (``encodings.pushdown.pushdown_tree``:
unary chains collapsed, n-ary nodes right-factored) and unlabelled; both are scored with EVALB's unlabeled
setting (COLLINS.prm with LABELED 0, so punctuation is deleted and the sentence span counts), the parse
carrying the gold POS tags EVALB needs. The right-branching tree of each sentence is the baseline.

As in the paper, sentences with words the model cannot represent are left out: by default for SentencePiece
vocabularies (a piece outside the vocabulary, §5: "trained without any UNK tokens"); word-level vocabularies
model unknown words with their unknown-word classes, so their sentences are kept unless ``unknown=exclude``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from experiments.evaluate.parse import UNKNOWN
from experiments.evaluate.proposal_files import with_tags
from experiments.families.adapter import ParseView
from lightning_modules.data.tree import Tree, parse_tree, to_bracketed
from lightning_modules.errors import InputError
from lightning_modules.families.pushdown.encoding import (
    UNLABELLED,
    Node,
    attachments_to_tree,
    pushdown_tree,
    unlabelled,
)

CONVENTION = ("model parse = the highest log p(x, y) tree of the final beam over attachment decisions, subword "
              "pieces merged (Appendix C); EVALB unlabeled (COLLINS.prm with LABELED 0: punctuation and TOP "
              "deleted) against gold trees binarized as in training (unaries collapsed, right-factored), both "
              "with the gold POS tags")


def binarized_gold(tree: Tree) -> str:
    """The EVALB line of a (cleaned) gold tree as the model is trained on it: binarized, unlabelled, tagged."""
    return tagged(unlabelled(pushdown_tree(tree)), [t for _, t in tree.pos()])


def right_branching(words: Sequence[str]) -> Node:
    """``(w1 (w2 (... wn)))``: every word shifts and the end of the sentence closes the stack."""
    return attachments_to_tree([0, *range(1, len(words) + 1), 0], words)


def tagged(tree: Node, tags: Sequence[str]) -> str:
    """An unlabelled tree over words as an EVALB line, each word under its tag (a lone word under ``X``)."""
    return to_bracketed(with_tags(tree if isinstance(tree, Tree) else Tree(UNLABELLED, (tree,)), tags))


def excluded(model: Any, sentences: Sequence[Sequence[str]], unknown: str) -> list[bool]:
    """Per sentence: whether it is left out for unknown words (module docstring)."""
    if unknown not in UNKNOWN:
        raise InputError(f"expected one of {', '.join(UNKNOWN)}, not {unknown!r}", "--unknown")
    drop = unknown == "exclude" or (unknown == "default" and model.vocab_kind == "sentencepiece")
    return [drop and any(model.is_unknown(w) for w in words) for words in sentences]


def _parsed(score: Any, tags: Sequence[str]) -> str:
    """The scorer's best tree (a bracketed unlabelled tree, or a lone word) as an EVALB line."""
    best = score.best_tree
    return tagged(parse_tree(best) if best.startswith("(") else best, tags)


VIEW = ParseView(gold=binarized_gold, parsed=_parsed, baseline=lambda words, tags: tagged(right_branching(words), tags),
                 baseline_name="right_branching", evalb="unlabeled", convention=CONVENTION, gold_name="binarized",
                 excluded=excluded)
