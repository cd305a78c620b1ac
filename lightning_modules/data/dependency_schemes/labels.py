"""Dependency labels of the SD and UD basic schemes, from the constituents a dependency comes from.

CoreNLP labels a dependency with the most specific of its grammatical relations whose tregex patterns match
the tree (``EnglishGrammaticalRelations``, ``UniversalEnglishGrammaticalRelations``). This module decides
the same relations from the same configuration, written as rules over the attachment: the phrase ``P`` the
dependency lies in, its head child ``H``, the dependent's maximal projection ``D``, their order and words.
The rules cover the relations by frequency; what they do not decide is ``dep``, as in CoreNLP.
"""

from __future__ import annotations

import re

from lightning_modules.data.dependency_schemes.head_finders import BE_GET, COPULAS
from lightning_modules.data.dependency_schemes.reading import PUNCTUATION_TAGS, Node

_VERB_TAGS = ("VB", "VBD", "VBG", "VBN", "VBP", "VBZ", "MD", "TO")
_NEGATIONS = frozenset({"not", "n't", "never", "nt"})
_NOUN_PHRASES = ("NP", "NX", "NML", "WHNP", "NAC", "QP")
_CLAUSES = ("S", "SQ", "SINV", "SBARQ", "VP", "FRAG")
_RELATIVE_WORDS = frozenset({"that", "which", "who", "whom", "whose", "where", "when", "why"})
_COMPLEMENTIZERS = frozenset({"that", "whether", "if"})


def verb_chain(vp: Node) -> list[Node]:
    """The verbs (preterminals) along a VP's chain of head VPs: auxiliaries first, the main verb last."""
    chain: list[Node] = []
    node: Node | None = vp
    while node is not None and node.category == "VP":
        chain += [k for k in node.children if k.is_preterminal and k.label in _VERB_TAGS]
        nxt = node.head_child
        node = nxt if nxt is not None and nxt.category == "VP" else None
    return chain


def is_passive(vp: Node) -> bool:
    """A VP whose main verb is a participle right after a form of *be* or *get*."""
    chain = verb_chain(vp)
    return (len(chain) >= 2 and chain[-1].label == "VBN" and chain[-2].text().lower() in BE_GET
            and _is_main(vp, chain[-1]))


def _is_main(vp: Node, verb: Node) -> bool:
    node = vp
    while node.head_child is not None and not node.is_preterminal:
        node = node.head_child
    return node is verb


def _has_subject(clause: Node) -> bool:
    kids = clause.children
    for k in kids:
        if k.category == "VP":
            return False
        if k.category in ("NP", "WHNP") or k.label == "EX":
            return True
    return False


def _first_word(node: Node) -> str:
    leaves = node.leaves()
    return leaves[0].word.lower() if leaves else ""  # type: ignore[union-attr]


def _is_infinitival(node: Node) -> bool:
    """An S (or VP) whose verb chain starts with *to* or is a bare participle/gerund without subject."""
    vp = next((k for k in node.children if k.category == "VP"), node if node.category == "VP" else None)
    if vp is None:
        return False
    chain = verb_chain(vp)
    return bool(chain) and (chain[0].label == "TO" or chain[0].label in ("VBG", "VBN"))


_MODIFIER_PHRASES = frozenset({"PP", "ADVP", "SBAR", "RB", "PRN"})


def _coordinated(phrase: Node, dependent: Node, head: Node) -> bool:
    """``D`` is a later conjunct: it follows the head in a phrase with a conjunction (CC/CONJP) after the
    head; a modifier phrase only when the conjuncts are of its own category."""
    kids = phrase.children
    h, d = kids.index(head), kids.index(dependent)
    if d < h:
        return False
    if dependent.category in _MODIFIER_PHRASES and dependent.category != head.category:
        return False  # a modifier after the conjuncts (*obtain X and complete Y by year-end*)
    if head.is_preterminal and head.label.startswith("VB") and dependent.category == "NP":
        return False  # the shared argument of coordinated verbs (*maintaining or increasing spending*)
    return any(k.category in ("CC", "CONJP") for k in kids[h + 1:])


