"""The PaLM encoding: span-selection targets from gold trees (PaLM-S, Eq. 5, Appendix A) and the greedy
top-down parser that turns span scores back into trees (§2.2, Eq. 4).

**Positions.** PaLM reads a stream of sentences, each ``w_0 … w_{n−1} <eos>``. The input token at sentence
position r (``w_r``, or ``<eos>`` at r = n) attends over the spans ending at the previous token w_{r−1}; column
i of its row is the span [r−1−i, r−1] of length i + 1 (the layout of ``layers.span_attention``). A sentence
therefore has n + 1 target rows; row 0 (``w_0``, whose previous token ends the previous sentence) is zero.

**Targets** (Appendix A). Row r marks the gold spans among its m columns — every constituent of the gold tree
except the trivial ones (single words and the whole sentence) — and is normalised to sum to one ("not
necessarily one-hot: multiple spans can end at the same token"); a row without gold span stays zero and adds
nothing to the cross-entropy. The official code's golden rows (reference-impls §4.2) are the same spans; it
lays columns out by start position instead of by length and marks them with decreasing integers.

**Parser** (§2.2). A span [a, b] of two or more words is split into [a, k] and [k+1, b] at the k maximising the
score of the right part alone, s(k+1, b) (Eq. 4 and its footnote: the left part's score is computed before
the right part is seen); the parts are split recursively, down to single words. Ties go to the smallest k
(the longest right part), as the official ``construct_tree``. With s = 1 on the spans of a binary tree and 0
elsewhere it recovers that tree (§3). The result is a binary tree whose nodes are all labelled ``X``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np

from lightning_modules.data.tree import Tree

UNLABELLED = "X"


def span_targets(spans: Iterable[tuple[int, int]], n_words: int, max_span: int) -> np.ndarray:
    """float32[n_words + 1, max_span]: row r's normalised gold selection over the spans ending at word r − 1."""
    rows = np.zeros((n_words + 1, max_span), dtype=np.float32)
    for a, b in spans:
        if not 0 <= a <= b < n_words:
            raise ValueError(f"span ({a}, {b}) outside a sentence of {n_words} words")
        if b - a < max_span:
            rows[b + 1, b - a] = 1.0
    totals = rows.sum(axis=1, keepdims=True)
    return np.divide(rows, totals, out=rows, where=totals > 0)


def greedy_parse(scores: np.ndarray, words: Sequence[str]) -> Tree:
    """Eq. 4 top-down: ``scores[b, i]`` scores the span [b − i, b] (ending at word b, length i + 1).

    Needs ``scores`` of shape at least [n, n] for n words (only i <= b is read).
    """
    n = len(words)
    if n == 0:
        raise ValueError("cannot parse an empty sentence")
    if n == 1:
        return Tree(UNLABELLED, (words[0],))
    split: dict[tuple[int, int], int] = {}
    todo = [(0, n - 1)]
    while todo:
        a, b = todo.pop()
        if a == b:
            continue
        # right parts [k+1, b] for k = a..b−1 have lengths b−a .. 1, i.e. columns b−a−1 .. 0
        right = scores[b, : b - a][::-1]
        k = a + int(np.argmax(right))
        split[a, b] = k
        todo += [(a, k), (k + 1, b)]
    return _build(split, words)


def _build(split: dict[tuple[int, int], int], words: Sequence[str]) -> Tree:
    """The tree of the split points, built bottom-up without recursion."""
    built: dict[tuple[int, int], Tree | str] = {}
    stack: list[tuple[int, int, bool]] = [(0, len(words) - 1, False)]
    while stack:
        a, b, ready = stack.pop()
        if a == b:
            built[a, b] = words[a]
        elif ready:
            k = split[a, b]
            built[a, b] = Tree(UNLABELLED, (built[a, k], built[k + 1, b]))
        else:
            k = split[a, b]
            stack += [(a, b, True), (a, k, False), (k + 1, b, False)]
    root = built[0, len(words) - 1]
    assert isinstance(root, Tree)
    return root
