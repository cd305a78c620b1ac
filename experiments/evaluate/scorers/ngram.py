"""Baseline string models as Scorers: an add-k unigram model and interpolated modified Kneser–Ney n-grams.

Both are trained on the training terminals the LMs see: the treebank's words mapped through the word
vocabulary (known words, Berkeley unknown-word classes, ``UNK``), one sentence at a time, each ending in
``</s>``. They predict the vocabulary V = the word vocabulary's tokens plus ``</s>``; scores are exact
natural-log probabilities per word, with log p(</s> | x) as the end-of-sentence term.

**Unigram** (add-k, k = 1 by default): ``p(w) = (c(w) + k) / (N + k |V|)``.

**Interpolated modified Kneser–Ney** (Chen & Goodman 1999, §3; counts as in KenLM). A sentence is
``<s> w1 ... wn </s>`` (one ``<s>``), the history of ``w_i`` is its previous ``order - 1`` tokens cut at
``<s>``. Order ``m`` uses *adjusted counts* a(g): raw counts for the highest order and for n-grams that start
with ``<s>`` (they cannot be extended to the left), otherwise the continuation count N1+(• g), the number of
distinct tokens seen right before g. With ``A(h) = Σ_w a(h w)`` and ``N_j(h)`` the number of words w with
a(h w) = j (j = 1, 2, and 3 or more)::

    p(w | h) = max(a(h w) - D(a(h w)), 0) / A(h) + γ(h) p(w | h'),  γ(h) = (D1 N1(h) + D2 N2(h) + D3+ N3+(h)) / A(h)

where h' drops the oldest token of h; a history never seen (A(h) = 0) backs off entirely, ``p(w | h')``.
The unigram level interpolates with the uniform distribution ``1 / |V|``. The discounts of each order come
from its count-of-counts t_1..t_4 of adjusted counts: ``Y = t1 / (t1 + 2 t2)``, ``D1 = 1 - 2Y t2/t1``,
``D2 = 2 - 3Y t3/t2``, ``D3+ = 3 - 4Y t4/t3``. When a count-of-count is 0 or a discount falls outside
[0, c] (tiny corpora), that order uses KenLM's fallback discounts (0.5, 1.0, 1.5) and the model records it.

Models are saved as JSON (never pickle): the vocabulary, the adjusted counts and the discounts.
"""

from __future__ import annotations

import json
import math
from abc import ABC, abstractmethod
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from experiments.evaluate.scorer import Convention, SentenceScore
from lightning_modules.data.atomic import atomic_write_text
from lightning_modules.data.json_input import json_document
from lightning_modules.data.vocab import WordVocab
from lightning_modules.errors import InputError

BOS, EOS = "<s>", "</s>"
FALLBACK_DISCOUNTS = (0.5, 1.0, 1.5)
_FORMAT = "synbench.NgramModel"
_VERSION = 1

Ngram = tuple[str, ...]


def discounts_from_counts(counts: Iterable[int]) -> tuple[tuple[float, float, float], bool]:
    """Modified KN discounts (D1, D2, D3+) from adjusted counts; second value: whether the fallback was used."""
    t = Counter(c for c in counts if 1 <= c <= 4)
    t1, t2, t3, t4 = (t[j] for j in (1, 2, 3, 4))
    if not (t1 and t2 and t3 and t4):
        return FALLBACK_DISCOUNTS, True
    y = t1 / (t1 + 2 * t2)
    d = (1 - 2 * y * t2 / t1, 2 - 3 * y * t3 / t2, 3 - 4 * y * t4 / t3)
    if not all(0 <= dj <= j for j, dj in enumerate(d, start=1)):
        return FALLBACK_DISCOUNTS, True
    return d, False


def sentence_tokens(words: Sequence[str], vocab: WordVocab) -> list[str]:
    """``<s>``, the words as vocabulary tokens (unknown words as their classes), ``</s>``."""
    return [BOS, *(vocab.unkify(w) for w in words), EOS]


class _WordScorer(ABC):
    """The Scorer protocol over a model's ``logprob(token, history)``."""

    name: str
    convention: Convention
    vocab: WordVocab
    order: int

    @abstractmethod
    def logprob(self, token: str, history: Sequence[str]) -> float:
        """Natural-log probability of ``token`` after ``history`` (the last ``order - 1`` tokens)."""

    def score(self, sentences: Sequence[Sequence[str]]) -> list[SentenceScore]:
        out = []
        for words in sentences:
            tokens = sentence_tokens(words, self.vocab)
            logprobs = [self.logprob(tokens[i], tokens[max(0, i - self.order + 1) : i])
                        for i in range(1, len(tokens))]
            out.append(SentenceScore(
                words=tuple(words), word_logprobs=tuple(logprobs[:-1]), total=math.fsum(logprobs),
                end_logprob=logprobs[-1], unknown_words=sum(w not in self.vocab.known for w in words)))
        return out

    def predicted(self) -> list[str]:
        """The vocabulary V the model distributes probability over."""
        return [*self.vocab.tokens, EOS]