def sd_label(phrase: Node, head: Node, dep: Node) -> str:
    """The SD relation of the dependency of ``dep``'s head word on ``head``'s within ``phrase``."""
    p, d = phrase.category, dep.category
    dl = dep.label
    kids = phrase.children
    left = kids.index(dep) < kids.index(head)
    word = dep.text().lower() if dep.is_preterminal else ""
    if dep.is_preterminal and dl in PUNCTUATION_TAGS:
        return "punct"
    if d == "CC":
        if kids.index(dep) == 0 and word in ("both", "either", "neither", "whether"):
            return "preconj"
        return "cc"
    if d == "CONJP":
        return "cc" if kids.index(dep) > 0 else "dep"  # a leading CONJP (*not only*) coordinates nothing
    if _coordinated(phrase, dep, head) and d not in ("PRN",):
        return "conj"
    if dl in ("NP-TMP",) or (d == "NP" and "-TMP" in dl):
        return "tmod"
    if dl == "NP-ADV":
        return "npadvmod"
    if d in ("UH", "INTJ"):
        return "discourse"
    if dl == "POS":
        return "possessive"
    if dl in ("PRP$", "WP$"):
        return "poss"
    if d in ("RB", "ADVP") and (word in _NEGATIONS or (d == "ADVP" and _first_word(dep) in _NEGATIONS
                                                        and len(dep.leaves()) == 1)):
        return "neg"
    if d == "PRT":
        return "prt"
    if d == "PP":
        return "pcomp" if p == "PP" and not left and head.is_preterminal else "prep"
    if p in ("PP", "WHPP"):
        return _in_pp(dep, head, left)
    if p in ("SBAR",):
        return _in_sbar(phrase, dep, head, word)
    if dl in ("MD", "TO") and p in ("VP", "SQ", "SINV", "S"):
        return "aux"
    if dep.is_preterminal and dl in _VERB_TAGS and left and p in ("VP", "SQ", "SINV"):
        return _auxiliary(head, dep, word)
    if p in ("S", "SQ", "SINV", "SBARQ") or (p == "VP" and left and d in ("NP", "WHNP")):
        label = _in_clause(phrase, head, dep, left)
        if label is not None:
            return label
    if p in ("VP",):
        return _in_vp(phrase, head, dep, left)
    if p in _NOUN_PHRASES or p in ("ADJP", "WHADJP", "ADVP", "WHADVP", "PRN", "FRAG", "X", "UCP", "RRC",
                                    "CONJP", "XS", "XSL", "INTJ", "LST"):
        return _in_nominal(phrase, head, dep, left, word)
    return "dep"


_SD_MULTIWORD_PREPOSITIONS = frozenset({
    ("because", "of"), ("instead", "of"), ("such", "as"), ("rather", "than"), ("due", "to"), ("prior", "to"),
    ("as", "to"), ("so", "that"), ("as", "of"), ("ahead", "of"), ("out", "of"), ("apart", "from"),
    ("close", "to"), ("next", "to"), ("as", "for"), ("according", "to")})


def _in_pp(dep: Node, head: Node, left: bool) -> str:
    d = dep.category
    if left and dep.is_preterminal and dep.label != "RB" and head.is_preterminal and (
            dep.text().lower(), head.text().lower()) in _SD_MULTIWORD_PREPOSITIONS:
        return "mwe"
    if left:
        if d in ("ADVP", "RB", "WHADVP"):
            return "advmod"
        if d == "NP":
            return "npadvmod"
        return "dep"
    if d in ("NP", "WHNP", "QP", "NN", "NNS", "NNP", "CD", "PRP"):
        return "pobj"
    if d in ("S", "SBAR", "VP", "SQ", "SBARQ", "ADJP", "ADVP", "WHADVP", "PP", "RB", "JJ"):
        return "pcomp"
    return "dep"


def _in_sbar(phrase: Node, dep: Node, head: Node, word: str) -> str:
    d = dep.category
    if d in ("IN", "DT") or (dep.is_preterminal and word in _COMPLEMENTIZERS):
        return "mark"
    if d == "WHNP":
        clause = head
        if clause.category == "S" and _has_subject(clause):
            return "dobj"
        vp = next((k for k in clause.children if k.category == "VP"), None)
        return "nsubjpass" if vp is not None and is_passive(vp) else "nsubj"
    if d in ("WHADVP", "WHADJP"):
        return "advmod"
    if d == "WHPP":
        return "prep"
    if d in ("RB", "ADVP"):
        return "advmod"
    return "dep"


