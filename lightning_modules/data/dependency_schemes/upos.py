"""Universal POS tags from PTB tags, as CoreNLP's ``UniversalPOSMapper`` assigns them: a few tags decided
by their context (TO, IN, NN, RB, DT, WDT, verbs), the rest by a fixed table. Verbs are ``AUX`` where the
converter made them auxiliaries or copulas (CoreNLP reads the same from its aux/cop patterns)."""

from __future__ import annotations

from lightning_modules.data.dependency_schemes.reading import Node

_TABLE = {
    "CC": "CCONJ", "CD": "NUM", "EX": "PRON", "FW": "X", "LS": "NUM", "MD": "AUX", "NNS": "NOUN", "NNP": "PROPN",
    "NNPS": "PROPN", "PDT": "DET", "POS": "PART", "PRP": "PRON", "PRP$": "PRON", "RBR": "ADV", "RBS": "ADV",
    "RP": "ADP", "UH": "INTJ", "WP": "PRON", "WP$": "PRON", "WRB": "ADV", "``": "PUNCT", "''": "PUNCT",
    "(": "PUNCT", ")": "PUNCT", "-LRB-": "PUNCT", "-RRB-": "PUNCT", ",": "PUNCT", ".": "PUNCT", ":": "PUNCT",
    "HYPH": "PUNCT", "#": "SYM", "$": "SYM", "ADD": "X", "AFX": "X", "GW": "X", "XX": "X", "SYM": "SYM",
}
_INDEFINITES = frozenset({"somebody", "something", "someone", "anybody", "anything", "anyone", "everybody",
                          "everything", "everyone", "nobody", "nothing"})
_NEGATIONS = frozenset({"not", "n't", "nt", "t", "n"})
_AUX_RELATIONS = frozenset({"aux", "aux:pass", "auxpass", "cop"})


def upos_tags(root: Node, deprels: dict[int, str]) -> list[str]:
    """The UPOS of every word of ``root`` (``deprels``: word index -> the converter's relation)."""
    out: list[str] = []

    def visit(node: Node, parent: Node | None) -> None:
        if node.is_preterminal:
            out.append(_upos(node, parent, deprels.get(node.children[0].index, "")))
            return
        for kid in node.children:
            visit(kid, node)

    visit(root, None)
    return out


def _upos(t: Node, parent: Node | None, relation: str) -> str:
    tag, word = t.label, t.text().lower()
    p = parent.category if parent is not None else ""
    sisters = parent.children if parent is not None else [t]
    i = next(j for j, s in enumerate(sisters) if s is t)
    if tag == "TO":
        if (p == "CONJP" and any(s.label == "VB" for s in sisters)) or (
                p == "VP" and (len(sisters) == 1 or any(s.category == "VP" for s in sisters))):
            return "PART"
        return "ADP"
    if tag.startswith("VB"):
        return "AUX" if relation in _AUX_RELATIONS else "VERB"
    if tag == "IN":
        if (p == "SBAR" and any(s.category in ("S", "FRAG", "SBAR", "SINV") for s in sisters[i + 1:])) or (
                p == "PP" and i + 1 < len(sisters) and sisters[i + 1].category in ("SBAR", "S")):
            return "SCONJ"
        return "ADP"
    if tag == "NN":
        if "%" in word:
            return "SYM"
        return "PRON" if word in _INDEFINITES else "NOUN"
    if tag == "RB":
        if p in ("VP", "SINV", "SQ", "FRAG", "ADVP") and word in _NEGATIONS:
            return "PART"
        return "ADV"
    if tag == "DT":
        if p == "NP" and len(sisters) == 1 and word in ("this", "that", "those", "these"):
            return "PRON"
        return "DET"
    if tag == "WDT":
        if p in ("WHNP", "NP") and len(sisters) == 1 and word in ("that", "which"):
            return "PRON"
        if p == "SBAR" and word in ("that", "which"):
            return "SCONJ"
        return "DET"
    if tag.startswith("JJ"):
        return "ADJ"
    return _TABLE.get(tag, "X")