class Unigram(_WordScorer):
    """Add-k unigram model over V (see the module doc)."""

    def __init__(self, vocab: WordVocab, counts: dict[str, int], k: float = 1.0):
        if k <= 0:
            raise InputError(f"add-k smoothing needs k > 0, not {k}", "k")
        self.vocab, self.counts, self.k, self.order = vocab, counts, float(k), 1
        self.name = "unigram" if k == 1 else f"unigram-add{k:g}"
        self.convention = Convention(method="exact", bound=False, end_of_sentence=True)
        self._denominator = sum(counts.values()) + self.k * (len(vocab) + 1)

    @classmethod
    def train(cls, sentences: Iterable[Sequence[str]], vocab: WordVocab, k: float = 1.0) -> Unigram:
        counts: Counter[str] = Counter()
        for words in sentences:
            counts.update(sentence_tokens(words, vocab)[1:])
        return cls(vocab, dict(counts), k)

    def logprob(self, token: str, history: Sequence[str] = ()) -> float:
        return math.log((self.counts.get(token, 0) + self.k) / self._denominator)

    def to_dict(self) -> dict[str, Any]:
        return {"format": _FORMAT, "version": _VERSION, "kind": "unigram", "k": self.k,
                "vocab": self.vocab.to_dict(), "counts": sorted(self.counts.items())}


class KneserNey(_WordScorer):
    """Interpolated modified Kneser–Ney n-gram model (see the module doc)."""

    def __init__(self, vocab: WordVocab, order: int, counts: list[dict[Ngram, int]],
                 discounts: list[tuple[float, float, float]], fallback: list[bool] | None = None):
        if order < 1 or len(counts) != order or len(discounts) != order:
            raise InputError(f"an order-{order} model needs counts and discounts for orders 1..{order}")
        self.vocab, self.order, self.counts = vocab, order, counts
        self.discounts = [tuple(float(x) for x in d) for d in discounts]
        for m, d in enumerate(self.discounts, start=1):
            if len(d) != 3 or not all(0 <= dj <= j for j, dj in enumerate(d, start=1)):
                raise InputError(f"order-{m} discounts must be (D1, D2, D3+) with 0 <= Dj <= j, not {d}",
                                 "discounts")
        self.fallback = fallback or [False] * order
        self.name = f"kn{order}"
        self.convention = Convention(method="exact", bound=False, end_of_sentence=True)
        self._size = len(vocab) + 1
        # per history: A(h) and the discounted mass D1 N1 + D2 N2 + D3+ N3+ that goes to the lower order
        # (integer statistics first, so the result does not depend on the order counts are stored in)
        self._history: list[dict[Ngram, tuple[int, float]]] = []
        for m in range(order):
            d1, d2, d3 = self.discounts[m]
            stats: dict[Ngram, list[int]] = defaultdict(lambda: [0, 0, 0, 0])  # A(h), N1, N2, N3+
            for gram, a in counts[m].items():
                entry = stats[gram[:-1]]
                entry[0] += a
                entry[min(a, 3)] += 1
            self._history.append({h: (a, d1 * n1 + d2 * n2 + d3 * n3) for h, (a, n1, n2, n3) in stats.items()})

    @classmethod
    def train(cls, sentences: Iterable[Sequence[str]], vocab: WordVocab, order: int = 5,
              discounts: Sequence[tuple[float, float, float]] | None = None) -> KneserNey:
        """Count adjusted n-grams of every order; discounts from count-of-counts unless given."""
        if order < 1:
            raise InputError(f"the order must be at least 1, not {order}", "order")
        raw: Counter[Ngram] = Counter()  # the longest n-gram ending at each position (cut at <s>)
        grams: list[set[Ngram]] = [set() for _ in range(order + 1)]  # every n-gram type, by length
        for words in sentences:
            tokens = sentence_tokens(words, vocab)
            for i in range(1, len(tokens)):
                raw[tuple(tokens[max(0, i - order + 1) : i + 1])] += 1
                for m in range(1, min(order, i + 1) + 1):
                    grams[m].add(tuple(tokens[i - m + 1 : i + 1]))
        counts: list[dict[Ngram, int]] = [{} for _ in range(order)]
        for gram, c in raw.items():
            counts[len(gram) - 1][gram] = c
        for m in range(order - 1, 0, -1):  # continuation counts of the orders below the top
            left: Counter[Ngram] = Counter(gram[1:] for gram in grams[m + 1])
            for gram, c in left.items():
                if gram[0] != BOS:
                    counts[m - 1][gram] = c
        found = [discounts_from_counts(counts[m].values()) for m in range(order)]
        if discounts is None:
            return cls(vocab, order, counts, [d for d, _ in found], [f for _, f in found])
        return cls(vocab, order, counts, list(discounts))

    def logprob(self, token: str, history: Sequence[str]) -> float:
        return math.log(self.prob(token, tuple(history)))

    def prob(self, token: str, history: Ngram) -> float:
        """p(token | history) from its last ``order - 1`` tokens (interpolated, from the unigram level up)."""
        history = history[max(0, len(history) - self.order + 1) :]
        p = 1.0 / self._size
        for m in range(0, len(history) + 1):
            h = history[len(history) - m :] if m else ()
            total, mass = self._history[m].get(h, (0, 0.0))
            if total == 0:
                continue  # an unseen history backs off entirely
            a = self.counts[m].get((*h, token), 0)
            d = self.discounts[m][min(a, 3) - 1] if a else 0.0
            p = max(a - d, 0.0) / total + mass / total * p
        return p

    def to_dict(self) -> dict[str, Any]:
        return {"format": _FORMAT, "version": _VERSION, "kind": "kneser-ney", "order": self.order,
                "vocab": self.vocab.to_dict(), "discounts": [list(d) for d in self.discounts],
                "fallback": self.fallback,
                "counts": [sorted([list(g), a] for g, a in c.items()) for c in self.counts]}


