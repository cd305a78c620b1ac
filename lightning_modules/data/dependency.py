"""Dependency trees and CoNLL-U I/O.

A ``DepTree`` holds the syntactic words of one sentence (the integer-ID lines of CoNLL-U) with 1-based
heads (0 = root). Multiword-token lines (``3-4``) and empty nodes (``8.1``) are kept verbatim so the writer
reproduces the file, as UD defines them: neither is a syntactic word, neither takes part in the tree.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from pathlib import Path

from lightning_modules.errors import InputError

_DIGITS = re.compile(r"[0-9]+").fullmatch

COLUMNS = ("id", "form", "lemma", "upos", "xpos", "feats", "head", "deprel", "deps", "misc")


@dataclass(frozen=True, slots=True)
class DepTree:
    """One sentence of syntactic words with heads (1-based; 0 is the root)."""

    forms: tuple[str, ...]
    heads: tuple[int, ...]
    deprels: tuple[str, ...]
    upos: tuple[str, ...] = ()
    xpos: tuple[str, ...] = ()
    lemmas: tuple[str, ...] = ()
    feats: tuple[str, ...] = ()
    deps: tuple[str, ...] = ()
    misc: tuple[str, ...] = ()
    comments: tuple[str, ...] = ()
    # verbatim rows of multiword tokens ("3-4") and empty nodes ("8.1"), 10 columns each
    extra_rows: tuple[tuple[str, ...], ...] = field(default=())

    def __len__(self) -> int:
        return len(self.forms)

    def children(self) -> list[list[int]]:
        """Dependents of every position 0..n (0 = the artificial root), in word order."""
        out: list[list[int]] = [[] for _ in range(len(self.forms) + 1)]
        for d, h in enumerate(self.heads, start=1):
            out[h].append(d)
        return out

    def is_projective(self) -> bool:
        """True when no arc crosses another (each word between a head and its dependent is its descendant)."""
        return not non_projective_arcs(self)

    @property
    def text(self) -> str:
        for c in self.comments:
            if c.startswith("# text = "):
                return c[len("# text = ") :]
        return " ".join(self.forms)


def non_projective_arcs(tree: DepTree) -> list[tuple[int, int]]:
    """Arcs ``(head, dependent)`` that are crossed by another arc (1-based, head 0 = root)."""
    arcs = [(h, d) for d, h in enumerate(tree.heads, start=1)]
    bad = []
    for h, d in arcs:
        lo, hi = min(h, d), max(h, d)
        for h2, d2 in arcs:
            if (h2, d2) == (h, d):
                continue
            a, b = min(h2, d2), max(h2, d2)
            if (lo < a < hi and not lo <= b <= hi) or (lo < b < hi and not lo <= a <= hi):
                bad.append((h, d))
                break
    return bad


def projectivize(tree: DepTree) -> DepTree:
    """The tree with its non-projective arcs lifted until it is projective (Nivre & Nilsson 2005): while some
    arc h -> d spans a word that h does not dominate, the shortest such arc (leftmost on ties) moves d to h's
    head. Only heads change; a projective tree is returned as it is."""
    heads = [0, *tree.heads]  # index = word; heads[0] is unused
    while True:
        bad = [(abs(h - d), d) for d, h in enumerate(heads) if d and h and not _covers(heads, h, d)]
        if not bad:
            break
        _, d = min(bad)
        heads[d] = heads[heads[d]]
    if tuple(heads[1:]) == tree.heads:
        return tree
    return replace(tree, heads=tuple(heads[1:]))


def _covers(heads: list[int], h: int, d: int) -> bool:
    """Whether h dominates every word strictly between h and d."""
    for w in range(min(h, d) + 1, max(h, d)):
        a = w
        while a and a != h:
            a = heads[a]
        if a != h:
            return False
    return True


def require_projective(tree: DepTree, location: str | None = None) -> None:
    """Raise ``InputError`` naming the first crossing arc when the tree is non-projective."""
    bad = non_projective_arcs(tree)
    if bad:
        h, d = bad[0]
        raise InputError(
            f"non-projective dependency tree: arc {h} -> {d} ({tree.forms[d - 1]!r}) crosses another arc; "
            "this transition system needs projective trees",
            location,
        )


# -- reading ----------------------------------------------------------------------------------------
def parse_conllu(text: str, source: str = "<string>") -> list[tuple[int, DepTree]]:
    """Parse CoNLL-U text into ``(first line, DepTree)`` pairs; errors carry ``source:line``."""
    out: list[tuple[int, DepTree]] = []
    block: list[tuple[int, str]] = []
    lines = text.split("\n")
    for i, raw in enumerate(lines, start=1):
        line = raw.rstrip("\r")
        if line.strip() == "":
            if block:
                out.append((block[0][0], _parse_sentence(block, source)))
                block = []
        else:
            block.append((i, line))
    if block:
        out.append((block[0][0], _parse_sentence(block, source)))
    return out


def _parse_sentence(block: list[tuple[int, str]], source: str) -> DepTree:
    comments: list[str] = []
    words: list[tuple[int, list[str]]] = []
    extra: list[tuple[str, ...]] = []
    for lineno, line in block:
        if line.startswith("#"):
            if words or extra:
                raise InputError("comment line inside a sentence", f"{source}:{lineno}")
            comments.append(line)
            continue
        cols = line.split("\t")
        if len(cols) != 10:
            raise InputError(f"expected 10 tab-separated columns, found {len(cols)}", f"{source}:{lineno}")
        wid = cols[0]
        if "-" in wid or "." in wid:
            if not _valid_range_or_empty(wid):
                raise InputError(f"bad ID {wid!r}", f"{source}:{lineno}")
            extra.append(tuple(cols))
            continue
        if not _DIGITS(wid) or int(wid) != len(words) + 1:
            raise InputError(f"bad ID {wid!r}: expected {len(words) + 1}", f"{source}:{lineno}")
        words.append((lineno, cols))
    if not words:
        raise InputError("sentence without words", f"{source}:{block[0][0]}")
    n = len(words)
    heads: list[int] = []
    for lineno, cols in words:
        h = cols[6]
        if not _DIGITS(h) or int(h) > n:
            raise InputError(f"bad HEAD {h!r} (sentence has {n} words)", f"{source}:{lineno}")
        if int(h) == int(cols[0]):
            raise InputError(f"word {cols[0]} is its own HEAD", f"{source}:{lineno}")
        heads.append(int(h))
    _check_tree(heads, words, source)
    col = list(zip(*(c for _, c in words)))
    return DepTree(
        forms=col[1], heads=tuple(heads), deprels=col[7], upos=col[3], xpos=col[4], lemmas=col[2],
        feats=col[5], deps=col[8], misc=col[9], comments=tuple(comments), extra_rows=tuple(extra),
    )


def _valid_range_or_empty(wid: str) -> bool:
    sep = "-" if "-" in wid else "."
    a, _, b = wid.partition(sep)
    return bool(_DIGITS(a)) and bool(_DIGITS(b))


def _check_tree(heads: list[int], words: list[tuple[int, list[str]]], source: str) -> None:
    roots = [i for i, h in enumerate(heads) if h == 0]
    if len(roots) != 1:
        where = words[roots[1]][0] if len(roots) > 1 else words[0][0]
        raise InputError(f"sentence must have exactly one root (HEAD 0), found {len(roots)}",
                         f"{source}:{where}")
    state = [0] * len(heads)  # 0 unknown, 1 on path, 2 reaches root
    for start in range(len(heads)):
        path = []
        i = start
        while i >= 0 and state[i] == 0:
            state[i] = 1
            path.append(i)
            i = heads[i] - 1
        if i >= 0 and state[i] == 1:
            raise InputError(f"cycle in HEAD column through word {i + 1}", f"{source}:{words[i][0]}")
        for j in path:
            state[j] = 2


def read_conllu(path: str | Path) -> list[tuple[int, DepTree]]:
    """Read a CoNLL-U file (optionally ``.gz``); ``(line, DepTree)`` pairs."""
    from lightning_modules.data.tree import _read_text

    path = Path(path)
    trees = parse_conllu(_read_text(path), str(path))
    if not trees:
        raise InputError("no sentences found (empty file)", f"{path}:1")
    return trees


# -- writing ----------------------------------------------------------------------------------------
def to_conllu(tree: DepTree) -> str:
    """CoNLL-U text of one sentence, ending with the blank separator line."""
    rows: list[str] = list(tree.comments)
    extra_before: dict[int, list[tuple[str, ...]]] = {}
    for r in tree.extra_rows:
        if "-" in r[0]:
            key = int(r[0].split("-")[0]) * 2 - 1  # before word k
        else:
            key = int(r[0].split(".")[0]) * 2  # after word k
        extra_before.setdefault(key, []).append(r)
    for i in range(len(tree.forms) + 1):
        if i > 0:
            rows.extend("\t".join(r) for r in extra_before.get(2 * i - 1, []))
            rows.append(
                "\t".join(
                    (str(i), tree.forms[i - 1], _col(tree.lemmas, i), _col(tree.upos, i), _col(tree.xpos, i),
                     _col(tree.feats, i), str(tree.heads[i - 1]), tree.deprels[i - 1], _col(tree.deps, i),
                     _col(tree.misc, i))
                )
            )
        rows.extend("\t".join(r) for r in extra_before.get(2 * i, []))
    return "\n".join(rows) + "\n\n"


def _col(values: tuple[str, ...], i: int) -> str:
    return values[i - 1] if values else "_"

