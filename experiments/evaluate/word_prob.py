"""Word probabilities from subword pieces: the named conventions of ``--word-prob`` (recorded in every result).

- ``sum-pieces`` (the default; what the five papers and minicons do): log p(w | context) is the sum of the
  log-probabilities of w's pieces. For a word that is one token this is the only convention there is.
- ``corrected`` (Pimentel & Meister, EMNLP 2024, "How to Compute the Probability of a Word"): with a tokenizer
  whose pieces mark the *beginning* of a word (GPT-2's ``Ġ``, SentencePiece's ``▁``), the pieces of w do not
  say that w has ended (``the`` is a prefix of ``these``), and the probability that w starts at all was already
  spent by the previous word's end. With B = the pieces that begin a word, plus the end of the text::

      log p(w_i | w_<i) = Σ_j log p(s_j | s_<j) + log P(B | s_<j, s(w_i)) - log P(B | s_<j)

  (the second term: a word boundary follows w_i; the third: one came where w_i starts). A tokenizer that does
  not mark the first word of a text (GPT-2 reads ``The dog``, not `` The dog``) divides the first word by the
  probability of a first piece that is *not* a word beginning instead (the ``wordsprobability`` package's
  ``bos_fix``). The words' values telescope: their sum is log p(pieces of x) + log P(B | x) minus the first
  word's denominator.

The model-specific part (which pieces begin a word, the masses P(B | ·) at every position) is the scorer's;
this module holds the names and the arithmetic, so that every scorer applies the same formula.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from lightning_modules.errors import InputError

WORD_PROBS = ("sum-pieces", "corrected")  # the first is the default
CITATION = "Pimentel & Meister 2024"


def method_options(config: dict[str, Any] | None) -> dict[str, str]:
    """The ``word_prob`` option (default ``sum-pieces``) that an exact method declares for a sentence-level
    checkpoint whose terminals are SentencePiece pieces (``data.terminals``); none for word-level vocabularies
    (and documents, scored for their totals only)."""
    data = (config or {}).get("data") or {}
    pieces = data.get("terminals") == "sentencepiece" and data.get("level", "sentence") == "sentence"
    return {"word_prob": WORD_PROBS[0]} if pieces else {}


def boundary_ids(tokens: Sequence[str], mark: str, ends: Sequence[str]) -> list[int]:
    """The set B of a vocabulary (``tokens`` in id order): the ids of the tokens that begin a word (start with
    ``mark``, SentencePiece's ``▁``) and of ``ends`` (the end of the sentence)."""
    return [i for i, token in enumerate(tokens) if token.startswith(mark) or token in ends]


def check(word_prob: str, where: str = "--word-prob") -> str:
    """``word_prob`` if it names a convention, else an ``InputError``."""
    if word_prob not in WORD_PROBS:
        raise InputError(f"unknown word probability convention {word_prob!r}; expected {' or '.join(WORD_PROBS)}",
                         where)
    return word_prob


def meaning(word_prob: str) -> str:
    """What the convention computes, in one line (for the ``#`` lines of an output file)."""
    if word_prob == "sum-pieces":
        return "log p(word) = the sum of its pieces' log-probabilities"
    return (f"{CITATION}: log p(word) = its pieces' log-probabilities + log P(a word boundary follows) - "
            "log P(a word boundary came before it)")


def describe(word_prob: str) -> str:
    """How the convention is named in a headline or description."""
    return "pieces summed" if word_prob == "sum-pieces" else f"word probabilities corrected ({CITATION})"


def corrected_word_logprobs(piece_logprobs: Sequence[float], piece_words: Sequence[int],
                            boundary: Sequence[float], first: float) -> list[float]:
    """Each word's corrected log-probability (natural logs; see the module doc).

    ``piece_logprobs[j]`` = log p(s_j | s_<j); ``piece_words[j]`` = the index of the word piece j belongs to (each
    word has at least one piece, in order); ``boundary[j]`` = log P(B | s_<j) for j = 0 .. n (``boundary[n]``:
    after the last piece); ``first``: the log of the first word's denominator (``boundary[0]`` when the
    tokenizer marks the first word too).
    """
    n = len(piece_logprobs)
    if len(piece_words) != n or len(boundary) != n + 1 or n == 0:
        raise ValueError(f"{n} pieces need as many word indices ({len(piece_words)}) and {n + 1} boundary masses "
                         f"({len(boundary)})")
    starts = [j for j in range(n) if j == 0 or piece_words[j] != piece_words[j - 1]]
    if [piece_words[j] for j in starts] != list(range(len(starts))):
        raise ValueError(f"pieces must cover the words in order, each word at least one piece: {list(piece_words)}")
    ends = [*starts[1:], n]
    return [math.fsum([*piece_logprobs[a:b], boundary[b], -(first if w == 0 else boundary[a])])
            for w, (a, b) in enumerate(zip(starts, ends))]
