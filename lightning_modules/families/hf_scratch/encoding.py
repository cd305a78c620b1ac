"""A sentence as a causal LM reads it: ``<s>`` + every word's terminals, predicting the next token, ``</s>`` last.

The terminals are the string families' (words with Berkeley unknown-word classes, or SentencePiece pieces;
``treebank_sequences.terminal_mapping``), so the standard transformer reads exactly what TXL (terminals)
reads. Ids: ``<pad>`` 0, ``<s>`` 1, ``</s>`` 2, then the terminal tokens. Pure, no torch.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

SPECIALS = ("<pad>", "<s>", "</s>")
PAD, BOS, EOS = range(len(SPECIALS))


@dataclass(frozen=True, eq=False)
class Example:
    """One sentence: ``inputs`` read, ``labels`` predicted at each position (the next token, ``</s>`` last) and
    ``word_index``, the word (0-based) each label belongs to (-1 for ``</s>``)."""

    inputs: np.ndarray
    labels: np.ndarray
    word_index: np.ndarray

    def __len__(self) -> int:
        return len(self.inputs)


def token_list(terminal_tokens: Sequence[str]) -> list[str]:
    """The model's vocabulary: the specials, then the terminal tokens (specials among them dropped)."""
    return [*SPECIALS, *sorted(set(terminal_tokens) - set(SPECIALS))]


def encode(words: Sequence[str], terminals: Callable[[str], Sequence[str]], index: dict[str, int],
           unknown: str | None = None) -> Example:
    """``words`` as ids: each word becomes its terminals (a terminal outside ``index`` becomes ``unknown``)."""
    ids, word_index = [], []
    for k, word in enumerate(words):
        for piece in terminals(word):
            ids.append(index[piece] if piece in index or unknown is None else index[unknown])
            word_index.append(k)
    return Example(np.array([BOS, *ids], dtype=np.int64), np.array([*ids, EOS], dtype=np.int64),
                   np.array([*word_index, -1], dtype=np.int64))
