"""The tree restructurings CoreNLP applies before finding heads (``CoordinationTransformer``,
``QPTreeTransformer``), rewritten for the cases that change heads. Each rule applies once where it first
matches (pre-order) and says whether it did; ``restructure`` applies each until it no longer matches, in
CoreNLP's order, as ``Tsurgeon.processPattern`` does:

* UD only, multiword expressions (``MWETransform``): *such as*, *because of*, *more than*, *as well as*,
  *at least*, *according to*, ... grouped as ``MWE`` constituents (first word heads, the others ``fixed``);
  *not only* and *but also* split up (``not_only``);
* ``ucp_transform``: a UCP whose first conjunct is adjectival, nominal or adverbial is relabelled ADJP,
  NP or ADVP;
* ``cc_transform``: a flat NP coordination (*cotton and acetate fibers*) is grouped into its conjuncts;
* QP (``QPTreeTransformer``): two QPs joined by a conjunction flattened into one; SD only, *up to*
  (``XSL``) and a leading *about/more than*-like pair (``XS``) grouped; ``(QP $ CD CD)`` split so the
  number heads its digits;
* ``remove_x_over_x``: a node whose only child is a phrase with the same label is spliced out;
* ``move_rb``: an adverb right after a conjunction moves into the following conjunct.

Not implemented (rare in the PTB sample, see the parity report): CoreNLP's gapping, prepCC, SQ flattening,
date, CONJP combination, SBAR-to-PP, *now that* and *will be* transforms, and the split of a
QP coordination into QPs/NPs (``splitCCTregex``).
"""

from __future__ import annotations

import re
from collections.abc import Callable

from lightning_modules.data.dependency_schemes.reading import Node

Rule = Callable[[Node], bool]


def _phrases(root: Node) -> list[Node]:
    """Phrasal nodes in pre-order (tregex's search order)."""
    out: list[Node] = []
    stack = [root]
    while stack:
        node = stack.pop()
        if node.children and not node.is_preterminal:
            out.append(node)
            stack.extend(reversed(node.children))
    return out


def _group(node: Node, label: str, first: int, last: int) -> None:
    """Tsurgeon ``createSubtree``: children first..last become one new child labelled ``label``."""
    node.children[first:last + 1] = [Node(label, node.children[first:last + 1])]


def flatten_np_over_qp(root: Node) -> bool:
    for np in _phrases(root):
        if np.label != "NP":
            continue
        kids = np.children
        for i in range(len(kids) - 1):
            if kids[i].label == "QP" and kids[i + 1].label == "QP" and any(
                    k.label == "CC" for k in kids[i + 1].children):
                kids[i:i + 2] = [Node("QP", kids[i].children + kids[i + 1].children)]
                return True
    return False


def multiword_xsl(root: Node) -> bool:
    for qp in _phrases(root):
        if qp.label != "QP":
            continue
        kids = qp.children
        for i in range(len(kids) - 1):
            if (kids[i].label in ("RB", "IN", "RP") and kids[i].text().lower() == "up"
                    and kids[i + 1].label in ("IN", "TO") and kids[i + 1].text().lower() == "to"):
                _group(qp, "XSL", i, i + 1)
                return True
    return False


def _rb_jj_in(label: str) -> bool:
    return label.startswith("RB") or "JJ" in label or "IN" in label  # tregex /^RB|JJ|IN/


def _jj_in(label: str) -> bool:
    return label.startswith("JJ") or "IN" in label  # /^JJ|IN/


def _cd_dt(label: str) -> bool:
    return label.startswith("CD") or "DT" in label  # /^CD|DT/


def multiword_xs(root: Node) -> bool:
    for qp in _phrases(root):
        kids = qp.children
        if qp.label != "QP" or len(kids) < 3 or not _rb_jj_in(kids[0].label) or not _jj_in(kids[1].label):
            continue
        if _cd_dt(kids[2].label):
            _group(qp, "XS", 0, 1)
            return True
        if (len(kids) >= 4 and kids[2].label == "IN" and kids[2].text().lower() in ("as", "than")
                and _cd_dt(kids[3].label)):
            _group(qp, "XS", 0, 2)
            return True
    return False


