"""Constituency → dependency conversion by head rules.

The head table is Collins (1999, PhD thesis, Appendix A, pp. 236–238) exactly as Stanford CoreNLP's
``edu.stanford.nlp.trees.CollinsHeadFinder`` implements it (with ``AbstractCollinsHeadFinder``'s search and
no categories to avoid): the same rules per label, including Stanford's additions (``NX``, ``X``, ``TYPO``,
``EDITED``, ``XS``, ``AUX``/``AUXG`` in ``VP``) and its coordination fix. For a constituent:

1. a single child is the head;
2. otherwise the rules of its label are tried in order; a rule is a direction and a category list:
   ``left`` / ``right`` scan the categories in priority order and, for each, the children from the left /
   right (category first); ``rightdis`` scans the children from the right and takes the first in the list
   (position first); when no rule matches, the last rule's direction gives the leftmost / rightmost child;
3. coordination fix, only after a match (not after the fallback): if the child just before the head is
   ``CC`` or ``CONJP`` and the head is at least the third child, the head moves two children left, unless
   that child is a punctuation preterminal (``'' `` -LRB- -RRB- . : ,``), in which case it stays (Stanford's
   loop never advances past that child, so the move is dropped).

Categories are compared on basic categories (``tree.strip_function_tags``, which cuts ``NP-SBJ=1`` to ``NP`` as
Stanford's ``basicCategory`` does for PTB labels). A label without a rule is an error, as in Stanford.
Every non-head child's head word depends on the head child's head word; the root's head word gets head 0.
The result is projective by construction. Relations are unlabelled: ``root`` for the root, ``dep`` elsewhere
(Stanford's fallback relation). XPOS holds the PTB tag; UPOS is ``PUNCT`` for the tags that PTB dependency
evaluation leaves out (`` '' . , :``, as Chen & Manning 2014 and DTG's reranking evaluation), so attachment
scores (``evaluate/uas.py``, which skips gold PUNCT) follow that convention, and ``_`` otherwise.
"""

from __future__ import annotations

from lightning_modules.data.dependency import DepTree
from lightning_modules.data.tree import Tree, bracket_order, clean, strip_function_tags
from lightning_modules.errors import InputError

Rule = tuple[str, tuple[str, ...]]  # (direction, categories)


def _r(direction: str, *categories: str) -> Rule:
    return direction, categories


HEAD_RULES: dict[str, tuple[Rule, ...]] = {
    "ADJP": (_r("left", "NNS", "QP", "NN", "$", "ADVP", "JJ", "VBN", "VBG", "ADJP", "JJR", "NP", "JJS", "DT",
                "FW", "RBR", "RBS", "SBAR", "RB"),),
    "ADVP": (_r("right", "RB", "RBR", "RBS", "FW", "ADVP", "TO", "CD", "JJR", "JJ", "IN", "NP", "JJS", "NN"),),
    "CONJP": (_r("right", "CC", "RB", "IN"),),
    "FRAG": (_r("right"),),
    "INTJ": (_r("left"),),
    "LST": (_r("right", "LS", ":"),),
    "NAC": (_r("left", "NN", "NNS", "NNP", "NNPS", "NP", "NAC", "EX", "$", "CD", "QP", "PRP", "VBG", "JJ", "JJS",
               "JJR", "ADJP", "FW"),),
    "NX": (_r("left"),),
    "PP": (_r("right", "IN", "TO", "VBG", "VBN", "RP", "FW"),),
    "PRN": (_r("left"),),
    "PRT": (_r("right", "RP"),),
    "QP": (_r("left", "$", "IN", "NNS", "NN", "JJ", "RB", "DT", "CD", "NCD", "QP", "JJR", "JJS"),),
    "RRC": (_r("right", "VP", "NP", "ADVP", "ADJP", "PP"),),
    "S": (_r("left", "TO", "IN", "VP", "S", "SBAR", "ADJP", "UCP", "NP"),),
    "SBAR": (_r("left", "WHNP", "WHPP", "WHADVP", "WHADJP", "IN", "DT", "S", "SQ", "SINV", "SBAR", "FRAG"),),
    "SBARQ": (_r("left", "SQ", "S", "SINV", "SBARQ", "FRAG"),),
    "SINV": (_r("left", "VBZ", "VBD", "VBP", "VB", "MD", "VP", "S", "SINV", "ADJP", "NP"),),
    "SQ": (_r("left", "VBZ", "VBD", "VBP", "VB", "MD", "VP", "SQ"),),
    "UCP": (_r("right"),),
    "VP": (_r("left", "TO", "VBD", "VBN", "MD", "VBZ", "VB", "VBG", "VBP", "AUX", "AUXG", "VP", "ADJP", "NN",
              "NNS", "NP"),),
    "WHADJP": (_r("left", "CC", "WRB", "JJ", "ADJP"),),
    "WHADVP": (_r("right", "CC", "WRB"),),
    "WHNP": (_r("left", "WDT", "WP", "WP$", "WHADJP", "WHPP", "WHNP"),),
    "WHPP": (_r("right", "IN", "TO", "FW"),),
    "X": (_r("right"),),
    "NP": (
        _r("rightdis", "NN", "NNP", "NNPS", "NNS", "NX", "POS", "JJR"),
        _r("left", "NP"),
        _r("rightdis", "$", "ADJP", "PRN"),
        _r("right", "CD"),
        _r("rightdis", "JJ", "JJS", "RB", "QP"),
    ),
    "TYPO": (_r("left"),),
    "EDITED": (_r("left"),),
    "XS": (_r("right", "IN"),),
}

