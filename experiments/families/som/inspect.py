"""``synbench inspect som``: Γ, its grid labels, the grid view and, given decisions, Algorithm 1's labels.

Input: ``--tree`` is one CoNLL-U sentence (the text of its lines) or one bracketed tree; ``--trees-file`` a
CoNLL-U file or a bracketed treebank (told apart as ``synbench data stats`` does). A CoNLL-U sentence gives Γ
by Fig. 4 (crossed arcs lifted first); a bracketed tree *is* Γ (unary nodes and POS tags are transparent,
n-ary nodes binarized left). One JSON object per sentence:

- ``words``: the words, w_1 … w_T;
- ``tree``: Γ as converted from the dependency tree (relation labels, ``(UPOS word)`` leaves), or the
  bracketed input (cleaned);
- ``gamma``: Γ as the binary tree SOM reads, unlabelled (every node ``X``);
- ``n_slots``: N (``--slots``, default 15 as in the paper's Table 6);
- ``grid_labels``: the slot each word is written into (Fig. 2), ξ_1 = N, clamped at 0;
- ``clamped``: true when Γ is deeper than the memory (some label was clamped; the grid cannot rebuild Γ);
- ``first_sibling``: first_sibling_Γ(i) of Algorithm 1 per word (1-based; null for w_1);
- ``grid``: the grid view, one row per slot from N (first row) down to 0 (the virtual slot below slot 1:
  a word written there composes at once with slot 1), one cell per word: the 1-based span ``[first,
  last]`` of the node held there once that word has been read, or null;
- with ``--decisions θ_1,…,θ_T`` (one slot per word: θ_1 = N, then what the memory mask allows: θ_2 = N − 1,
  θ_t in [max(θ_{t−1} − 1, 0), N − 1]): ``decisions``, ``labels`` (Algorithm 1's ξ_t, the targets of p_t;
  ξ_{t+1} is also the target of p'_t) and ``parse`` (the tree the decisions build, unlabelled).

This is the paper's view of the sentence alone; the model reads ``<s> w_1 … w_T`` under ``((<s> Γ) <eos>)``,
i.e. every slot one lower (``lightning_modules.families.som.encoding``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from lightning_modules.data.dependency import DepTree, parse_conllu, read_conllu
from lightning_modules.data.tree import Tree, clean, parse_tree, read_bracketed, to_bracketed
from lightning_modules.errors import InputError
from lightning_modules.families.som import encoding as som

DEFAULT_SLOTS = 15


def sources(tree: str | None, trees_file: str | None) -> list[tuple[str, Any]]:
    """(location, DepTree or Tree) of ``--tree`` / ``--trees-file``."""
    from lightning_modules.data.corpora import detect_kind

    if tree is not None:
        if tree.lstrip().startswith("("):
            return [("--tree", parse_tree(tree, "--tree"))]
        sentences = parse_conllu(tree, "--tree")
        if len(sentences) != 1:
            raise InputError(f"expected one CoNLL-U sentence, found {len(sentences)}", "--tree")
        return [("--tree", sentences[0][1])]
    path = Path(str(trees_file))
    read = read_conllu if detect_kind(path) == "dependency" else read_bracketed
    return [(f"{path}:{line}", item) for line, item in read(path)]


def record(item: DepTree | Tree, n_slots: int | None, decisions: str | None) -> dict[str, Any]:
    """The JSON object of one sentence (module docstring)."""
    n_slots = DEFAULT_SLOTS if n_slots is None else n_slots
    if n_slots < 2:
        raise InputError("needs at least 2 slots", "--slots")
    if isinstance(item, DepTree):
        tree, words = som.gamma(item), list(item.forms)
    else:
        tree = clean(item)
        words = tree.leaves()
    shape = som.binary_shape(tree)
    slots = som.token_slots(shape, n_slots)
    first = som.first_siblings(shape)
    out: dict[str, Any] = {
        "words": words,
        "tree": to_bracketed(tree),
        "gamma": to_bracketed(som.shape_to_tree(shape, words)),
        "n_slots": n_slots,
        "grid_labels": slots.tolist(),
        "clamped": som.shape_from_slots(slots) != shape,
        "first_sibling": [None if j < 0 else int(j) + 1 for j in first],
        "grid": som.grid(shape, n_slots),
    }
    if decisions is not None:
        theta = parse_decisions(decisions, len(words), n_slots)
        out["decisions"] = theta
        out["labels"] = som.structure_labels(first, theta, n_slots).tolist()
        out["parse"] = to_bracketed(som.shape_to_tree(som.shape_from_slots(theta), words))
    return out


def parse_decisions(text: str, n_words: int, n_slots: int) -> list[int]:
    """``θ_1,…,θ_T``: integers the memory mask allows (module docstring); InputError otherwise."""
    try:
        theta = [int(v) for v in text.split(",")]
    except ValueError:
        raise InputError(f"expected comma-separated integers, got {text!r}", "--decisions") from None
    if len(theta) != n_words:
        raise InputError(f"{len(theta)} decisions for {n_words} words", "--decisions")
    if theta[0] != n_slots:
        raise InputError(f"the first word is written into slot N = {n_slots}, not {theta[0]}", "--decisions")
    for t in range(1, n_words):
        low = n_slots - 1 if t == 1 else max(theta[t - 1] - 1, 0)
        if not low <= theta[t] <= n_slots - 1:
            raise InputError(f"decision {t + 1} is {theta[t]}: the memory mask allows {low}..{n_slots - 1}",
                             "--decisions")
    return theta
