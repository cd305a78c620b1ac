"""RNNG action sequences (Dyer et al. 2016; the batched fixed-stack RNNG of Noji & Oseki 2021), pure Python.

A tree becomes a sequence of actions over its words: **top-down** ``NT(X)`` opens a constituent, ``SHIFT``
generates the next word, ``REDUCE`` closes the innermost open constituent; **in-order** (Liu & Zhang 2017)
shifts a constituent's first child before its ``NT(X)`` and ends with ``FINISH``. Words are shifted, never
their POS tags: a preterminal ``(TAG word)`` and a bare word are one ``SHIFT`` each, so a tree with or
without POS tags gives the same actions (``pos_tags`` says which a tree is: in a tree without them, ``(NP x)``
is a constituent).

The ids follow aistairc/rnng-pytorch's ``action_dict.py``: ``<pad>`` 0, ``SHIFT`` 1, ``REDUCE`` 2, (in-order
``FINISH`` 3,) then ``NT(X)`` for the sorted nonterminal labels. Words map to ids as its ``preprocess.py``
does with ``--unkmethod berkeleyrule`` (the README's PTB setting): ``<pad>`` 0, then the unknown-word
classes of all training words (``berkeley_class``, the simplified Berkeley rule of its ``utils.py``), then
the training words kept by ``--vocabminfreq`` (or the ``--vocabsize`` most frequent), in first-occurrence
order; an unseen class falls back to ``<unk>``. Unlike the official code, the classes are sorted (the
official order is a Python ``set``'s, which changes from run to run) and ``<unk>`` is always present.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from lightning_modules.data.tree import Tree
from lightning_modules.errors import InputError

TOP_DOWN, IN_ORDER = "top_down", "in_order"
STRATEGIES = (TOP_DOWN, IN_ORDER)
PAD, SHIFT, REDUCE, FINISH = "<pad>", "SHIFT", "REDUCE", "FINISH"
UNK = "<unk>"
_NT = re.compile(r"^NT\((.+)\)$")


def nt(label: str) -> str:
    """The action that opens a constituent labelled ``label``."""
    return f"NT({label})"


def nt_label(action: str) -> str | None:
    """The label an ``NT(X)`` action opens; None for any other action."""
    match = _NT.match(action)
    return match.group(1) if match else None


# -- trees -> actions ---------------------------------------------------------------------------------------
def _is_shift(node: Tree | str, pos_tags: bool) -> bool:
    return isinstance(node, str) or (pos_tags and node.is_preterminal)


def top_down_actions(tree: Tree, pos_tags: bool = True) -> list[str]:
    """Pre-order actions: ``NT(X)`` children ``REDUCE`` per constituent, ``SHIFT`` per word (a preterminal is
    a word when ``pos_tags``; else only bare words are)."""
    out: list[str] = []

    def walk(node: Tree | str) -> None:
        if _is_shift(node, pos_tags):
            out.append(SHIFT)
            return
        out.append(nt(node.label))
        for child in node.children:
            walk(child)
        out.append(REDUCE)

    walk(tree)
    return out


def in_order_actions(tree: Tree, pos_tags: bool = True) -> list[str]:
    """In-order actions: first child, ``NT(X)``, the other children, ``REDUCE``; ``FINISH`` last."""
    out: list[str] = []

    def walk(node: Tree | str) -> None:
        if _is_shift(node, pos_tags):
            out.append(SHIFT)
            return
        first, *rest = node.children
        walk(first)
        out.append(nt(node.label))
        for child in rest:
            walk(child)
        out.append(REDUCE)

    walk(tree)
    return [*out, FINISH]


def tree_actions(tree: Tree, strategy: str = TOP_DOWN, pos_tags: bool = True) -> list[str]:
    """The action sequence of ``tree`` in the given order (``top_down`` or ``in_order``); ``pos_tags``: the
    tree's preterminals are POS tags (the official input), else every node is a constituent."""
    if strategy == TOP_DOWN:
        return top_down_actions(tree, pos_tags)
    if strategy == IN_ORDER:
        return in_order_actions(tree, pos_tags)
    raise InputError(f"must be one of {', '.join(STRATEGIES)}, not {strategy!r}", "strategy")


def nonterminals(trees: Iterable[Tree], pos_tags: bool = True) -> list[str]:
    """The sorted labels of the constituents of ``trees`` (not the preterminals when ``pos_tags``)."""
    labels: set[str] = set()
    for tree in trees:
        labels.update(node.label for node in tree.subtrees() if not (pos_tags and node.is_preterminal))
    return sorted(labels)