def split_money(root: Node) -> bool:
    for qp in _phrases(root):
        if qp.label != "QP":
            continue
        kids = qp.children
        for i, k in enumerate(kids[:-1]):
            after = kids[i + 1:]
            if (k.label == "$" and all(a.label.startswith(("$", "CD")) for a in after)
                    and not any(a.is_phrasal for a in after)):
                _group(qp, "QP", i + 1, len(kids) - 1)
                return True
    return False


def restructure(root: Node, universal: bool) -> Node:
    """The tree after the implemented CoreNLP restructurings (in place; returned for chaining)."""
    rules: list[Rule] = [mwe_sequences, mwe_positional, according_to, not_only] if universal else []
    rules += [ucp_transform, cc_transform, flatten_np_over_qp]
    if not universal:
        rules += [multiword_xsl, multiword_xs]
    rules += [split_money, remove_x_over_x, move_rb]
    for rule in rules:
        while rule(root):
            pass
    return root


# -- CoordinationTransformer ------------------------------------------------------------------------
def _ucp_relabel(ucp: Node) -> str | None:
    """``UCPtransform``: the label a UCP takes from its first conjunct (ADJP, NP or ADVP), if any."""
    kids = ucp.children
    first = kids[0].label
    second = kids[1].label if len(kids) > 1 else ""
    rest = ucp.label[3:]
    if first.startswith("JJ") or "ADJP" in first or (first == "DT" and (second.startswith("JJ") or "ADJP" in second)):
        return "ADJP" + rest
    last = kids[-1]
    if last.label == "ADJP" and any(k.label == "JJR" and k.text().lower() in ("younger", "older")
                                    for k in last.children):
        return "ADJP" + rest
    if first.startswith("N") or (first == "DT" and second.startswith("N")):
        return "NP" + rest
    if first.startswith("ADVP"):
        return "ADVP"
    return None


def ucp_transform(root: Node) -> bool:
    for node in _phrases(root):
        if node.label.startswith("UCP"):
            label = _ucp_relabel(node)
            if label is not None:
                node.label = label
                return True
    return False


def _head_tag(t: Node) -> str:
    return "ADJP" if t.label.startswith("JJ") else "NP"


def _find_cc_parent(t: Node) -> tuple[Node, int] | None:
    """``findCCparent``: the first NP (pre-order) with a CC child that ``transformCC`` restructures."""
    for i, kid in enumerate(t.children):
        if kid.is_preterminal:
            if not kid.label.startswith("CC") or not t.label.startswith("NP"):
                continue
            kids = t.children
            if (len(kids) > i + 2 and not any(k.label.startswith("NP") for k in kids[i:]) and i != 0
                    and (i == len(kids) - 1 or not kids[i + 1].label.startswith("CC"))):
                return t, i
        elif not kid.is_leaf:
            found = _find_cc_parent(kid)
            if found is not None:
                return found
    return None


def _transform_cc(t: Node, cc_index: int) -> None:
    """``transformCC``: group the conjuncts of a flat NP coordination (*soya and maize oil*) into phrases."""
    sib = list(t.children)
    cc_positions = [i for i in range(cc_index + 1, len(sib) - 1) if sib[i].label.startswith("CC")]
    before = sib[cc_index - 1].label
    if (cc_index == 1 and (before in ("DT", "JJ", "RB") or sib[cc_index + 1].label != "DT")
            and not (before.startswith("NP") or before in ("ADJP", "NNS"))):
        left = Node(_head_tag(sib[0]), sib[:cc_index + 2])
        rest = sib[cc_index + 2:]
        if cc_positions:
            index = cc_positions[0]
            comma = sib[index - 1].label == ","
            if comma:
                index -= 1
            if cc_index + 2 < index:
                tree = Node(_head_tag(sib[index - 1]), [left, *sib[cc_index + 2:index]])
                rest = sib[index:]
            else:
                tree = left
            kids = [tree, *rest]
            start = 3 if comma else 2
            t.children = [*kids[:start], Node("NP", kids[start:])]
        else:
            t.children = [left, *rest]
    elif (cc_index == 2 and sib[0].label.startswith("DT") and sib[cc_index - 1].label != "NNS"
          and (len(sib) == 5 or (cc_positions and cc_positions[0] == 5))):
        child = Node(_head_tag(sib[1]), sib[1:cc_index + 2])
        t.children = [sib[0], child, *sib[cc_index + 2:]]
    elif cc_index > 2 and sib[cc_index - 2].label == "," and sib[cc_index - 1].label != "NNS":
        members = sib[cc_index - 3:cc_index + 2]
        i = cc_index - 4
        while i > 0 and sib[i].label == ",":
            members = [sib[i - 1], sib[i], *members]
            i -= 2
        i = max(i, -1)
        child = Node(_head_tag(sib[cc_index - 1]), members)
        t.children = [*sib[:i + 1], child, *sib[cc_index + 2:]]
    else:
        _split_conjuncts(t, sib, cc_index, cc_positions)


