"""The four probing tasks of TG §4.3, read off gold trees: every target is tied to a node of the tree.

Trees are cleaned as the models see them (``tree.clean``: unwrap the root, drop ``-NONE-``, strip function
tags) and must keep their POS tags (preterminals). Two kinds of nodes:

- **words**, in order: the terminals, each with its POS tag (its preterminal's label);
- **constituents**: the nonterminal nodes above the POS level, in **post-order** -- the order in which their
  subtrees are completed, i.e. of the closing nonterminals of the Choe–Charniak sequence, so constituent k
  is the k-th closing nonterminal the model reads (``analysis.features`` relies on this).

Tasks (targets per node, labels as strings, then class ids):

- ``pos`` (Liu et al. 2019): each word -> its POS tag.
- ``grandparent`` (Liu et al. 2019): each constituent -> the label of its grandparent constituent. The root
  and its children have no grandparent and are skipped.
- ``top_constituents`` (Conneau et al. 2018, applied to every subtree as TG §4.3 does): each constituent ->
  the sequence of its immediate children's labels, POS tags for words, e.g. ``NP VP .``. The ``top_k`` most
  frequent sequences of the training targets are classes, everything else is ``OTHER`` (Conneau: 19 + OTHER).
- ``word_content`` (Conneau et al. 2018): ``word_content_k`` target words are the words of frequency ranks
  ``[word_content_start, word_content_start + word_content_k)`` in the probing training set (Conneau: 1000
  mid-frequency words; ranks by count, ties alphabetical); each constituent whose span contains exactly one
  distinct target word (possibly more than once) -> that word. Constituents with none or several are skipped.

Class vocabularies come from the probing training set. A dev label that is not a class becomes ``OTHER``
where the task has it (``top_constituents``); otherwise the target is dropped and counted (``dropped``).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from lightning_modules.data.tree import Tree, clean
from lightning_modules.errors import InputError

TASKS = ("pos", "grandparent", "top_constituents", "word_content")
NODE_KIND = {"pos": "word", "grandparent": "constituent", "top_constituents": "constituent",
             "word_content": "constituent"}
OTHER = "OTHER"


@dataclass(frozen=True)
class Constituent:
    """A nonterminal above the POS level: label, word span [start, end), children's labels, parent index."""

    label: str
    start: int
    end: int
    children: tuple[str, ...]
    parent: int  # index of the parent constituent (post-order), -1 for the root


@dataclass(frozen=True)
class TreeNodes:
    """Words with their POS tags, and constituents in post-order (the order of the closing nonterminals)."""

    words: tuple[str, ...]
    tags: tuple[str, ...]
    constituents: tuple[Constituent, ...]


def tree_nodes(tree: Tree, location: str = "tree") -> TreeNodes:
    """The nodes of a POS-tagged tree (cleaned here; see the module docstring)."""
    tree = clean(tree)
    words: list[str] = []
    tags: list[str] = []
    if tree.is_preterminal:  # a one-word "tree" without any constituent above its tag
        return TreeNodes((tree.children[0],), (tree.label,), ())  # type: ignore[arg-type]
    # iterative post-order: frames of (node, start word, child index); parents are patched when they finish
    done: list[tuple[str, int, int, tuple[str, ...], list[int]]] = []  # label, start, end, children, kids
    frames: list[tuple[Tree, int, list[int]]] = [(tree, 0, [])]
    iters = [iter(tree.children)]
    while frames:
        node, start, kids = frames[-1]
        child = next(iters[-1], None)
        if child is None:
            frames.pop()
            iters.pop()
            labels = tuple(c.label for c in node.children if isinstance(c, Tree))
            done.append((node.label, start, len(words), labels, kids))
            if frames:
                frames[-1][2].append(len(done) - 1)
        elif isinstance(child, str):
            raise InputError(f"word {child!r} has no POS tag (its parent ({node.label} ...) has other "
                             "children); probing needs POS-tagged trees", location)
        elif child.is_preterminal:
            words.append(child.children[0])  # type: ignore[arg-type]
            tags.append(child.label)
        else:
            frames.append((child, len(words), []))
            iters.append(iter(child.children))
    parent = [-1] * len(done)
    for k, (_, _, _, _, kids) in enumerate(done):
        for kid in kids:
            parent[kid] = k
    constituents = tuple(Constituent(label, start, end, children, parent[k])
                         for k, (label, start, end, children, _) in enumerate(done))
    return TreeNodes(tuple(words), tuple(tags), constituents)


@dataclass(frozen=True)
class TaskSettings:
    """Class-set sizes (defaults: Conneau et al. 2018's 19 + OTHER and 1000 words of ranks 2000-2999)."""

    top_k: int = 19
    word_content_k: int = 1000
    word_content_start: int = 2000

    def validate(self) -> TaskSettings:
        for key in ("top_k", "word_content_k"):
            if getattr(self, key) < 1:
                raise InputError(f"must be at least 1 (got {getattr(self, key)!r})", f"probing.{key}")
        if self.word_content_start < 0:
            raise InputError(f"must be >= 0 (got {self.word_content_start!r})", "probing.word_content_start")
        return self


