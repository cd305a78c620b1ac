"""CoreNLP's semantic head finders, rewritten: ``SemanticHeadFinder`` (Stanford basic dependencies) and
``UniversalSemanticHeadFinder`` (Universal Dependencies), both with ``noCopulaHead`` (the converters' setting).

Both refine ``ModCollinsHeadFinder`` (Collins' table, modified): auxiliaries, modals, infinitival *to* and
copulas are not heads (the VP or predicate is), a coordination is headed by its first conjunct
(``postOperationFix``), and the universal finder makes a PP's object its head (prepositions are ``case``).
A rule is a direction and a category list searched as ``AbstractCollinsHeadFinder`` does; when the last rule
finds nothing, the first (``left*``) or last (``right*``) child that is not punctuation is the head.
"""

from __future__ import annotations

from lightning_modules.data.dependency_schemes.reading import PUNCTUATION_TAGS, Node
from lightning_modules.errors import InputError

Rules = tuple[tuple[str, ...], ...]

_MOD_COLLINS: dict[str, Rules] = {
    "ADJP": (("left", "$"), ("rightdis", "NNS", "NN", "JJ", "JJP", "JJR", "JJS", "QP", "VBN", "VBG"),
             ("left", "ADJP"), ("rightdis", "DT", "RB", "RBR", "CD", "IN", "VBD"), ("left", "ADVP", "NP")),
    "JJP": (("left", "NNS", "NN", "$", "QP", "JJ", "VBN", "VBG", "ADJP", "JJP", "JJR", "NP", "JJS", "DT", "FW",
             "RBR", "RBS", "SBAR", "RB"),),
    "ADVP": (("left", "ADVP", "IN"), ("rightdis", "RB", "RBR", "RBS", "JJ", "JJR", "JJS"),
             ("rightdis", "RP", "DT", "NN", "CD", "NP", "VBN", "NNP", "CC", "FW", "NNS", "ADJP", "NML")),
    "CONJP": (("right", "CC", "RB", "IN"),),
    "FRAG": (("right",),),
    "INTJ": (("left",),),
    "LST": (("right", "LS", ":"),),
    "NAC": (("rightdis", "NN", "NNS", "NNP", "NNPS"),
            ("left", "NML", "NP", "NAC", "EX", "$", "CD", "QP", "PRP", "VBG", "JJ", "JJS", "JJR", "ADJP", "JJP",
             "FW")),
    "PP": (("right", "IN", "TO", "VBG", "VBN", "RP", "FW", "JJ", "SYM"), ("left", "PP")),
    "PRN": (("left", "VP", "NP", "PP", "SQ", "S", "SINV", "SBAR", "ADJP", "JJP", "ADVP", "INTJ", "WHNP", "NAC",
             "VBP", "JJ", "NN", "NNP"),),
    "PRT": (("right", "RP"),),
    "QP": (("left", "$", "IN", "NNS", "NN", "JJ", "CD", "PDT", "DT", "RB", "NCD", "QP", "JJR", "JJS"),),
    "RRC": (("left", "RRC"), ("right", "VP", "ADJP", "JJP", "NP", "PP", "ADVP")),
    "S": (("left", "TO", "VP", "S", "FRAG", "SBAR", "ADJP", "JJP", "UCP", "NP"),),
    "SBAR": (("left", "WHNP", "WHPP", "WHADVP", "WHADJP", "IN", "DT", "S", "SQ", "SINV", "SBAR", "FRAG"),),
    "SBARQ": (("left", "SQ", "S", "SINV", "SBARQ", "FRAG", "SBAR"),),
    "SINV": (("left", "VBZ", "VBD", "VBP", "VB", "MD", "VBN", "VP", "S", "SINV", "ADJP", "JJP", "NP"),),
    "SQ": (("left", "VBZ", "VBD", "VBP", "VB", "MD", "AUX", "AUXG", "VP", "SQ"),),
    "UCP": (("right",),),
    "VP": (("left", "TO", "VBD", "VBN", "MD", "VBZ", "VB", "VBG", "VBP", "VP", "AUX", "AUXG", "ADJP", "JJP", "NN",
            "NNS", "JJ", "NP", "NNP"),),
    "WHADJP": (("left", "WRB", "WHADVP", "RB", "JJ", "ADJP", "JJP", "JJR"),),
    "WHADVP": (("right", "WRB", "WHADVP"),),
    "WHNP": (("left", "WDT", "WP", "WP$", "WHADJP", "WHPP", "WHNP"),),
    "WHPP": (("right", "IN", "TO", "FW"),),
    "X": (("right", "S", "VP", "ADJP", "JJP", "NP", "SBAR", "PP", "X"),),
    "NP": (("rightdis", "NN", "NNP", "NNPS", "NNS", "NML", "NX", "POS", "JJR"), ("left", "NP", "PRP"),
           ("rightdis", "$", "ADJP", "JJP", "PRN", "FW"), ("right", "CD"),
           ("rightdis", "JJ", "JJS", "RB", "QP", "DT", "WDT", "RBR", "ADVP")),
    "POSSP": (("right", "POS"),),
    "ROOT": (("left", "S", "SQ", "SINV", "SBAR", "FRAG"),),
    "TYPO": (("left", "NN", "NP", "NML", "NNP", "NNPS", "TO", "VBD", "VBN", "MD", "VBZ", "VB", "VBG", "VBP", "VP",
              "ADJP", "JJP", "FRAG"),),
    "ADV": (("right", "RB", "RBR", "RBS", "FW", "ADVP", "TO", "CD", "JJR", "JJ", "IN", "NP", "NML", "JJS", "NN"),),
    "EDITED": (("left", "VP", "SQ", "S", "SINV", "SBAR", "NP", "ADJP", "PP", "ADVP", "INTJ", "WHNP", "NAC", "VBP",
                "JJ", "NN", "NNP"),),
    "VB": (("left", "TO", "VBD", "VBN", "MD", "VBZ", "VB", "VBG", "VBP", "VP", "AUX", "AUXG", "ADJP", "JJP", "NN",
            "NNS", "JJ", "NP", "NNP"),),
    "META": (("left",),),
    "XS": (("right", "IN"),),
    "XSL": (("left",),),
}
_MOD_COLLINS["NX"] = _MOD_COLLINS["NML"] = _MOD_COLLINS["NP"]
_MOD_COLLINS["TOP"] = _MOD_COLLINS["ROOT"]