def _split_conjuncts(t: Node, sib: list[Node], cc_index: int, cc_positions: list[int]) -> None:
    """``transformCC``'s general case: left conjunct, CC, right conjunct (up to the next CC), with a
    preconjunct (*both*, *either*, *neither*) split off as a CC."""
    first = sib[0]
    lead = first.children[0]
    lead_text = lead.word if lead.is_leaf else lead.label
    preconj = lead_text.lower() in ("either", "neither", "both")  # type: ignore[union-attr]
    begin = 1 if preconj else 0
    left = Node(_head_tag(sib[cc_index - 1]), sib[begin:cc_index - 1])
    comma_left = sib[cc_index - 1].label == ","
    if not comma_left:
        left.children.append(sib[cc_index - 1])
    next_cc = cc_positions[0] if cc_positions else len(sib)
    right = Node(_head_tag(sib[next_cc - 1]), sib[cc_index + 1:next_cc - 1])
    comma_right = sib[next_cc - 1].label == ","
    if not comma_right:
        right.children.append(sib[next_cc - 1])
    group: list[Node] = []
    if preconj:
        group.append(Node("CC", [lead]))
    if left.children:
        group.append(left)
    if comma_left:
        group.append(sib[cc_index - 1])
    group.append(sib[cc_index])
    if right.children:
        group.append(right)
    remaining = sib[next_cc:]
    if cc_positions:
        t.children = [Node("NP", group), *([sib[next_cc - 1]] if comma_right else []), *remaining]
    else:
        t.children = [*remaining, *group, *([sib[next_cc - 1]] if comma_right else [])]


def cc_transform(root: Node) -> bool:
    found = _find_cc_parent(root)
    if found is None:
        return False
    _transform_cc(*found)
    return True


def remove_x_over_x(root: Node) -> bool:
    """``removeXOverX``: a node whose only child is a phrase with the same label is spliced out."""
    for parent in _phrases(root):
        for i, kid in enumerate(parent.children):
            if (len(kid.children) == 1 and not kid.children[0].is_leaf
                    and kid.children[0].label == kid.label):
                parent.children[i:i + 1] = kid.children
                return True
    return False