# -- actions -> trees ---------------------------------------------------------------------------------------
def actions_tree(actions: Sequence[str], words: Sequence[str], tags: Sequence[str] | None = None,
                 strategy: str = TOP_DOWN, location: str = "actions") -> Tree:
    """The tree of an action sequence over ``words`` (preterminals ``(TAG word)`` when ``tags`` are given).

    Raises ``InputError`` naming ``location`` when the actions are not one well-formed tree over the words.
    """
    if strategy not in STRATEGIES:
        raise InputError(f"must be one of {', '.join(STRATEGIES)}, not {strategy!r}", "strategy")
    stack: list[Any] = []  # finished nodes (Tree | str) and open constituents ([label, children])
    pointer = 0

    def bad(message: str, step: int) -> InputError:
        return InputError(f"{message} (action {step}: {actions[step] if step < len(actions) else 'end'})",
                          location)

    for step, action in enumerate(actions):
        label = nt_label(action)
        if action == SHIFT:
            if pointer >= len(words):
                raise bad("SHIFT past the last word", step)
            word = words[pointer]
            stack.append(Tree(tags[pointer], (word,)) if tags is not None else word)
            pointer += 1
        elif label is not None:
            if strategy == IN_ORDER:
                if not stack or isinstance(stack[-1], list):
                    raise bad("NT needs a finished left corner on the stack", step)
                stack.insert(len(stack) - 1, [label])
            else:
                stack.append([label])
        elif action == REDUCE:
            children: list[Any] = []
            while stack and not isinstance(stack[-1], list):
                children.append(stack.pop())
            if not stack or not children:
                raise bad("REDUCE without an open constituent with children", step)
            opened = stack.pop()
            stack.append(Tree(opened[0], tuple(reversed(children))))
        elif action == FINISH and strategy == IN_ORDER:
            if step != len(actions) - 1:
                raise bad("FINISH before the end", step)
        else:
            raise bad("not an action of this order", step)
    if strategy == IN_ORDER and (not actions or actions[-1] != FINISH):
        raise bad("in-order actions end with FINISH", len(actions))
    if pointer != len(words) or len(stack) != 1 or not isinstance(stack[0], Tree):
        raise bad(f"not one finished tree over the {len(words)} words", len(actions))
    return stack[0]


def max_stack_size(actions: Sequence[str], strategy: str = TOP_DOWN) -> int:
    """The most stack elements (words, open nonterminals, finished constituents) the actions hold at once."""
    depth, most, open_at = 0, 0, []
    for action in actions:
        if action == SHIFT:
            depth += 1
        elif nt_label(action) is not None:
            if strategy == IN_ORDER:  # the left corner moves above the nonterminal: one more element
                open_at.append(depth - 1)
            else:
                open_at.append(depth)
            depth += 1
        elif action == REDUCE:
            depth = open_at.pop() + 1
        most = max(most, depth)
    return most


# -- ids ---------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class ActionDict:
    """Action strings <-> ids as the official ``TopDownActionDict`` / ``InOrderActionDict``."""

    nonterminals: tuple[str, ...]
    strategy: str = TOP_DOWN
    i2a: tuple[str, ...] = field(init=False)
    a2i: dict[str, int] = field(init=False, compare=False)

    def __post_init__(self) -> None:
        if self.strategy not in STRATEGIES:
            raise InputError(f"must be one of {', '.join(STRATEGIES)}, not {self.strategy!r}", "strategy")
        fixed = (PAD, SHIFT, REDUCE) + ((FINISH,) if self.strategy == IN_ORDER else ())
        object.__setattr__(self, "i2a", fixed + tuple(nt(x) for x in self.nonterminals))
        object.__setattr__(self, "a2i", {a: i for i, a in enumerate(self.i2a)})

    padding_idx = 0
    shift_id = 1
    reduce_id = 2

    @property
    def finish_id(self) -> int:
        """The id that ends a sentence: ``FINISH`` (in-order) or the last ``REDUCE`` (top-down)."""
        return 3 if self.strategy == IN_ORDER else self.reduce_id

    @property
    def nt_begin(self) -> int:
        """The id of the first ``NT(X)``."""
        return 4 if self.strategy == IN_ORDER else 3

    def __len__(self) -> int:
        return len(self.i2a)

    def to_ids(self, actions: Sequence[str], location: str = "actions") -> list[int]:
        """Ids of ``actions``; an unknown nonterminal is an ``InputError`` naming ``location``."""
        out = []
        for action in actions:
            if action not in self.a2i:
                raise InputError(f"unknown action {action!r} (the model's nonterminals: "
                                 f"{', '.join(self.nonterminals)})", location)
            out.append(self.a2i[action])
        return out

    def to_actions(self, ids: Iterable[int]) -> list[str]:
        """Action strings of ids."""
        return [self.i2a[i] for i in ids]

    def to_json(self) -> dict[str, Any]:
        return {"nonterminals": list(self.nonterminals), "strategy": self.strategy}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ActionDict:
        return cls(tuple(data["nonterminals"]), data.get("strategy", TOP_DOWN))