def _auxiliary(head: Node, dep: Node, word: str) -> str:
    """An auxiliary verb beside the VP it helps, or a copula beside its predicate."""
    if head.category != "VP":
        return "cop" if word in COPULAS else "aux"
    chain = verb_chain(head)
    if word in BE_GET and chain and chain[0].label == "VBN" and _is_main(head, chain[0]):
        return "auxpass"
    return "aux"


def _in_clause(phrase: Node, head: Node, dep: Node, left: bool) -> str | None:
    d = dep.category
    if left:
        if dep.label == "EX" or (d == "NP" and len(dep.leaves()) == 1 and dep.preterminals()[0].label == "EX"):
            return "expl"
        if d in ("NP", "WHNP"):
            vp = head if head.category == "VP" else None
            return "nsubjpass" if vp is not None and is_passive(vp) else "nsubj"
        if d == "SBAR":
            lead = _first_word(dep)
            return "csubj" if lead in ("that", "whether", "what", "how", "who") and phrase.category == "S" \
                and not any(k.category == "," for k in phrase.children[:phrase.children.index(dep) + 2]) \
                else "advcl"
        if d == "S":
            idx = phrase.children.index(dep)
            nxt = phrase.children[idx + 1] if idx + 1 < len(phrase.children) else None
            if nxt is not None and nxt.category in (",", ":", "''", "``"):
                return "vmod" if _is_infinitival(dep) and not _has_subject(dep) else "ccomp"
            return "csubj"
        if d in ("ADVP", "RB", "WHADVP"):
            return "advmod"
        if d == "PRN":
            return _parenthetical(dep)
        if d in ("ADJP", "JJ"):
            return "dep"
        return None
    if d in ("S", "SINV", "SQ", "SBARQ"):
        return "parataxis" if phrase.category != "SINV" else "ccomp"
    if phrase.category in ("SINV", "SQ") and d == "NP":
        vp = head if head.category == "VP" else None
        return "nsubjpass" if vp is not None and is_passive(vp) else "nsubj"
    return None


def _in_vp(phrase: Node, head: Node, dep: Node, left: bool) -> str:
    d = dep.category
    if left:
        if d in ("ADVP", "RB", "WHADVP"):
            return "advmod"
        if d == "NP":
            return "npadvmod"
        return "dep"
    verb = head.text().lower() if head.is_preterminal else ""
    if d in ("NP", "WHNP"):
        if verb in COPULAS:  # the copula heads only an existential clause: its NP is the subject
            return "nsubj"
        if _CLAUSAL_COMPLEMENT_VERB.fullmatch(verb):
            return "xcomp"
        kids = phrase.children
        later = [k for k in kids[kids.index(dep) + 1:] if k.category == "NP" and "-" not in k.label]
        return "iobj" if later else "dobj"
    if d in ("ADJP", "JJ"):
        return "acomp"
    if d == "S":
        return _clause_in_vp(phrase, head, dep)
    if d == "SBAR":
        return _sbar_complement(dep, verb)
    if d in ("ADVP", "RB", "WHADVP"):
        return "advmod"
    if d in ("VP",):
        return "dep"
    if d in ("PRN",):
        return _parenthetical(dep)
    if d in ("SQ", "SBARQ", "SINV"):
        return "ccomp"
    return "dep"


_CLAUSAL_COMPLEMENT_VERB = re.compile(
    r"seem|seems|seemed|seeming|resemble|resembles|resembled|resembling|become|becomes|became|becoming|remain|"
    r"remains|remained|remaining")  # EnglishPatterns.clausalComplementRegex: their NP is an xcomp
_CCOMP_VERB = re.compile(
    r"ask|asks|asked|asking|know|knows|knew|knowing|specify|specifies|specified|specifying|tell|tells|told|"
    r"telling|understand|understands|understood|understanding|wonder|wonders|wondered|wondering")


def _parenthetical(dep: Node) -> str:
    """A PRN: ``parataxis`` when it holds a clause, else ``dep``."""
    return "parataxis" if any(k.category in ("S", "SINV", "VP", "SBAR") for k in dep.children) else "dep"