_SEMANTIC_COMMON: dict[str, Rules] = {
    "WHNP": (("rightdis", "NN", "NNP", "NNPS", "NNS", "NX", "NML", "JJR", "WP"), ("left", "WHNP", "NP"),
             ("rightdis", "$", "ADJP", "PRN", "FW"), ("right", "CD"), ("rightdis", "JJ", "JJS", "RB", "QP"),
             ("left", "WHPP", "WHADJP", "WP$", "WDT")),
    "WHADJP": (("left", "ADJP", "JJ", "JJR", "WP"), ("right", "RB"), ("right",)),
    "WHADVP": (("rightdis", "WRB", "WHADVP", "RB", "JJ"),),
    "QP": (("right", "$", "NNS", "NN", "CD", "JJ", "PDT", "DT", "IN", "RB", "NCD", "QP", "JJR", "JJS"),),
    "S": (("left", "VP", "S", "FRAG", "SBAR", "ADJP", "UCP", "TO"), ("right", "NP")),
    "SBAR": (("left", "S", "SQ", "SINV", "SBAR", "FRAG", "VP", "WHNP", "WHPP", "WHADVP", "WHADJP", "IN", "DT"),),
    "SQ": (("left", "VP", "SQ", "ADJP", "VB", "VBZ", "VBD", "VBP", "MD", "AUX", "AUXG"),),
    "UCP": (("left",),),
    "FRAG": (("left", "IN"), ("right", "RB"), ("left", "NP"), ("left", "ADJP", "ADVP", "FRAG", "S", "SBAR", "VP")),
    "PRN": (("left", "VP", "SQ", "S", "SINV", "SBAR", "NP", "ADJP", "PP", "ADVP", "INTJ", "WHNP", "NAC", "VBP",
             "JJ", "NN", "NNP"),),
    "XS": (("right", "IN"),),
    "XSL": (("left",),),
    "EMBED": (("right", "INTJ"),),
}

_SD_NP: Rules = (("rightdis", "NN", "NNP", "NNPS", "NNS", "NX", "NML", "JJR", "WP"), ("left", "NP", "PRP"),
                 ("rightdis", "$", "ADJP", "FW"), ("right", "CD"),
                 ("rightdis", "JJ", "JJS", "QP", "DT", "WDT", "NML", "PRN", "RB", "RBR", "ADVP"),
                 ("rightdis", "VP", "VB", "VBZ", "VBD", "VBP"), ("left", "POS"))
SD_RULES: dict[str, Rules] = {
    **_MOD_COLLINS, **_SEMANTIC_COMMON, "NP": _SD_NP, "NX": _SD_NP, "NML": _SD_NP,
    "CONJP": (("right", "CC", "VB", "JJ", "RB", "IN"),),
}

