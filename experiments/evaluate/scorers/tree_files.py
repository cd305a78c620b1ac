"""Trees from files for joint models: proposal sets Y' (TG §3.1) and gold treebanks, matched by words.

Proposal files come in two formats, chosen by the file name:

- ``*.jsonl``: one JSON object per line, ``{"sentence": K, "trees": ["(S ...)", "(S ...)", ...]}``, K a
  non-negative integer that no other line uses (the sentence's index in the evaluated set, for people
  reading the file), the trees in the proposer's order (best first, as a parser ranks them). A tree that
  starts with a digit is a dependency tree, one CoNLL-U sentence (a dependency parser's proposals).
- anything else: one tree per line, ``K<TAB>(S ...)``; the lines with the same K form a group.

Blank lines are skipped. Every tree of a group must have the same words (its overt leaves after ``clean``):
that word string is what a sentence is matched on, so the file works for any subset or order of the
evaluated sentences. Groups with the same words are merged (a sentence that occurs twice gets one
proposal set). Trees may carry POS tags or not; the scorer is told which (``pos_tags``). Every malformed
line is an ``InputError`` at ``FILE:LINE``.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from lightning_modules.data.dependency import DepTree, parse_conllu
from lightning_modules.data.json_input import json_line
from lightning_modules.data.tree import Tree, clean, parse_tree, read_bracketed
from lightning_modules.errors import InputError


class ProposalFile:
    """Proposal trees read from ``path``, looked up by a sentence's words."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.name = f"file:{self.path}"
        try:
            text = self.path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as e:
            raise InputError(f"cannot read proposal file: {e}", str(self.path)) from None
        read = _read_jsonl if self.path.suffix == ".jsonl" else _read_tsv
        groups = read(text, str(self.path))
        if not groups:
            raise InputError("no proposal trees (empty file)", f"{self.path}:1")
        self._by_words: dict[tuple[str, ...], list[Tree]] = {}
        for sentence, entries in groups.items():
            words = None
            for line, tree in entries:
                leaves = tuple(_words(tree, f"{self.path}:{line}"))
                if words is None:
                    words = leaves
                elif leaves != words:
                    raise InputError(f"the trees of sentence {sentence} have different words: "
                                     f"{' '.join(leaves)!r} vs {' '.join(words)!r}", f"{self.path}:{line}")
                self._by_words.setdefault(words, []).append(tree)

    def __len__(self) -> int:
        """Number of distinct word strings with proposals."""
        return len(self._by_words)

    @property
    def most(self) -> int:
        """The largest number of trees any sentence has (the N a file gives)."""
        return max(len(trees) for trees in self._by_words.values())

    def __call__(self, sentences: Sequence[Sequence[str]]) -> list[list[Tree]]:
        """The proposal trees of each sentence, in file order; a sentence without proposals is an error."""
        out = []
        for k, words in enumerate(sentences):
            trees = self._by_words.get(tuple(words))
            if trees is None:
                shown = " ".join(words)
                raise InputError(f"no proposal trees for sentence {k}: {shown[:80]!r}", str(self.path))
            out.append(list(trees))
        return out


def _words(tree: Tree | DepTree, location: str) -> list[str]:
    if isinstance(tree, DepTree):
        return list(tree.forms)
    try:
        return clean(tree).leaves()
    except InputError as e:
        raise InputError(e.message, location) from None


def _tree(text: object, location: str) -> Tree | DepTree:
    if not isinstance(text, str):
        raise InputError(f"a tree must be a string, not {type(text).__name__}", location)
    if text[:1].isdigit():  # a dependency tree: one sentence in CoNLL-U
        parsed = parse_conllu(text, location)
        if len(parsed) != 1:
            raise InputError(f"a CoNLL-U tree must hold one sentence, not {len(parsed)}", location)
        return parsed[0][1]
    try:
        return parse_tree(text, location)
    except InputError as e:
        raise InputError(e.message, location) from None


def _read_jsonl(text: str, source: str) -> dict[int, list[tuple[int, Tree]]]:
    groups: dict[int, list[tuple[int, Tree]]] = {}
    for line_no, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        location = f"{source}:{line_no}"
        row = json_line(line, location)
        if not isinstance(row, dict) or set(row) != {"sentence", "trees"}:
            raise InputError('expected an object with exactly the keys "sentence" and "trees"', location)
        sentence, trees = row["sentence"], row["trees"]
        if not isinstance(sentence, int) or isinstance(sentence, bool) or sentence < 0:
            raise InputError(f'"sentence" must be a non-negative integer, not {sentence!r}', location)
        if sentence in groups:
            raise InputError(f"sentence {sentence} is listed twice", location)
        if not isinstance(trees, list) or not trees:
            raise InputError('"trees" must be a non-empty list of bracketed trees', location)
        groups[sentence] = [(line_no, _tree(t, location)) for t in trees]
    return groups


def _read_tsv(text: str, source: str) -> dict[int, list[tuple[int, Tree]]]:
    groups: dict[int, list[tuple[int, Tree]]] = {}
    for line_no, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        location = f"{source}:{line_no}"
        index, tab, tree_text = line.partition("\t")
        if not tab or not index.strip().isdigit():
            raise InputError("expected 'SENTENCE<TAB>(TREE)' with a non-negative integer SENTENCE", location)
        groups.setdefault(int(index), []).append((line_no, _tree(tree_text, location)))
    return groups


class GoldTrees:
    """A bracketed treebank (``.mrg`` or one tree per line) as a tree source: each sentence's gold tree.

    Sentences are matched by their words; when two trees have the same words, the first one is used.
    """

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.name = f"gold:{self.path}"
        self._by_words: dict[tuple[str, ...], Tree] = {}
        for line, tree in read_bracketed(self.path):
            self._by_words.setdefault(tuple(_words(tree, f"{self.path}:{line}")), tree)

    def __call__(self, sentences: Sequence[Sequence[str]]) -> list[list[Tree]]:
        out = []
        for k, words in enumerate(sentences):
            tree = self._by_words.get(tuple(words))
            if tree is None:
                raise InputError(f"no gold tree for sentence {k}: {' '.join(words)[:80]!r}", str(self.path))
            out.append([tree])
        return out
