"""Word-level vocabulary with the Berkeley-parser unknown-word classes (the PTB convention of RNNG and TG).

Training words seen at least ``min_count`` times (default 2) are kept; every other word (a training
singleton or a word never seen) is replaced by its *signature*, a class such as ``UNK-LC-ed`` or
``UNK-INITC-NUM`` built from its shape and suffix (Petrov & Klein 2007; Dyer et al. 2016). TG §3 uses
Dyer et al.'s pre-processed PTB: "unseen words and singletons on the training set are mapped according to a
special set of unknown word symbols as proposed by Petrov and Klein (2007)".

A signature that never occurred in training (a rare shape such as ``UNK-CAPS-NUM-DASH``) falls back to the
plain ``UNK`` token, as RNNG's frozen terminal dictionary does (``termdict.SetUnk("UNK")``).
"""

from __future__ import annotations

import base64
import json
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from lightning_modules.data.json_input import json_document
from lightning_modules.errors import InputError

if TYPE_CHECKING:
    from lightning_modules.data.sentencepiece import SentencePieceModel

UNK = "UNK"
_FORMAT = "synbench.WordVocab"
_VERSION = 1

# Suffixes tried, in order, for words of length >= 5 (after the '-s' rule); first match wins.
_SUFFIXES = ("ed", "ing", "ion", "er", "est", "ly", "ity", "y", "al")


def signature(word: str, known: frozenset[str] | set[str]) -> str:
    """The unknown-word class of ``word``, given the set of known (kept) training words.

    Matches ``unkify`` in Dyer et al.'s RNNG ``get_oracle.py`` / ``get_oracle_gen.py`` (clab/rnng), itself
    a port of the Berkeley parser's ``getSignature`` (unknown level 5, English) without its
    sentence-position condition on ``-INITC``. The reference is Python 2 code over byte strings; for the
    ASCII text of the PTB the result is identical, and other text follows Python 3's Unicode ``str``
    predicates (``isdigit``, ``isalpha``, ``islower``, ``isupper``). ``known`` is only consulted for the
    ``-KNOWNLC`` marker (the lower-cased word is a known word).
    """
    word = word.rstrip()
    if not word:
        return UNK
    num_caps = 0
    has_digit = has_dash = has_lower = False
    for ch in word:
        if ch.isdigit():
            has_digit = True
        elif ch == "-":
            has_dash = True
        elif ch.isalpha():
            if ch.islower():
                has_lower = True
            elif ch.isupper():
                num_caps += 1
    lower = word.lower()
    first = word[0]
    out = UNK
    # shape: capitalisation of the first character, then of the rest
    if first.isupper():
        if num_caps == 1:
            out += "-INITC"
            if lower in known:
                out += "-KNOWNLC"
        else:
            out += "-CAPS"
    elif not first.isalpha() and num_caps > 0:
        out += "-CAPS"
    elif has_lower:
        out += "-LC"
    if has_digit:
        out += "-NUM"
    if has_dash:
        out += "-DASH"
    # suffix: a plural-looking '-s', else (long, dash-free words without a capitalised number) a known suffix
    if lower[-1] == "s" and len(lower) >= 3:
        if lower[-2] not in "siu":
            out += "-s"
    elif len(lower) >= 5 and not has_dash and not (has_digit and num_caps > 0):
        for suffix in _SUFFIXES:
            if lower.endswith(suffix):
                out += "-" + suffix
                break
    return out