# -- building from a corpus, saving, loading --------------------------------------------------------------
def corpus_sentences(corpus: str, split: str, data_dir: str | None = None) -> list[list[str]]:
    """The words of every sentence of a constituency corpus split (cleaned: no ``-NONE-`` elements)."""
    from lightning_modules.data.corpora import load_corpus
    from lightning_modules.data.tree import clean

    loaded = load_corpus(corpus, data_dir)
    if loaded.kind != "constituency" or split not in loaded.splits:
        raise InputError(f"corpus {loaded.name!r} has no constituency split {split!r}", "split")
    return [clean(tree).leaves() for _, tree in loaded.sentences(split)]


def build_ngram(corpus: str, split: str = "train", order: int = 5, min_count: int = 2,
                data_dir: str | None = None) -> KneserNey | Unigram:
    """A baseline trained on a corpus split: order 1 is the add-one unigram, higher orders are KN."""
    sentences = corpus_sentences(corpus, split, data_dir)
    vocab = WordVocab.build((w for s in sentences for w in s), min_count=min_count)
    if order == 1:
        return Unigram.train(sentences, vocab)
    return KneserNey.train(sentences, vocab, order)


def save(model: KneserNey | Unigram, path: str | Path) -> None:
    atomic_write_text(Path(path), json.dumps(model.to_dict(), ensure_ascii=False, separators=(",", ":")))


def load(path: str | Path) -> KneserNey | Unigram:
    """Read a model written by ``save``; malformed files are an ``InputError`` at the file."""
    source = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise InputError(f"cannot read n-gram model: {e}", source) from None
    data = json_document(text, source)
    if not isinstance(data, dict) or data.get("format") != _FORMAT or data.get("version") != _VERSION:
        raise InputError(f"not a {_FORMAT} version {_VERSION} file", source)
    vocab = WordVocab.from_dict(data.get("vocab"), source)
    try:
        if data["kind"] == "unigram":
            return Unigram(vocab, {str(t): int(c) for t, c in data["counts"]}, float(data["k"]))
        if data["kind"] == "kneser-ney":
            counts = [{tuple(str(x) for x in gram): int(a) for gram, a in level} for level in data["counts"]]
            discounts = [(float(a), float(b), float(c)) for a, b, c in data["discounts"]]
            return KneserNey(vocab, int(data["order"]), counts, discounts, [bool(f) for f in data["fallback"]])
    except (KeyError, TypeError, ValueError) as e:
        raise InputError(f"malformed n-gram model ({type(e).__name__}: {e})", source) from None
    raise InputError(f"unknown n-gram model kind {data.get('kind')!r}", source)