@dataclass
class TaskData:
    """The targets of one task on one split: node ids (sentence, node index) and class ids."""

    task: str
    kind: str  # "word" | "constituent"
    sentence: np.ndarray  # int64 [n]: index of the tree
    node: np.ndarray  # int64 [n]: word or constituent index within its tree
    labels: np.ndarray  # int64 [n]: class ids
    classes: tuple[str, ...]
    dropped: int = 0  # targets whose label is not a class (dev only; tasks without OTHER)

    @property
    def n_classes(self) -> int:
        return len(self.classes)

    def __len__(self) -> int:
        return len(self.labels)


def word_content_targets(nodes: Sequence[TreeNodes], settings: TaskSettings) -> tuple[str, ...]:
    """The target words: frequency ranks [start, start + k) of the words of ``nodes`` (ties alphabetical)."""
    counts = Counter(w for n in nodes for w in n.words)
    ranked = sorted(counts, key=lambda w: (-counts[w], w))
    lo, hi = settings.word_content_start, settings.word_content_start + settings.word_content_k
    if len(ranked) < hi:
        raise InputError(f"word_content needs frequency ranks {lo}..{hi - 1}, but the probing training set "
                         f"has {len(ranked)} distinct words; lower word_content_start or word_content_k",
                         "probing.word_content")
    return tuple(ranked[lo:hi])


def _raw(task: str, nodes: TreeNodes, targets: frozenset[str]) -> list[tuple[int, str]]:
    """(node index, label string) of every target of one tree."""
    cons = nodes.constituents
    if task == "pos":
        return list(enumerate(nodes.tags))
    if task == "grandparent":
        return [(k, cons[cons[c.parent].parent].label) for k, c in enumerate(cons)
                if c.parent >= 0 and cons[c.parent].parent >= 0]
    if task == "top_constituents":
        return [(k, " ".join(c.children)) for k, c in enumerate(cons)]
    out = []
    for k, c in enumerate(cons):
        found = targets.intersection(nodes.words[c.start : c.end])
        if len(found) == 1:
            out.append((k, next(iter(found))))
    return out


def _classes(task: str, train_labels: list[str], settings: TaskSettings, targets: tuple[str, ...]
             ) -> tuple[str, ...]:
    if task == "word_content":
        return targets
    if task == "top_constituents":
        counts = Counter(train_labels)
        top = sorted(counts, key=lambda s: (-counts[s], s))[: settings.top_k]
        return (*top, OTHER)
    return tuple(sorted(set(train_labels)))


def _encode(task: str, split: list[tuple[int, int, str]], classes: tuple[str, ...]) -> TaskData:
    index = {c: i for i, c in enumerate(classes)}
    other = index.get(OTHER) if task == "top_constituents" else None
    kept = [(s, k, index.get(label, other)) for s, k, label in split]
    rows = [r for r in kept if r[2] is not None]
    array = np.asarray(rows, dtype=np.int64).reshape(-1, 3)
    return TaskData(task, NODE_KIND[task], array[:, 0], array[:, 1], array[:, 2], classes,
                    dropped=len(kept) - len(rows))


def build_tasks(train_trees: Sequence[Tree], dev_trees: Sequence[Tree], tasks: Sequence[str] = TASKS,
                settings: TaskSettings | None = None) -> dict[str, tuple[TaskData, TaskData]]:
    """(train, dev) targets of each task; classes from the training trees (see the module docstring)."""
    settings = (settings or TaskSettings()).validate()
    for task in tasks:
        if task not in TASKS:
            raise InputError(f"unknown probing task {task!r} (expected one of {', '.join(TASKS)})", "tasks")
    train_nodes = [tree_nodes(t, f"train tree {i}") for i, t in enumerate(train_trees)]
    dev_nodes = [tree_nodes(t, f"dev tree {i}") for i, t in enumerate(dev_trees)]
    targets = word_content_targets(train_nodes, settings) if "word_content" in tasks else ()
    target_set = frozenset(targets)
    out = {}
    for task in tasks:
        train = [(s, k, label) for s, n in enumerate(train_nodes) for k, label in _raw(task, n, target_set)]
        dev = [(s, k, label) for s, n in enumerate(dev_nodes) for k, label in _raw(task, n, target_set)]
        if not train:
            raise InputError(f"the probing training trees give no {task} targets", f"tasks.{task}")
        classes = _classes(task, [label for _, _, label in train], settings, targets)
        out[task] = (_encode(task, train, classes), _encode(task, dev, classes))
    return out