_UD_NP: Rules = (("rightdis", "NN", "NNP", "NNPS", "NNS", "$", "NX", "NML", "JJR", "WP"), ("left", "NP", "PRP"),
                 ("rightdis", "ADJP", "FW", "CD", "JJ", "QP"),
                 ("rightdis", "JJS", "DT", "WDT", "NML", "PRN", "RB", "RBR", "ADVP"), ("left", "POS"))
_UD_PP: Rules = (("left", "NP", "S", "SBAR", "SBARQ", "ADVP", "PP", "VP", "ADJP", "FRAG", "UCP", "PRN"), ("right",))
UD_RULES: dict[str, Rules] = {
    **_MOD_COLLINS, **_SEMANTIC_COMMON, "NP": _UD_NP, "NX": _UD_NP, "NML": _UD_NP, "PP": _UD_PP, "WHPP": _UD_PP,
    "CONJP": (("right", "JJ", "RB"), ("left", "CC", "IN"), ("right", "VB")),
    "MWE": (("left",),), "FLAT": (("left",),), "PCONJP": (("left",),),
    "ADJP": (("left", "$"), ("rightdis", "NNS", "NN", "NNP", "JJ", "QP", "VBN", "VBG"), ("left", "ADJP"),
             ("rightdis", "JJP", "JJR", "JJS", "DT", "RB", "RBR", "CD", "IN", "VBD"), ("left", "ADVP", "NP")),
    "INTJ": (("rightdis", "NNS", "NN", "NNP"), ("left",)),
    "ADVP": (("left", "ADVP"), ("rightdis", "RB", "RBR", "RBS", "JJ", "JJR", "JJS"),
             ("rightdis", "RP", "DT", "NN", "CD", "NP", "VBN", "NNP", "CC", "FW", "NNS", "ADJP", "NML"), ("left",)),
    "GAPPINGP": (("left", "NP", "NX", "WHNP", "ADJP", "PP", "S", "SBAR", "SBARQ", "SINV", "SQ", "ADVP"), ("left",),
                 ("rightdis", "RB", "RBR", "RBS", "JJ", "JJR", "JJS"),
                 ("rightdis", "RP", "DT", "NN", "CD", "NP", "VBN", "NNP", "CC", "FW", "NNS", "ADJP", "NML"),
                 ("left",)),
}

COPULAS = frozenset({"be", "being", "been", "am", "are", "r", "is", "ai", "was", "were", "'m", "’m", "m", "'re", "’re",
                     "'s", "’s", "s", "`s", "art", "ar", "wase"})
BE_GET = COPULAS | {"get", "getting", "gets", "got", "gotten"}
AUXILIARIES = frozenset({
    "will", "wo", "shall", "sha", "may", "might", "should", "would", "can", "could", "ca", "must", "'ll", "’ll", "ll",
    "-ll", "cold", "has", "have", "had", "having", "'ve", "’ve", "ve", "v", "of", "hav", "hvae", "as", "get", "gets",
    "getting", "got", "gotten", "do", "does", "did", "'d", "’d", "d", "du", "to", "2", "na", "a", "ot", "ta", "the",
    "too"})
_VERB_TAGS = frozenset({"TO", "MD", "VB", "VBD", "VBP", "VBZ", "VBG", "VBN", "AUX", "AUXG"})
_UNAMBIGUOUS_AUX_TAGS = frozenset({"TO", "MD", "AUX", "AUXG"})
_PARTICIPLES = ("VBN", "VBG", "VBD")