def berkeley_class(word: str) -> str:
    """The unknown-word class of rnng-pytorch's ``--unkmethod berkeleyrule`` (``<unk>``, ``<cunkly>``, ...):
    a capital first letter, digits at both ends, then the first matching suffix or prefix rule."""
    last = len(word) - 1
    cls = "unk"
    if word[0].isupper():
        cls = "c" + cls
    if word[0].isdigit() and word[last].isdigit():
        return f"<{cls}n>"
    if last <= 2:
        return f"<{cls}>"
    for suffix, mark in (("ing", "ing"), ("ed", "ed"), ("ly", "ly"), ("s", "s"), ("est", "est"), ("er", "ER"),
                         ("ion", "ion"), ("ory", "ory")):
        if word.endswith(suffix):
            return f"<{cls}{mark}>"
    if word.startswith("un"):
        return f"<un{cls}>"
    if word.endswith("al"):
        return f"<{cls}al>"
    for ch in word[:last]:
        if ch in "-.":
            return f"<{cls}{ch}>"
    return f"<{cls}>"


@dataclass(frozen=True)
class WordDict:
    """Words <-> ids as the official ``Vocabulary`` with ``unkmethod`` ``berkeleyrule`` or ``unk``."""

    i2w: tuple[str, ...]
    unkmethod: str = "berkeleyrule"
    w2i: dict[str, int] = field(init=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "w2i", {w: i for i, w in enumerate(self.i2w)})

    @classmethod
    def build(cls, train_words: Iterable[str], min_count: int = 2, max_size: int = 0,
              unkmethod: str = "berkeleyrule") -> WordDict:
        """The vocabulary of the training words (first-occurrence order; ``min_count`` > 0 wins over
        ``max_size``, as ``--vocabminfreq`` over ``--vocabsize``)."""
        if unkmethod not in ("berkeleyrule", "unk"):
            raise InputError(f"must be berkeleyrule or unk, not {unkmethod!r}", "data.unkmethod")
        counts = Counter(train_words)  # insertion order = first occurrence
        specials = sorted({berkeley_class(w) for w in counts} | {UNK}) if unkmethod == "berkeleyrule" else [UNK]
        if min_count:
            kept = [w for w, c in counts.items() if c >= min_count]
        elif 0 < max_size < len(counts):
            kept = [w for w, _ in sorted(counts.items(), key=lambda wc: -wc[1])[:max_size]]
        else:
            kept = list(counts)
        return cls((PAD, *specials, *kept), unkmethod)

    def __len__(self) -> int:
        return len(self.i2w)

    def token(self, word: str) -> str:
        """The vocabulary entry ``word`` is read as: itself, its unknown class, or ``<unk>``."""
        if word in self.w2i:
            return word
        cls = berkeley_class(word) if self.unkmethod == "berkeleyrule" and word else UNK
        return cls if cls in self.w2i else UNK

    def id(self, word: str) -> int:
        return self.w2i[self.token(word)]

    def encode(self, words: Iterable[str]) -> list[int]:
        return [self.id(w) for w in words]

    def is_unknown(self, word: str) -> bool:
        return word not in self.w2i

    def to_json(self) -> dict[str, Any]:
        return {"i2w": list(self.i2w), "unkmethod": self.unkmethod}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> WordDict:
        return cls(tuple(data["i2w"]), data.get("unkmethod", "berkeleyrule"))


@dataclass(frozen=True, eq=False)
class Example:
    """One sentence as the model reads it: word ids and action ids (and the stack size it needs)."""

    token_ids: tuple[int, ...]
    action_ids: tuple[int, ...]
    stack_size: int

    def __len__(self) -> int:
        return len(self.action_ids)


def encode(tree: Tree, words: WordDict, actions: ActionDict, location: str = "tree",
           pos_tags: bool = False) -> Example:
    """A tree (without POS tags unless ``pos_tags``) as word ids and action ids in the dictionary's order."""
    sequence = tree_actions(tree, actions.strategy, pos_tags)
    return Example(tuple(words.encode(tree.leaves())), tuple(actions.to_ids(sequence, location)),
                   max_stack_size(sequence, actions.strategy))