PUNCTUATION_TAGS = frozenset({"''", "``", "-LRB-", "-RRB-", ".", ":", ","})  # Stanford's PTB punctuation tags
UNSCORED_TAGS = frozenset({"''", "``", ".", ":", ","})  # punctuation that PTB dependency evaluation skips


def head_child(node: Tree) -> int:
    """Index of the head child of ``node`` under the head table above (``InputError`` if its label has none)."""
    kids = node.children
    if len(kids) == 1:
        return 0
    labels = [strip_function_tags(k.label) if isinstance(k, Tree) else k for k in kids]
    rules = HEAD_RULES.get(strip_function_tags(node.label))
    if rules is None:
        raise InputError(f"no head rule for constituent label {node.label!r} (Collins 1999 head table)")
    for direction, categories in rules:
        found = _search(labels, direction, categories)
        if found >= 0:
            return _coordination_fix(found, kids, labels)
    return 0 if rules[-1][0].startswith("left") else len(kids) - 1


def _search(labels: list[str], direction: str, categories: tuple[str, ...]) -> int:
    order = range(len(labels)) if direction.startswith("left") else range(len(labels) - 1, -1, -1)
    if direction.endswith("dis"):  # position first
        return next((i for i in order if labels[i] in categories), -1)
    for category in categories:  # category first
        for i in order:
            if labels[i] == category:
                return i
    return -1


def _coordination_fix(head: int, kids: tuple[Tree | str, ...], labels: list[str]) -> int:
    if head >= 2 and labels[head - 1] in ("CC", "CONJP"):
        before = kids[head - 2]
        if not (isinstance(before, Tree) and before.is_preterminal and before.label in PUNCTUATION_TAGS):
            return head - 2
    return head


def to_dependency(tree: Tree) -> DepTree:
    """The dependency tree of a POS-tagged constituency tree (cleaned first with ``tree.clean``).

    Words are the overt terminals; XPOS holds their POS tags. ``InputError`` when a word has no POS tag or a
    constituent label has no head rule.
    """
    tree = clean(tree)
    words: list[str] = []
    tags: list[str] = []
    heads: list[int] = []
    frames: list[list[tuple[Tree, int]]] = [[]]  # per open node: (child, its head word, 0-based)
    for node, closing in bracket_order(tree):
        if isinstance(node, str):
            continue
        if not closing:
            frames.append([])
            continue
        kids = frames.pop()
        if node.is_preterminal:
            words.append(node.children[0])  # type: ignore[arg-type]
            tags.append(node.label)
            heads.append(-1)
            frames[-1].append((node, len(words) - 1))
            continue
        if len(kids) != len(node.children):
            raise InputError(f"constituent ({node.label} ...) has a word without a POS tag; head rules need "
                             "POS-tagged trees")
        h = kids[head_child(node)][1]
        for _, dependent in kids:
            if dependent != h:
                heads[dependent] = h
        frames[-1].append((node, h))
    ((_, root),) = frames[0]
    heads[root] = -1
    return DepTree(
        forms=tuple(words),
        heads=tuple(h + 1 for h in heads),  # 1-based; the root's -1 becomes 0
        deprels=tuple("root" if h < 0 else "dep" for h in heads),
        xpos=tuple(tags),
        upos=tuple("PUNCT" if t in UNSCORED_TAGS else "_" for t in tags),
    )
