"""Penn Treebank tokenization of raw evaluation text, with each token's character span in the raw string.

SyntaxGym and BLiMP sentences are raw text; a model trained on the PTB sees tokens as the treebank has
them. The rules follow the PTB tokenizer (Treebank ``tokenizer.sed``): punctuation split off
(``, ; : ? ! % $ #``, a sentence-final period, ``...``, ``--``), brackets as ``-LRB- -RRB- -LSB- -RSB-
-LCB- -RCB-``, double quotes as `````` and ``''``, clitics split (``did n't``, ``ca n't``, ``wo n't``,
``John 's``, ``they 're``, ``I 'm``, ``we 've``, ``he 'll``, ``she 'd``, ``dogs '``), ``cannot gonna gotta
wanna`` split in two. Commas and colons inside numbers (``1,000``, ``10:30``), periods inside words
(``U.S.``, ``3.5``) and hyphenated words stay whole.

Each token carries ``(start, end)`` offsets into the raw string, so words and SyntaxGym regions are
aligned by characters, never by guessing; a token's text may differ from the raw characters (``"`` ->
``````, ``(`` -> ``-LRB-``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

BRACKETS = {"(": "-LRB-", ")": "-RRB-", "[": "-LSB-", "]": "-RSB-", "{": "-LCB-", "}": "-RCB-"}
_SPLIT_WORDS = {"cannot": 3, "gonna": 3, "gotta": 3, "wanna": 3}  # -> can not, gon na, got ta, wan na
_CLITIC = re.compile(r"(?i)(n't|'s|'m|'d|'re|'ve|'ll)$")
_LEADING = re.compile(r"""\.\.\.|--|"|``|`|'(?!'|(?i:s|m|d|re|ve|ll)\b)|[(\[{$#]""")
_TRAILING = re.compile(r"(\.\.\.|--|\"|''|[)\]},;:?!%])$")
_INNER = re.compile(r"\.\.\.|--|[?!;@#$%&]|,(?!\d)|(?<!\d),|:(?!\d)|(?<!\d):")


@dataclass(frozen=True)
class Token:
    text: str
    start: int
    end: int


def tokenize(text: str) -> list[Token]:
    """PTB tokens of ``text`` with their character spans."""
    chunks = [(m.start(), m.end()) for m in re.finditer(r"\S+", text)]
    tokens: list[Token] = []
    for n, (start, end) in enumerate(chunks):
        tokens.extend(_chunk(text, start, end, final=n == len(chunks) - 1))
    return tokens


def _chunk(text: str, start: int, end: int, final: bool) -> list[Token]:
    head: list[Token] = []
    tail: list[Token] = []
    while start < end:  # opening punctuation, left to right
        m = _LEADING.match(text, start, end)
        if not m:
            break
        head.append(_token(m.group(), start, m.end(), opening=True))
        start = m.end()
    while start < end:  # closing punctuation (and a sentence-final period), right to left
        piece = text[start:end]
        m = _TRAILING.search(piece)
        if m:
            s = start + m.start()
        elif final and piece.endswith(".") and "." not in piece[:-1] and len(piece) > 1:
            s = end - 1  # "U.S." keeps its period: the treebank's abbreviations are single tokens
        elif piece.endswith("'") and len(piece) > 1:
            s = end - 1  # possessive plural or closing single quote
        else:
            break
        tail.insert(0, _token(text[s:end], s, end, opening=False))
        end = s
    return head + _middle(text, start, end) + tail


def _middle(text: str, start: int, end: int) -> list[Token]:
    """Split inner punctuation, clitics and the fused words of the core of a chunk."""
    out: list[Token] = []
    pos = start
    for m in _INNER.finditer(text, start, end):
        if m.start() > pos:
            out.extend(_word(text, pos, m.start()))
        out.append(_token(m.group(), m.start(), m.end(), opening=False))
        pos = m.end()
    if pos < end:
        out.extend(_word(text, pos, end))
    return out


def _word(text: str, start: int, end: int) -> list[Token]:
    word = text[start:end]
    cut = _SPLIT_WORDS.get(word.lower())
    if cut is None:
        m = _CLITIC.search(word)
        cut = m.start() if m and m.start() > 0 else None  # "can't" -> "ca n't", as the treebank has it
    if cut is None:
        return [Token(word, start, end)]
    return [Token(word[:cut], start, start + cut), Token(word[cut:], start + cut, end)]


def _token(piece: str, start: int, end: int, opening: bool) -> Token:
    if piece == '"':
        return Token("``" if opening else "''", start, end)
    if piece == "`" or (piece == "'" and opening):
        return Token("`", start, end)
    return Token(BRACKETS.get(piece, piece), start, end)