class WordVocab:
    """Terminal vocabulary: known training words plus the unknown-word classes seen in training, plus ``UNK``.

    Ids follow the token order: training frequency (after unkification) descending, then the token string,
    so the same training words always give the same ids. ``UNK`` is always present (count 0 if no training
    word fell back to it). Encodings add their own special tokens (padding, ``<s>``, nonterminals) around
    these terminal ids.
    """

    def __init__(self, tokens: list[tuple[str, int]], known_words: Iterable[str], min_count: int):
        self.min_count = min_count
        self.known = frozenset(known_words)
        self.tokens = [t for t, _ in tokens]
        self.counts = [c for _, c in tokens]
        self._ids = {t: i for i, t in enumerate(self.tokens)}
        if len(self._ids) != len(self.tokens):
            raise ValueError("duplicate tokens in vocabulary")
        if UNK not in self._ids:
            raise ValueError(f"vocabulary lacks the fallback token {UNK!r}")
        if not self.known <= self._ids.keys():
            raise ValueError("known words missing from the tokens")

    @classmethod
    def build(cls, train_words: Iterable[str], min_count: int = 2) -> WordVocab:
        """Count ``train_words``; keep words seen ``>= min_count`` times, map the rest to their classes."""
        if min_count < 1:
            raise ValueError(f"min_count must be >= 1, not {min_count}")
        word_counts = Counter(train_words)
        known = frozenset(w for w, c in word_counts.items() if c >= min_count)
        token_counts: Counter[str] = Counter()
        for w, c in word_counts.items():
            token_counts[w if w in known else signature(w, known)] += c
        token_counts.setdefault(UNK, 0)
        ordered = sorted(token_counts.items(), key=lambda tc: (-tc[1], tc[0]))
        return cls(ordered, known, min_count)

    def __len__(self) -> int:
        return len(self.tokens)

    def __contains__(self, token: str) -> bool:
        return token in self._ids

    def unkify(self, word: str) -> str:
        """The token used for ``word``: itself if known, else its class (``UNK`` if the class is unseen)."""
        if word in self.known:
            return word
        cls = signature(word, self.known)
        return cls if cls in self._ids else UNK

    def id(self, word: str) -> int:
        """Id of the token used for ``word``."""
        return self._ids[self.unkify(word)]

    def encode(self, words: Iterable[str]) -> list[int]:
        return [self.id(w) for w in words]

    def token(self, index: int) -> str:
        return self.tokens[index]

    def oov_rate(self, words: Iterable[str]) -> float:
        """Fraction of running words that are not known words (mapped to a class or ``UNK``)."""
        total = unknown = 0
        for w in words:
            total += 1
            unknown += w not in self.known
        if total == 0:
            raise ValueError("oov_rate of an empty word sequence")
        return unknown / total

    # -- serialisation (stored in checkpoints; plain JSON types only) --------------------------------
    def to_dict(self) -> dict:
        return {
            "format": _FORMAT,
            "version": _VERSION,
            "min_count": self.min_count,
            "tokens": [[t, c] for t, c in zip(self.tokens, self.counts)],
            "known_words": sorted(self.known),
        }

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), ensure_ascii=False, separators=(",", ":"))

    @classmethod
    def from_dict(cls, data: object, source: str = "<vocab>") -> WordVocab:
        """Inverse of ``to_dict``; malformed data raises ``InputError`` at ``source``."""
        if not isinstance(data, dict) or data.get("format") != _FORMAT:
            raise InputError(f"not a {_FORMAT} object", source)
        if data.get("version") != _VERSION:
            raise InputError(f"unsupported {_FORMAT} version {data.get('version')!r}", source)
        tokens, known, min_count = data.get("tokens"), data.get("known_words"), data.get("min_count")
        if not (isinstance(min_count, int) and min_count >= 1):
            raise InputError(f"bad min_count {min_count!r}", source)
        if not (isinstance(tokens, list) and all(_is_token_count(p) for p in tokens)):
            raise InputError("'tokens' must be a list of [token, count] pairs", source)
        if not (isinstance(known, list) and all(isinstance(w, str) for w in known)):
            raise InputError("'known_words' must be a list of strings", source)
        try:
            return cls([(t, c) for t, c in tokens], known, min_count)
        except ValueError as e:
            raise InputError(str(e), source) from None

    @classmethod
    def from_json(cls, text: str, source: str = "<vocab>") -> WordVocab:
        return cls.from_dict(json_document(text, source), source)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, WordVocab) and self.to_dict() == other.to_dict()

    def __repr__(self) -> str:
        return f"WordVocab({len(self)} tokens, {len(self.known)} known words, min_count={self.min_count})"


def terminal_vocab(payload: Mapping[str, Any], source: str = "<vocab>") -> WordVocab | SentencePieceModel:
    """The word vocabulary or SentencePiece model (words -> terminals) a checkpoint's vocabulary payload holds."""
    kind = payload.get("terminals")
    if kind == "words":
        return WordVocab.from_dict(payload["words"], source)
    if kind == "sentencepiece":
        from lightning_modules.data.sentencepiece import SentencePieceModel

        return SentencePieceModel.from_bytes(base64.b64decode(payload["sentencepiece"]))
    raise InputError(f"unknown vocabulary kind {kind!r} (words or sentencepiece)", source)


def _is_token_count(pair: object) -> bool:
    return (
        isinstance(pair, list) and len(pair) == 2 and isinstance(pair[0], str)
        and isinstance(pair[1], int) and not isinstance(pair[1], bool) and pair[1] >= 0
    )


# -- token vocabularies of sentence models (<pad>, <s>, <eos>, then the terminals) -------------------------
PAD, SOS, EOS = "<pad>", "<s>", "<eos>"
SPECIALS = (PAD, SOS, EOS)


class TokenVocab:
    """Token strings <-> ids: the three specials, then the terminal tokens."""

    def __init__(self, terminals: Sequence[str]):
        clash = set(SPECIALS) & set(terminals)
        if clash:
            raise InputError(f"terminal tokens clash with special tokens: {sorted(clash)}")
        self.tokens = (*SPECIALS, *terminals)
        self._ids = {t: i for i, t in enumerate(self.tokens)}

    def __len__(self) -> int:
        return len(self.tokens)

    def id(self, token: str) -> int:
        return self._ids[token]

    def __contains__(self, token: object) -> bool:
        return token in self._ids

    def sentence_ids(self, tokens: Sequence[str]) -> np.ndarray:
        """The ids of ``<s> tokens <eos>``, a training sequence."""
        return np.array([self.id(SOS), *(self.id(t) for t in tokens), self.id(EOS)], dtype=np.int64)