# -- multiword expressions (UD only: CoordinationTransformer.MWETransform) ---------------------------------
# (parent categories, then per word: its allowed tags and its word pattern); consecutive sisters become one
# MWE constituent (headed by its first word; the others are ``fixed``)
_MWE_SEQUENCES: tuple[tuple[tuple[str, ...], tuple[tuple[tuple[str, ...], str], ...]], ...] = (
    (("PP",), ((("JJ",), "such"), (("IN",), "as"))),
    (("PP",), ((("JJ", "IN"), "due"), (("IN", "TO"), "to"))),
    (("PP", "CONJP"), ((("IN", "RB"), "because|instead"), (("IN",), "of"))),
    (("ADVP", "SBAR"), ((("IN", "RB"), "in"), (("NN",), "case"))),
    (("ADVP", "PP"), ((("IN", "RB"), "of"), (("NN", "RB"), "course"))),
    (("PP", "CONJP", "SBAR"), ((("IN", "RB"), "rather"), (("IN",), "than"))),
    (("CONJP",), ((("IN", "RB"), "not"), (("TO",), "to"), (("VB", "RB"), "mention"))),
    (("PP", "SBAR"), ((("JJ", "IN", "RB"), "so"), (("IN", "TO"), "that"))),
    (("SBAR",), ((("IN", "RB"), "as"), (("IN",), "if"))),
    (("PP",), ((("JJ", "RB"), "prior"), (("TO", "IN"), "to"))),
    (("PP",), ((("IN",), "as"), (("TO", "IN"), "to"))),
    (("ADVP",), ((("RB", "NN"), "kind|sort"), (("IN", "RB"), "of"))),
    (("SBAR",), ((("IN", "RB"), "whether"), (("CC",), "or"), (("RB",), "not"))),
    (("CONJP",), ((("IN",), "as"), (("VBN",), "opposed"), (("TO", "IN"), "to"))),
    (("ADVP", "CONJP"), ((("VB", "RB", "VBD"), "let"), (("RB", "JJ"), "alone"))),
    (("ADVP", "QP", "ADJP"), ((("DT", "RB"), "all"), (("CC", "RB", "IN"), "but"))),
    (("ADVP", "INTJ"), ((("NN", "DT", "RB"), "that"), (("VBZ", "RB"), "is"))),
    (("WHADVP",), ((("WRB",), "how"), (("VB",), "come"))),
    (("QP", "XS"), ((("JJR", "RBR", "IN"), "more|less"), (("IN",), "than"))),
    (("QP", "XS"), ((("JJR", "RBR", "RB", "RP", "IN"), "up"), (("IN", "TO"), "to"))),
)


def _word_matches(t: Node, tags: tuple[str, ...], words: str) -> bool:
    return t.is_preterminal and t.label in tags and re.fullmatch(words, t.text(), re.IGNORECASE) is not None


_MWE_FIRST_WORDS = frozenset(w for _, words in _MWE_SEQUENCES for w in words[0][1].split("|"))


def mwe_sequences(root: Node) -> bool:
    """The listed multiword prepositions, conjunctions and quantifiers (*such as*, *because of*, *more
    than*, ...) grouped as ``MWE`` constituents."""
    for node in _phrases(root):
        kids = node.children
        if not any(k.is_preterminal and k.text().lower() in _MWE_FIRST_WORDS for k in kids):
            continue
        for parents, words in _MWE_SEQUENCES:
            if node.category not in parents:
                continue
            for i in range(len(kids) - len(words) + 1):
                if all(_word_matches(kids[i + j], tags, w) for j, (tags, w) in enumerate(words)):
                    _group(node, "MWE", i, i + len(words) - 1)
                    return True
    return False


def mwe_positional(root: Node) -> bool:
    """*as well as* (CONJP) and *as well* (ADVP, CONJP) spanning their whole phrase; *at least* inside an
    ADVP; *in between*; *had better*."""
    for node in _phrases(root):
        kids = node.children
        cat = node.category
        if len(kids) >= 3 and cat == "CONJP" and _word_matches(kids[0], ("RB",), "as") and _word_matches(
                kids[1], ("RB",), "well") and _word_matches(kids[-1], ("IN",), "as"):
            node.children = [Node("MWE", [kids[0], kids[1], kids[-1]]), *kids[2:-1]]
            return True
        if (len(kids) >= 2 and cat in ("ADVP", "CONJP") and _word_matches(kids[0], ("RB",), "as")
                and _word_matches(kids[-1], ("IN", "RB"), "well")):
            node.children = [Node("MWE", [kids[0], kids[-1]]), *kids[1:-1]]
            return True
        if cat == "ADVP" and len(kids) >= 2 and _word_matches(kids[0], ("IN", "RB"), "at") and _word_matches(
                kids[1], ("JJS", "RBS"), "least") and not (len(kids) > 2 and kids[2].label == "RB"):
            _group(node, "MWE", 0, 1)
            return True
        for i in range(len(kids) - 1):
            nxt = kids[i + 1]
            if cat in ("ADVP", "PP") and _word_matches(kids[i], ("IN", "RB"), "in") and (
                    _word_matches(nxt, ("IN", "NP", "PP", "RB", "ADVP"), "between") or (
                    nxt.label in ("IN", "NP", "PP", "RB", "ADVP") and len(nxt.children) == 1
                    and _word_matches(nxt.children[0], ("IN", "RB"), "between"))):
                _group(node, "MWE", i, i + 1)
                return True
    return False


