"""Constituency trees: an immutable tree type, the bracketed (PTB) reader and writer, walking and building
trees in bracket order (what the action encodings do), and corpus cleaning.

A ``Tree`` is a label and a tuple of children; a child is a ``Tree`` or a terminal ``str``. Preterminals
(POS tags) are trees with a single string child. Trees are hashable and compare by value, so they can be
used as dictionary keys (e.g. deduplicating proposal trees).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from lightning_modules.errors import InputError


@dataclass(frozen=True, slots=True)
class Tree:
    """A constituency tree node."""

    label: str
    children: tuple[Tree | str, ...]

    def __post_init__(self) -> None:
        if not isinstance(self.children, tuple):
            object.__setattr__(self, "children", tuple(self.children))

    # -- structure ---------------------------------------------------------------------------------
    @property
    def is_preterminal(self) -> bool:
        return len(self.children) == 1 and isinstance(self.children[0], str)

    def leaves(self) -> list[str]:
        """Terminals from left to right."""
        out: list[str] = []
        stack: list[Tree | str] = [self]
        while stack:
            node = stack.pop()
            if isinstance(node, str):
                out.append(node)
            else:
                stack.extend(reversed(node.children))
        return out

    def pos(self) -> list[tuple[str, str]]:
        """(word, tag) pairs of the preterminals, left to right."""
        return [(t.children[0], t.label) for t in self.subtrees() if t.is_preterminal]  # type: ignore[misc]

    def subtrees(self) -> Iterator[Tree]:
        """All nodes in pre-order."""
        stack: list[Tree] = [self]
        while stack:
            node = stack.pop()
            yield node
            stack.extend(c for c in reversed(node.children) if isinstance(c, Tree))

    def height(self) -> int:
        """Number of nodes on the longest root-to-terminal path (a preterminal has height 2, as in nltk)."""
        return 1 + max((c.height() if isinstance(c, Tree) else 1) for c in self.children)

    def labels(self) -> list[str]:
        """Labels of all nodes in pre-order."""
        return [t.label for t in self.subtrees()]

    # -- text --------------------------------------------------------------------------------------
    def __str__(self) -> str:
        return to_bracketed(self)

    def __repr__(self) -> str:
        return f"Tree({to_bracketed(self)!r})"


def to_bracketed(tree: Tree | str) -> str:
    """One-line PTB bracketing, e.g. ``(S (NP (DT the) (NN dog)) (VP (VBZ barks)))``."""
    if isinstance(tree, str):
        return tree
    parts: list[str] = []
    _write(tree, parts)
    return "".join(parts)


def _write(tree: Tree, parts: list[str]) -> None:
    parts.append("(" + tree.label)
    for child in tree.children:
        parts.append(" ")
        if isinstance(child, str):
            parts.append(child)
        else:
            _write(child, parts)
    parts.append(")")


# -- bracket order ----------------------------------------------------------------------------------
def bracket_order(tree: Tree) -> Iterator[tuple[Tree | str, bool]]:
    """``(node, False)`` where a node opens, ``(word, False)`` per word and ``(node, True)`` where a node
    closes, left to right; an iterative walk (frames of child iterators), so deep trees cannot overflow."""
    yield tree, False
    frames = [(tree, iter(tree.children))]
    while frames:
        node, kids = frames[-1]
        child = next(kids, None)
        if child is None:
            frames.pop()
            yield node, True
        else:
            yield child, False
            if isinstance(child, Tree):
                frames.append((child, iter(child.children)))


def constituent_spans(tree: Tree) -> list[tuple[int, int]]:
    """``(first, last)`` leaf positions (0-based, inclusive) of every node, preterminals included, in the order
    the nodes close (post-order); an iterative walk like ``bracket_order``."""
    spans: list[tuple[int, int]] = []
    starts: list[int] = []
    words = 0
    for item, closing in bracket_order(tree):
        if isinstance(item, str):
            words += 1
        elif closing:
            spans.append((starts.pop(), words - 1))
        else:
            starts.append(words)
    return spans


def nontrivial_spans(tree: Tree) -> set[tuple[int, int]]:
    """The constituents (first, last) of ``tree`` covering more than one word but not the whole sentence (the
    spans unsupervised-parsing F1 counts and PaLM-S supervises; unary chains give one span)."""
    last = len(tree.leaves()) - 1
    return {(a, b) for a, b in constituent_spans(tree) if a < b and (a, b) != (0, last)}


class TreeBuilder:
    """Builds a tree from bracket-order actions: open a constituent, add a word to it, close it."""

    def __init__(self) -> None:
        self.stack: list[tuple[str, list[Tree | str]]] = []  # the open constituents and their children
        self.root: Tree | None = None

    def open(self, label: str) -> None:
        self.stack.append((label, []))

    def add(self, word: str) -> None:
        self.stack[-1][1].append(word)

    def close(self) -> None:
        label, kids = self.stack.pop()
        node = Tree(label, tuple(kids))
        if self.stack:
            self.stack[-1][1].append(node)
        else:
            self.root = node

    def tree(self, error: str) -> Tree:
        """The tree built, once every opened constituent is closed (``ValueError(error)`` otherwise)."""
        if self.root is None or self.stack:
            raise ValueError(error)
        return self.root


# -- reading ----------------------------------------------------------------------------------------
_TOKEN = re.compile(r"\(|\)|[^\s()]+")


def parse_bracketed(text: str, source: str = "<string>") -> list[tuple[int, Tree]]:
    """Parse every top-level bracketed tree in ``text``; returns ``(line, tree)`` pairs (1-based lines).

    Handles PTB ``.mrg`` files (many trees per file, the ``( (S ...) )`` wrapper with an empty root label)
    and one-tree-per-line files alike. Raises ``InputError`` with ``source:line`` on malformed input:
    unbalanced brackets, a bracket without a label, an empty constituent, text outside brackets.
    """
    trees: list[tuple[int, Tree]] = []
    # stack of (label, children, line) for open brackets
    stack: list[tuple[str | None, list, int]] = []
    line = 1
    pos = 0
    expect_label = False
    for m in _TOKEN.finditer(text):
        line += text.count("\n", pos, m.start())
        pos = m.start()
        tok = m.group()
        if tok == "(":
            if expect_label:  # "((" : the outer bracket has no label (the PTB wrapper when at the root)
                label, children, open_line = stack[-1]
                stack[-1] = ("", children, open_line)
            stack.append((None, [], line))
            expect_label = True
        elif tok == ")":
            if not stack:
                raise InputError("unbalanced brackets: ')' without a matching '('", f"{source}:{line}")
            label, children, open_line = stack.pop()
            if label is None:
                raise InputError("bracket without a label: '()'", f"{source}:{open_line}")
            if not children:
                raise InputError(f"constituent ({label} ...) has no children", f"{source}:{open_line}")
            if label == "" and (stack or len(children) != 1 or isinstance(children[0], str)):
                raise InputError("bracket without a label", f"{source}:{open_line}")
            node = Tree(label, tuple(children))
            expect_label = False
            if stack:
                stack[-1][1].append(node)
            else:
                trees.append((open_line, node))
        else:
            if expect_label:
                label, children, open_line = stack[-1]
                stack[-1] = (tok, children, open_line)
                expect_label = False
            elif stack:
                stack[-1][1].append(tok)
            else:
                raise InputError(f"text outside brackets: {tok!r}", f"{source}:{line}")
    if stack:
        raise InputError("unbalanced brackets: '(' is never closed", f"{source}:{stack[0][2]}")
    return trees


def parse_tree(text: str, source: str = "<string>") -> Tree:
    """Parse exactly one bracketed tree."""
    trees = parse_bracketed(text, source)
    if len(trees) != 1:
        raise InputError(f"expected one tree, found {len(trees)}", f"{source}:1")
    return trees[0][1]


def read_bracketed(path: str | Path) -> list[tuple[int, Tree]]:
    """Read a bracketed treebank file (``.mrg``, one tree per line, optionally ``.gz``); ``(line, tree)``."""
    path = Path(path)
    text = _read_text(path)
    trees = parse_bracketed(text, str(path))
    if not trees:
        raise InputError("no trees found (empty file)", f"{path}:1")
    return trees


def _read_text(path: Path) -> str:
    try:
        if path.suffix == ".gz":
            import gzip

            with gzip.open(path, "rt", encoding="utf-8") as f:
                return f.read()
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError, EOFError) as e:
        raise InputError(f"cannot read file: {e}", str(path)) from None


def write_bracketed(trees: list[Tree], path: str | Path) -> None:
    """Write trees one per line (as EVALB and most tools read them), atomically."""
    from lightning_modules.data.atomic import atomic_write_text

    atomic_write_text(Path(path), "".join(to_bracketed(t) + "\n" for t in trees))


# -- cleaning (Dyer et al. 2016; Choe & Charniak 2016) -----------------------------------------------
_KEEP_LABELS = {"-LRB-", "-RRB-", "-LCB-", "-RCB-", "-NONE-"}


def strip_function_tags(label: str) -> str:
    """``NP-SBJ-1`` -> ``NP``, ``NP=2`` -> ``NP``, ``PRT|ADVP`` -> ``PRT``; ``-LRB-``/``-NONE-`` are kept."""
    if label in _KEEP_LABELS or not label:
        return label
    base = re.split(r"[-=]", label, maxsplit=1)[0]
    base = base.split("|", 1)[0]
    return base or label


def clean(tree: Tree) -> Tree:
    """Corpus cleaning: unwrap the root, drop ``-NONE-`` elements and constituents left empty, strip tags.

    Raises ``InputError`` if nothing overt remains (a tree made only of empty elements).
    """
    root = unwrap_root(tree)
    cleaned = _clean(root)
    if cleaned is None:
        raise InputError("tree has no overt terminals after removing -NONE- elements")
    return cleaned


def unwrap_root(tree: Tree) -> Tree:
    """Remove the PTB wrapper ``( (S ...) )`` and ``(ROOT ...)``/``(TOP ...)`` unary roots."""
    while (tree.label in ("", "ROOT", "TOP") and len(tree.children) == 1
           and isinstance(tree.children[0], Tree)):
        tree = tree.children[0]
    return tree


def _clean(tree: Tree) -> Tree | None:
    if tree.label == "-NONE-":
        return None
    if tree.is_preterminal:
        return tree
    children = []
    for c in tree.children:
        if isinstance(c, str):
            children.append(c)
        else:
            cc = _clean(c)
            if cc is not None:
                children.append(cc)
    if not children:
        return None
    return Tree(strip_function_tags(tree.label), tuple(children))


def drop_pos_tags(tree: Tree) -> Tree:
    """Replace every preterminal by its word: ``(A (B x))`` -> ``(A x)`` (TG / Choe–Charniak input)."""
    if tree.is_preterminal:
        # a lone preterminal as the whole tree keeps its node so the result is still a tree
        return tree
    return Tree(tree.label, tuple(_drop(c) for c in tree.children))


def _drop(node: Tree | str) -> Tree | str:
    if isinstance(node, str):
        return node
    if node.is_preterminal:
        return node.children[0]
    return Tree(node.label, tuple(_drop(c) for c in node.children))


def overt_words(tree: Tree) -> list[str]:
    """Terminals that are not ``-NONE-`` empty elements (the PTB word count convention)."""
    out: list[str] = []
    for t in tree.subtrees():
        for c in t.children:
            if isinstance(c, str) and t.label != "-NONE-":
                out.append(c)
    return out
