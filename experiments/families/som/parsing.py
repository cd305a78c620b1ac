"""SOM's incremental parses and their unlabeled F1 (§4.3, Table 2; Appendix B.1, Table 8).

A parse is the tree the greedy decisions θ_t build (``encodings.som.shape_from_slots``), binary and
unlabelled over words. Parses and gold trees are scored as the paper describes (Appendix B.1, after Kim et al.
2019: EVALB, punctuation ignored, trivial spans discarded): each EVALB line drops its punctuation words, then
every bracket left over a single word or over the same span as its only child, and labels its root ``TOP`` (the
sentence span, deleted by EVALB). What remains is scored with EVALB's unlabeled setting. Punctuation is read
from the tags of ``lightning_modules.families.som.data.scoring_tags`` (the view's ``tags``): a constituency
tree's preterminals ``, : `` '' .`` (COLLINS.prm's deleted tags), a dependency tree's UPOS ``PUNCT`` — never
its XPOS, which is no PTB tag in every UD treebank (LinES: ``Period``, ``Comma``; ParTUT: ``FS``, ``FF``).
``eval parse CKPT --gold CORPUS/SPLIT`` reads UD corpora (``VIEW``): the parse of every sentence against its Γ,
the right-branching tree beside; or a constituency treebank: the parse against the original, n-ary tree
(Table 8; a binary parse cannot reach 100 there: the view's ``oracle``, the gold trees binarized as Γ is, is
scored beside as the ceiling, ``oracle_binary_f1``). The view also scores the decisions (Table 2's p and p'
accuracies, ``decision_hits``): with gold Γ, Algorithm 1 gives the labels ξ of the decisions the model took, and
p acc = mean [argmax p_t = ξ_t] over the words but the first (whose slot the mask forces), p' acc = mean
[argmax p'_t = ξ_{t+1}] over the words (``<eos>``'s label included), exactly as training's validation counts them
(``SOM.loss_terms``). ``eval parse --method gold`` (Table 2's "– Predicted tree + Gold tree": p acc 0.947, p'
acc 0.884, UF1 "–") takes the gold decisions: the accuracies are then those of the parsers' predictions under
the gold history, and the parse is Γ itself as the memory holds it (100 unless a tree is deeper than the slots).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from experiments.evaluate.evalb import UNLABELED, evaluate_lines
from experiments.evaluate.parse import UNKNOWN
from experiments.evaluate.proposal_files import with_tags
from experiments.families.adapter import ParseView
from lightning_modules.data.dependency import DepTree
from lightning_modules.data.tree import Tree, drop_pos_tags, to_bracketed
from lightning_modules.errors import InputError
from lightning_modules.families.som import encoding as som
from lightning_modules.families.som.data import scoring_tags

CONVENTION = ("model parse = the tree of the greedy decisions argmax p_t (incremental, one-step look-ahead); "
              "EVALB unlabeled after removing punctuation (PTB tags , : `` '' .; UPOS PUNCT for dependency trees, "
              "whatever their XPOS) and trivial spans "
              "(single words, the sentence), against Γ (UD tree converted as Fig. 4) or the given constituency "
              "tree")
PUNCTUATION = frozenset({",", ":", "``", "''", ".", "PUNCT"})


def bracket_safe(words: Sequence[str]) -> list[str]:
    """Words as a bracketed line can hold them: ``(``/``)`` as PTB's ``-LRB-``/``-RRB-``, spaces as ``_``."""
    return [w.replace("(", "-LRB-").replace(")", "-RRB-").replace(" ", "_") for w in words]


def evalb_line(tree: som.Shape | Tree, words: Sequence[str], tags: Sequence[str]) -> str:
    """The EVALB line of a shape (or a POS-free tree over ``words``): tagged, punctuation and trivial spans
    removed, root ``TOP`` (module docstring). A sentence of punctuation only keeps its words, flat."""
    node = som.shape_to_tree(tree, bracket_safe(words)) if not isinstance(tree, Tree) else tree
    tagged = with_tags(node, tags)
    pruned = _prune(tagged)
    if pruned is None:
        return to_bracketed(Tree("TOP", tuple(Tree(t, (w,)) for w, t in tagged.pos())))
    return to_bracketed(Tree("TOP", (pruned,) if pruned.is_preterminal else pruned.children))