def according_to(root: Node) -> bool:
    """``(PP (VBG according) (PP (TO to) NP))`` -> ``(PP (MWE according to) NP)``."""
    for pp in _phrases(root):
        kids = pp.children
        if pp.label != "PP":
            continue
        for i in range(len(kids) - 1):
            inner = kids[i + 1]
            if (_word_matches(kids[i], ("VBG",), "according") and inner.label == "PP"
                    and any(_word_matches(k, ("TO", "IN"), "to") for k in inner.children)):
                to = next(k for k in inner.children if _word_matches(k, ("TO", "IN"), "to"))
                rest = [k for k in inner.children if k is not to]
                pp.children = [*kids[:i], Node("MWE", [kids[i], to]), *rest, *kids[i + 2:]]
                return True
    return False


def _is_phrasal_node(t: Node) -> bool:
    return any(not k.is_leaf and k.children for k in t.children)


def not_only(root: Node) -> bool:
    """*not only* / *but also* are no multiword conjunctions: ``(CONJP not only)`` (or ADVP) becomes two
    ADVPs moved to the front of the next phrase (kept in place without one); ``(CONJP but also)`` leaves
    *but* as a sister and moves *also* likewise."""
    for node in _phrases(root):
        kids = node.children
        for i, conjp in enumerate(kids):
            if conjp.label not in ("CONJP", "ADVP") or conjp.is_preterminal:
                continue
            sub = conjp.children
            neg = next((k for k in sub if _word_matches(k, ("RB",), "not")), None)
            only = next((k for k in sub if _word_matches(k, ("RB", "JJ"), "only|just|merely|even")), None)
            but = next((k for k in sub if _word_matches(k, ("CC",), "but")), None)
            also = next((k for k in sub if _word_matches(k, ("RB",), "also")), None)
            if neg is not None and only is not None:
                moved, kept = [Node("ADVP", [neg]), Node("ADVP", [only])], []
            elif conjp.label == "CONJP" and but is not None and also is not None:
                moved, kept = [Node("ADVP", [also])], [but]
            else:
                continue
            nxt = kids[i + 1] if i + 1 < len(kids) and _is_phrasal_node(kids[i + 1]) else None
            if nxt is not None:
                nxt.children[0:0] = moved
                node.children[i:i + 1] = kept
            else:
                node.children[i:i + 1] = kept + moved
            return True
    return False


_CONJUNCT = re.compile(r"S(?!YM)|PP|VP|NP")


def move_rb(root: Node) -> bool:
    """``moveRB``: an adverb between a conjunction (or comma) and the next conjunct (*and particularly
    X*, *but not Y*) moves into that conjunct as its first child."""
    for node in _phrases(root):
        if not re.match(r"^S|PP|VP|NP", node.label):
            continue
        kids = node.children
        if not any(re.match(r"S|PP|VP|NP", k.label) for k in kids[:-2]):
            continue
        first = next(i for i, k in enumerate(kids) if re.match(r"S|PP|VP|NP", k.label))
        for j in range(first + 1, len(kids) - 2):
            adv, dest = kids[j + 1], kids[j + 2]
            if kids[j].label not in (",", "CC", "CONJP") or not _CONJUNCT.match(dest.label):
                continue
            if (adv.label == "RB" and adv.is_preterminal and adv.text() in ("not", "then")) or (
                    adv.label == "ADVP" and len(adv.children) == 1 and adv.children[0].label == "RB"):
                del kids[j + 1]
                dest.children.insert(0, adv)
                return True
    return False