def _sbar_complement(dep: Node, verb: str) -> str:
    """An SBAR after a verb: ``ccomp`` (*that*/*whether*/*if*, no complementizer, a wh-question) or
    ``advcl`` (another subordinator, or *where*/*when* after a verb that does not take questions)."""
    first = dep.children[0]
    if first.category == "IN" and _first_word(dep) not in _COMPLEMENTIZERS:
        return "advcl"
    if first.category == "WHADVP" and _first_word(dep) != "how" and not _CCOMP_VERB.fullmatch(verb):
        return "advcl"
    return "ccomp"


_XCOMP_VERB = re.compile(
    r"(?:allow|ask|demand|expect|help|order|prompt)(?:s|ed|ing)?|(?:advis|convinc|declar|defin|desir|encourag|forc|"
    r"implor|nam|persuad|pressur|requir|urg)(?:e|es|ed|ing)|beg|begs|begged|begging|compel|compels|compelled|"
    r"compelling|lobby|lobbies|lobbied|lobbying|permit|permits|permitted|permitting|tell|tells|told|telling",
    re.IGNORECASE)  # EnglishPatterns.xcompVerbRegex: verbs whose object controls an infinitive


def _clause_in_vp(phrase: Node, head: Node, dep: Node) -> str:
    """An S complement of a verb: ``xcomp`` (controlled: infinitive, small clause, gerund), ``ccomp``
    (its own subject or finite), ``vmod`` (a purpose infinitive after the object, a participle after a
    comma), as CoreNLP's ccomp/xcomp/vmod patterns tell them apart."""
    kids = phrase.children
    i = kids.index(dep)
    np_before = any(k.label == "NP" for k in kids[:i])
    after_comma = i > 0 and kids[i - 1].category == ","
    vp = next((k for k in dep.children if k.category == "VP"), None)
    first = vp.children[0].label if vp is not None else ""
    verb = head.text() if head.is_preterminal else ""
    if vp is not None and any(k.label == "TO" for k in vp.children):
        return "vmod" if np_before and not _XCOMP_VERB.fullmatch(verb) else "xcomp"
    before_comma = kids[i - 2] if i > 1 else None
    modifier_comma = after_comma and before_comma is not None and (
        before_comma.category in ("NP", "VP")
        or (before_comma.category in ("PP", "ADVP") and any(k.category == "NP" for k in kids[:i - 2])))
    if vp is not None and modifier_comma and (first in ("VBG", "VBN") or (
            len(vp.children) > 1 and vp.children[1].label in ("VBG", "VBN") and first == "ADVP")):
        return "vmod"
    nps = [j for j, k in enumerate(dep.children) if k.category == "NP"]
    if any(j + 1 < len(dep.children) and dep.children[j + 1].category in ("NP", "ADJP") for j in nps):
        return "xcomp"
    if len(dep.children) == 1 and dep.children[0].category == "NP":
        return "xcomp"
    if vp is not None and first not in ("TO", "VBG", "VBN") and not np_before:
        return "ccomp"
    if vp is not None and first == "VBG" and not nps:
        return "xcomp"
    if vp is not None and nps:
        return "ccomp"
    return "dep"


