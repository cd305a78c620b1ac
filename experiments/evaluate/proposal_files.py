"""Proposal files: N distinct trees per sentence with their log q, written for any proposer, and the sentences
they are drawn for.

The proposals file is JSON lines, one line per sentence in input order (``scorers/tree_files.py`` reads it)::

    {"sentence": k, "trees": ["(S (NP (DT the) (NN cat)) (VP (VBZ meows)))", ...]}

``sentence`` is the 0-based index of the sentence in the input, ``trees`` distinct trees over exactly its words,
most probable first. A proposer that predicts no POS tags writes its trees PTB-style with a preterminal over
every word (``with_tags``): the gold tag when the sentences come from a treebank (EVALB needs tags to delete
punctuation), ``XX`` otherwise. Optionally a second file gives ``{"sentence": k, "logq": [...]}`` (nats, same
order).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from lightning_modules.data.atomic import atomic_write_text
from lightning_modules.data.tree import Tree
from lightning_modules.errors import InputError


@dataclass
class Proposals:
    """Distinct trees of one sentence with their log q, most probable first."""

    words: list[str]
    trees: list[Tree]
    logq: list[float]


PLACEHOLDER_TAG = "XX"


def proposals_jsonl(proposals: Sequence[Proposals], tags: Sequence[Sequence[str]] | None = None) -> str:
    """The proposals file text (see the module doc); ``tags[k]`` are sentence k's POS tags if known."""
    lines = []
    for k, p in enumerate(proposals):
        sentence_tags = tags[k] if tags is not None else [PLACEHOLDER_TAG] * len(p.words)
        trees = [str(with_tags(t, sentence_tags)) for t in p.trees]
        lines.append(json.dumps({"sentence": k, "trees": trees}, ensure_ascii=False))
    return "".join(line + "\n" for line in lines)


def logq_jsonl(proposals: Sequence[Proposals]) -> str:
    """The companion file: ``{"sentence": k, "logq": [...]}`` per sentence, in the trees' order."""
    return "".join(json.dumps({"sentence": k, "logq": p.logq}) + "\n" for k, p in enumerate(proposals))


def write_proposals(path: str | Path, proposals: Sequence[Proposals], tags: Sequence[Sequence[str]] | None = None,
                    logq_path: str | Path | None = None) -> None:
    """Write the proposals file (and the log q file) atomically."""
    atomic_write_text(Path(path), proposals_jsonl(proposals, tags))
    if logq_path is not None:
        atomic_write_text(Path(logq_path), logq_jsonl(proposals))


def read_corpus_sentences(corpus: str, split: str, data_dir: str | None = None
                          ) -> tuple[list[list[str]], list[list[str]], list[Tree]]:
    """Words, POS tags and trees of every sentence of a corpus split, cleaned as for training (no ``-NONE-``)."""
    from lightning_modules.data.corpora import read_split

    _, read = read_split(corpus, split, data_dir=data_dir)
    return [s.words for s in read], [s.tags for s in read], [s.tree for s in read]


def read_sentences(path: str | Path) -> list[list[str]]:
    """One tokenized sentence per line (words separated by spaces); an empty line is an error."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise InputError(f"cannot read sentences: {e}", str(path)) from None
    out = []
    for number, line in enumerate(text.splitlines(), start=1):
        words = line.split()
        if not words:
            raise InputError("empty sentence", f"{path}:{number}")
        out.append(words)
    return out


def with_tags(tree: Tree, tags: Sequence[str]) -> Tree:
    """A POS-free tree with each word put back under its tag (``tags`` in word order), for EVALB.

    EVALB needs preterminals: it deletes punctuation by tag and counts tagging accuracy. Scoring a parser
    that predicts no tags with the gold (or a tagger's) tags is the usual practice.
    """
    if len(tree.leaves()) != len(tags):
        raise ValueError(f"{len(tags)} tags for {len(tree.leaves())} words")
    remaining = iter(tags)

    def walk(node: Tree) -> Tree:
        return Tree(node.label, tuple(walk(c) if isinstance(c, Tree) else Tree(next(remaining), (c,))
                                      for c in node.children))

    return walk(tree)