class SemanticHeadFinder:
    """Head child of a constituent; ``universal`` picks the UD finder's rules (else the SD one's)."""

    def __init__(self, universal: bool) -> None:
        self.universal = universal
        self.rules = UD_RULES if universal else SD_RULES
        self.copula_categories = (("VP", "ADJP", "NP", "UCP", "PP", "WHADJP", "WHNP") if universal
                                  else ("VP", "ADJP", "NP", "WHADJP", "WHNP"))

    # -- the generic search (AbstractCollinsHeadFinder) ----------------------------------------------
    def head(self, t: Node, parent: Node | None = None) -> Node:
        """The head child of ``t`` (a phrase or preterminal), given its parent."""
        if len(t.children) == 1:
            return t.children[0]
        special = self._special(t, parent)
        if special is not None:
            return special
        return self._by_rules(t)

    def _by_rules(self, t: Node) -> Node:
        cat = t.category
        rules = self.rules.get(cat)
        if rules is None:
            raise InputError(f"no head rule for constituent label {t.label!r} (CoreNLP's semantic head finder)")
        kids = t.children
        for i, rule in enumerate(rules):
            found = self._locate(kids, rule, last_resort=i == len(rules) - 1)
            if found is not None:
                return found
        raise AssertionError("the last rule always finds a head")

    def _locate(self, kids: list[Node], rule: tuple[str, ...], last_resort: bool) -> Node | None:
        idx = _find(kids, rule)
        if idx < 0:
            if not last_resort:
                return None
            except_rule = ("leftexcept" if rule[0].startswith("left") else "rightexcept", *PUNCTUATION_TAGS)
            idx = _find(kids, except_rule)
            if idx < 0:
                return kids[0] if rule[0].startswith("left") else kids[-1]
            return kids[idx]
        return kids[self._coordination_fix(idx, kids)]

    def _coordination_fix(self, idx: int, kids: list[Node]) -> int:
        """``postOperationFix``: a head right after CC/CONJP moves to the first conjunct."""
        if idx < 2 or kids[idx - 1].category not in ("CC", "CONJP"):
            return idx
        interjection = kids[idx].category == "UH"
        new = idx - 2
        while new >= 0 and _skippable(kids[new], interjection):
            new -= 1
        while new >= 2:
            nxt = _previous_head(new, kids, interjection)
            if nxt < 0:
                break
            new = nxt
        return new if new >= 0 else idx

    # -- the semantic refinements ------------------------------------------------------------------
    def _special(self, t: Node, parent: Node | None) -> Node | None:
        cat = t.category
        kids = t.children
        if cat == "CONJP":
            return _conjp_head(kids)
        if cat in ("SBARQ", "SINV"):
            found = _copula_question_head(t)
            if found is not None:
                return found
        if cat not in ("VP", "SQ", "SINV"):
            return None
        filtered = [k for k in kids if _keeps(k)]
        if _has_aux(kids, AUXILIARIES, True) or _has_passive_progressive_aux(kids):
            cats = ("VP", "ADJP") if _has_aux(kids, COPULAS, True) else ("VP",)
            found = self._locate(filtered, ("left", *cats), last_resort=False) if filtered else None
            if found is not None:
                return found
        if _has_aux(kids, COPULAS, False) and not _is_existential(t, parent) and not _is_whq(t, parent):
            direction = "right" if cat == "SQ" else "left"
            found = self._locate(filtered, (direction, *self.copula_categories), last_resort=False) if filtered \
                else None
            if cat == "SQ" and found is not None and found.label.startswith("NP"):
                before = kids[:next(i for i, k in enumerate(kids) if k is found)]
                if not any(k.label.startswith("NP") for k in before):
                    found = None
            if found is not None:
                return found
        return None


def _find(kids: list[Node], rule: tuple[str, ...]) -> int:
    how, cats = rule[0], rule[1:]
    labels = [k.category for k in kids]
    forward = how.startswith("left")
    order = list(range(len(kids))) if forward else list(range(len(kids) - 1, -1, -1))
    if how.endswith("except"):
        return next((i for i in order if labels[i] not in cats), -1)
    if how.endswith("dis"):
        return next((i for i in order if labels[i] in cats), -1)
    for cat in cats:
        for i in order:
            if labels[i] == cat:
                return i
    return -1


def _skippable(t: Node, interjection: bool) -> bool:
    return (t.is_preterminal and (t.label in PUNCTUATION_TAGS or (not interjection and t.label == "UH"))
            or (t.label == "INTJ" and not interjection))


def _previous_head(idx: int, kids: list[Node], interjection: bool) -> int:
    seen_separator = False
    new = idx
    while new >= 0:
        new -= 1
        if new < 0:
            return new
        label = kids[new].category
        if label in (",", ":"):
            seen_separator = True
        elif (kids[new].is_preterminal and (label in PUNCTUATION_TAGS or (not interjection and label == "UH"))
              or (label == "INTJ" and not interjection)):
            pass
        else:
            if not seen_separator:
                new = -1
            break
    return new


def _word_is(t: Node, words: tuple[str, ...]) -> bool:
    return t.is_preterminal and t.text().lower() in words