def _in_nominal(phrase: Node, head: Node, dep: Node, left: bool, word: str) -> str:
    p, d = phrase.category, dep.category
    if p == "XSL" or (p == "XS" and head.text().lower() in ("than", "as")):
        return "mwe"
    if p == "QP" or p in ("XS", "XSL"):
        if d == "CD":
            return "number"
        if d == "QP" or d == "CD":
            return "num"
        if d in ("RB", "ADVP") and any(k.category == "CC" for k in phrase.children):
            return "advmod"  # a coordinated QP's adverb modifies its conjunct, not the quantity
        if d in ("XS", "XSL", "IN", "RB", "JJ", "JJR", "RBR", "DT", "ADVP", "JJS", "RBS", "PDT"):
            return "quantmod"
        return "dep"
    if p in ("ADJP", "WHADJP", "ADVP", "WHADVP"):
        if d in ("RB", "ADVP", "RBR", "RBS", "WRB", "WHADVP"):
            return "advmod"
        if d in ("NP", "NN", "NNS"):
            return "npadvmod"
        if d in ("S",):
            return "xcomp"
        if d in ("SBAR",):
            return "ccomp"
        if d in ("CD", "QP") and p == "ADJP":
            return "number" if d == "CD" else "num"
        if d in ("DT",):
            return "det"
        if d in ("JJ", "ADJP", "JJR", "JJS"):
            return "amod" if p == "ADJP" else "advmod"
        return "dep"
    if p == "PRN":
        return "dep"
    if d in ("DT", "WDT"):
        return "neg" if word == "no" else "det"
    if d == "PDT":
        return "predet"
    if d in ("JJ", "JJR", "JJS", "VBN", "VBG", "ADJP", "WHADJP"):
        return "amod"
    if d in ("CD", "QP"):
        return "num"
    if d in ("NN", "NNS", "NNP", "NNPS", "FW", "NX", "NML"):
        return "nn" if left else "dep"
    if d in ("PRP",):
        return "nn" if left else "dep"
    if d in ("NP", "WHNP"):
        if left:
            return "poss" if dep.children[-1].label == "POS" else "nn"
        idx = phrase.children.index(dep)
        prev = phrase.children[idx - 1]
        if prev.category == "," or prev.category == "-LRB-":
            return "appos"
        return "dep"
    if d in ("SBAR",):
        first = dep.children[0]
        if first.category.startswith("WH") or (first.category == "IN" and _first_word(dep) in _RELATIVE_WORDS):
            return "rcmod"
        if first.category == "IN":
            return "dep"
        return "vmod" if _is_infinitival(dep.children[-1]) and not _has_subject(dep.children[-1]) else "rcmod"
    if d in ("VP", "S"):
        return "vmod"
    if d in ("RB", "ADVP", "RBR", "WHADVP"):
        return "advmod"
    if d in ("PRN",):
        return "dep"
    if d in ("RRC",):
        return "rcmod"
    return "dep"


# -- UD: the SD relation renamed, and what UD's structure changes (case markers, nmod/obl) ------------------
_SD_TO_UD = {
    "nn": "compound", "num": "nummod", "number": "compound", "dobj": "obj", "nsubjpass": "nsubj:pass",
    "auxpass": "aux:pass", "poss": "nmod:poss", "possessive": "case", "rcmod": "acl:relcl",
    "prt": "compound:prt", "quantmod": "advmod", "predet": "det:predet", "preconj": "cc:preconj",
    "acomp": "xcomp", "mwe": "fixed", "csubjpass": "csubj:pass", "neg": "advmod", "pobj": "obl",
    "pcomp": "advcl", "prep": "obl",
}
_CLAUSAL = ("S", "SBAR", "SQ", "SBARQ", "SINV", "VP", "FRAG")


def _nominal(phrase: Node) -> bool:
    return phrase.category in ("NP", "NX", "NML", "WHNP", "NAC")


def ud_label(phrase: Node, head: Node, dep: Node) -> str:
    """The UD relation of a dependency (UD heads: a PP is headed by its object, the preposition is ``case``)."""
    p, d = phrase.category, dep.category
    kids = phrase.children
    left = kids.index(dep) < kids.index(head)
    if p == "MWE":
        return "fixed"
    if p in ("PP", "WHPP") and (d == "MWE" or (dep.is_preterminal and (left or d in ("IN", "TO"))
                                               and dep.label not in PUNCTUATION_TAGS and d not in ("RB", "CC"))):
        return "mark" if head.category in _CLAUSAL else "case"
    if dep.label == "IN" and p == "ADVP":
        return "case"
    if d == "MWE" and p in ("SBAR",):
        return "mark"
    if d == "MWE" and p in ("QP", "ADJP", "ADVP", "NP"):
        return "advmod"
    if d in ("PP", "WHPP") and not _coordinated(phrase, dep, head):
        inner = dep.head_child
        if inner is not None and inner.category in _CLAUSAL:
            return "acl" if _nominal(phrase) else "advcl"
        return "nmod" if _nominal(phrase) else "obl"
    sd = sd_label(phrase, head, dep)
    if sd == "aux" and dep.label == "TO":
        return "mark"
    if sd == "neg" and dep.label == "DT":
        return "det"
    if sd in ("npadvmod", "tmod"):
        return "obl:npmod" if sd == "npadvmod" else "obl:tmod"  # CoreNLP's UD has no nmod:npmod/nmod:tmod
    if sd == "vmod":
        return "acl" if _nominal(phrase) else "advcl"
    return _SD_TO_UD.get(sd, sd)