def _prune(node: Tree) -> Tree | None:
    if node.is_preterminal:
        return None if node.label in PUNCTUATION else node
    kids = [k for k in (_prune(c) for c in node.children if isinstance(c, Tree)) if k is not None]
    if not kids:
        return None
    return kids[0] if len(kids) == 1 else Tree(node.label, tuple(kids))


def unlabeled_f1(gold: Sequence[str], parsed: Sequence[str]) -> dict[str, Any]:
    """EVALB's summary (all sentences) of parsed vs gold lines, unlabeled parameters."""
    return evaluate_lines(gold, parsed, UNLABELED).as_dict()["all"]


def gold_line(gold: DepTree | Tree) -> str:
    """The EVALB line of a gold tree (the same tags as the parse): Γ of a UD tree, or a (cleaned) constituency
    tree as it is, n-ary (Appendix B.1, Table 8: against the original PTB trees)."""
    if isinstance(gold, DepTree):
        return evalb_line(som.binary_shape(som.gamma(gold)), gold.forms, scoring_tags(gold))
    return evalb_line(drop_pos_tags(gold), gold.leaves(), scoring_tags(gold))


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


def gold_shape(gold: DepTree | Tree) -> som.Shape:
    """The binary tree a SOM parse is compared with: Γ of a UD tree, the left-binarized constituency tree."""
    return som.binary_shape(som.gamma(gold) if isinstance(gold, DepTree) else gold)


def oracle_line(gold: DepTree | Tree) -> str:
    """The EVALB line of the best binary parse of ``gold`` (Table 8's "Oracle Binary Trees": the tree binarized
    with Γ's left bias; for a UD tree Γ itself, which scores 100)."""
    return evalb_line(gold_shape(gold), gold.forms if isinstance(gold, DepTree) else gold.leaves(),
                      scoring_tags(gold))


def decision_hits(score: Any, gold: DepTree | Tree) -> dict[str, tuple[int, int]]:
    """(correct, scored) of p (argmax p_t vs ξ_t) and, with a prediction network, p' (argmax p'_t vs ξ_{t+1}) for
    one sentence (module docstring), over the tokens ``<s> w_1 … w_n <eos>`` as the model reads them. ξ comes
    from Algorithm 1 given the decisions taken (``extra["decisions"]``); the predictions are
    ``extra["predicted"]`` (the scorer's: under gold decisions, Table 2's last row, they differ from the
    decisions), else the decisions themselves (greedy: θ_t = argmax p_t, c_t = argmax p'_t)."""
    n_slots = int(score.extra["n_slots"])
    theta = [int(v) for v in score.extra["decisions"]]
    predicted = score.extra.get("predicted") or {"p": theta, "p_prime": score.extra.get("choices")}
    n = len(theta)
    first = som.first_siblings(som.sentence_shape(gold_shape(gold)))
    labels = som.structure_labels(first, np.array([n_slots, *theta, theta[-1]]), n_slots)
    p = predicted["p"]
    hits = {"p": (int(sum(p[t - 1] == min(labels[t], n_slots - 1) for t in range(2, n + 1))), n - 1)}
    if predicted.get("p_prime") is not None:
        choices = predicted["p_prime"]
        hits["p_prime"] = (int(sum(choices[t - 1] == labels[t + 1] for t in range(1, n + 1))), n)
    return hits


VIEW = ParseView(gold=gold_line, parsed=parsed_line, baseline=right_branching_line, baseline_name="right_branching",
                 evalb="unlabeled", convention=CONVENTION, gold_name="Γ (Fig. 4) of UD trees, or constituency trees",
                 excluded=excluded, gold_kind=None, oracle=oracle_line, decisions=decision_hits, tags=scoring_tags)


def oracle_binary_f1(trees: Sequence[Tree]) -> float:
    """Table 8's "Oracle Binary Trees": the F1 of the gold trees binarized (left bias, as Γ) against themselves,
    the ceiling of a binary parser against n-ary gold."""
    return unlabeled_f1([gold_line(t) for t in trees], [oracle_line(t) for t in trees])["bracket_f1"]