def _conjp_head(kids: list[Node]) -> Node | None:
    """``headOfConjpTregex``: *but not*, *and not* -> *not*; *but also/rather* -> that word; *and yet* -> *yet*."""
    for first, seconds in ((("but", "and"), ("not",)), (("but",), ("also", "rather")), (("and",), ("yet",))):
        for i, k in enumerate(kids[:-1]):
            if k.label == "CC" and _word_is(k, first):
                nxt = kids[i + 1]
                if nxt.label == "RB" and _word_is(nxt, seconds):
                    return nxt
                if first != ("but", "and") and nxt.label == "ADVP" and len(nxt.children) == 1 \
                        and nxt.children[0].label == "RB" and _word_is(nxt.children[0], seconds):
                    return nxt
    return None


def _is_copula_verb(t: Node, tag_prefixes: tuple[str, ...]) -> bool:
    return t.label.startswith(tag_prefixes) and t.is_preterminal and t.text().lower() in COPULAS


def _copula_question_head(t: Node) -> Node | None:
    """``headOfCopulaTregex`` (SBARQ: *what is X* questions; SINV: inverted copular clauses)."""
    kids = t.children
    if t.category == "SBARQ":
        for i, k in enumerate(kids):
            if k.label != "WHNP":
                continue
            for j in range(i + 1, len(kids)):
                if _is_copula_verb(kids[j], ("VB",)):
                    adjp = next((a for a in kids[j + 1:] if a.label == "ADJP"), None)
                    if adjp is not None:
                        return adjp
        for i, k in enumerate(kids):
            if k.label != "WHNP":
                continue
            for j in range(i + 1, len(kids) - 1):
                if (_is_copula_verb(kids[j], ("VB",)) and kids[j + 1].label == "NP"
                        and not any(a.label == "ADJP" for a in kids[j + 1:])):
                    return k
        return None
    for i, k in enumerate(kids):
        if k.label != "NP":
            continue
        for j in range(i + 1, len(kids)):
            if kids[j].label != "NP":
                continue
            for vp in kids[j + 1:]:
                if vp.label == "VP" and any(_is_copula_verb(v, ("VB", "AUX")) for v in vp.children):
                    return k
    return None


def _keeps(t: Node) -> bool:
    """``REMOVE_TMP_AND_ADV``: drops ``-TMP``/``-ADV`` children and a VP that is only a temporal NP."""
    if "-TMP" in t.label or "-ADV" in t.label:
        return False
    if t.label.startswith("VP") and any(k.label == "NP-TMP" for k in t.children) and not any(
            k.label.startswith("V") or k.label in ("NNP", "NN", "NNPS", "NNS", "NP", "JJ", "ADJP", "S")
            for k in t.children):
        return False
    return True


def _is_aux(t: Node, words: frozenset[str], tag_only: bool) -> bool:
    if not t.is_preterminal:
        return False
    return (tag_only and t.label in _UNAMBIGUOUS_AUX_TAGS) or (t.label in _VERB_TAGS and t.text().lower() in words)


def _has_aux(kids: list[Node], words: frozenset[str], tag_only: bool) -> bool:
    return any(_is_aux(k, words, tag_only) for k in kids)


def _has_passive_progressive_aux(kids: list[Node]) -> bool:
    """A be/get auxiliary beside a VP with a participle (CoreNLP's test, including its reading of the VP's own
    label where it means the child's)."""
    found_vp = found_aux = False
    for kid in kids:
        if _is_aux(kid, BE_GET, False):
            found_aux = True
        elif kid.is_phrasal:
            if not kid.label.startswith("VP"):
                continue
            participle_in_vp = False
            for kk in kid.children:
                if kk.is_preterminal:
                    if kk.label in _PARTICIPLES:
                        found_vp = True
                        break
                    if kk.label == "CC" and participle_in_vp:
                        found_vp = True
                        break
                elif kk.is_phrasal:
                    if kid.label == "VP":
                        participle_in_vp = any(c.is_preterminal and c.label in _PARTICIPLES for c in kk.children)
                    elif kid.label in ("CONJP", "PRN") and participle_in_vp:
                        found_vp = True
                        break
        if found_aux and found_vp:
            break
    return found_aux and found_vp


def _is_existential(t: Node, parent: Node | None) -> bool:
    if parent is None:
        return False
    if t.category == "VP":
        for kid in parent.children:
            if kid.label == "VP":
                break
            if any(p.label == "EX" for p in kid.preterminals()):
                return True
        return False
    if t.category.startswith("SQ"):
        return any(not kid.label.startswith("VB") and any(p.label == "EX" for p in kid.preterminals())
                   for kid in parent.children)
    return False


def _is_whq(t: Node, parent: Node | None) -> bool:
    return (t.label.startswith("SQ") and parent is not None and parent.label == "SBARQ"
            and any(k.label.startswith("WH") for k in parent.children))
