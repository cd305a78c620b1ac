"""The Scorer protocol: the only thing evaluators (perplexity, SyntaxGym, BLiMP, reranking) talk to.

A Scorer turns tokenized sentences (words as the training treebank tokenizes them) into per-word natural-log
probabilities. String models (TXL on terminals, n-gram baselines) are exact. Joint models p(x, y) give
``log p(x) >= log Σ_{y ∈ Y'} p(x, y)`` over a set Y' of trees — proposal trees (from a file or the built-in
proposal parser) or a word-synchronous beam — so a sentence total is a lower bound on log p(x) and per-word
incremental values are estimates. Every score says which, so results can never be mistaken for another
protocol's.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol, runtime_checkable

from experiments.evaluate.word_prob import WORD_PROBS
from lightning_modules.errors import InputError

METHODS = ("exact", "proposals", "beam", "gold")
# a score's extra: log p(x) as its family's official code counts it, where that differs from the common
# convention (``total``); ``eval ppl`` then writes ``word_ppl_official`` beside ``word_ppl``
OFFICIAL = "official_logprob"


@dataclass(frozen=True)
class Convention:
    """How a Scorer's numbers were obtained; recorded in every result file and report headline.

    method: ``exact`` (string model), ``proposals`` (marginal over N proposal trees per sentence),
    ``beam`` (word-synchronous beam of size ``beam``), ``gold`` (p(x, y_gold): a joint model on gold trees).
    """

    method: str
    bound: bool  # True when the sentence total is a lower bound on log p(x)
    n_proposals: int | None = None
    proposal_source: str | None = None  # e.g. "file:PATH" or "parser:CHECKPOINT"
    beam: int | None = None
    word_beam: int | None = None
    max_actions: int | None = None  # beam: most nonterminal actions between two words (bounds the tree set)
    fast_track: int | None = None  # beam: completions kept whatever their rank (None: all; Stern et al. 2017)
    incremental: str | None = None  # how per-word values were obtained for joint models
    end_of_sentence: bool = True  # whether log p(</s> | x) (or the closing of the root) is included in total
    unit: str = "word"
    tokenizer: str | None = None  # models with their own tokenizer: its class and vocabulary size
    bos: str | None = None  # the token every sentence is conditioned on (e.g. ``<|endoftext|>``)
    precision: str | None = None  # float32, float16 or bfloat16 weights
    # how a word's probability is made from its pieces (``word_prob.WORD_PROBS``): sum-pieces or corrected
    word_prob: str = WORD_PROBS[0]

    def __post_init__(self) -> None:
        if self.method not in METHODS:
            raise ValueError(f"method must be one of {METHODS}, not {self.method!r}")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class SentenceScore:
    """Scores of one sentence.

    ``word_logprobs[i]`` is log p(w_i | w_<i) in nats (subword pieces summed into their word; for joint
    models an estimate from the beam or proposal prefixes). ``total`` is log p(x) (exact) or its lower bound,
    including the end of the sentence when the convention says so; ``total`` may differ from
    ``sum(word_logprobs)`` by that end-of-sentence term (and, for joint models, because incremental
    estimates need not telescope to the bound; under corrected word probabilities, ``word_prob.py``, by the
    word-boundary terms: the convention divides a text into words, ``total`` stays its probability).
    """

    words: tuple[str, ...]
    word_logprobs: tuple[float, ...]
    total: float
    end_logprob: float = 0.0
    best_tree: str | None = None  # joint models: highest-scoring tree found (bracketed), for parsing
    unknown_words: int = 0  # words outside the model's vocabulary (mapped to unknown classes / pieces)
    extra: dict[str, Any] = field(default_factory=dict)


def check_sentences(sentences: Sequence[Sequence[str]]) -> None:
    """Sentences must be non-empty sequences of words (non-empty strings without spaces)."""
    for k, words in enumerate(sentences):
        if isinstance(words, str):
            raise InputError("a sentence must be a sequence of words, not a string", f"sentence {k}")
        if not words:
            raise InputError("empty sentence (no words to score)", f"sentence {k}")
        for word in words:
            if not isinstance(word, str) or not word or any(c.isspace() for c in word):
                raise InputError(f"bad word {word!r} (words are non-empty strings without spaces)",
                                 f"sentence {k}")


def batches(order: list[int], sizes: Sequence[int], budget: int) -> list[list[int]]:
    """Consecutive groups of ``order`` whose ``sizes`` sum to at most ``budget`` (or a single item)."""
    groups: list[list[int]] = []
    used = 0
    for k in order:
        if groups and used + sizes[k] <= budget:
            groups[-1].append(k)
            used += sizes[k]
        else:
            groups.append([k])
            used = sizes[k]
    return groups


@dataclass(frozen=True)
class Text:
    """One sentence as raw text and as the evaluator's words, each with its character span in the text.

    Evaluators score words (treebank tokens); a model with its own tokenizer (``hf:`` sources) reads the raw
    text instead and sums its pieces into these words by character offsets, so every model is compared on the
    same words and regions.
    """

    text: str
    words: tuple[str, ...]
    spans: tuple[tuple[int, int], ...]


# treebank tokens whose surface text differs (the inverse of ``tokenize.py``'s renaming)
_SURFACE = {"-LRB-": "(", "-RRB-": ")", "-LSB-": "[", "-RSB-": "]", "-LCB-": "{", "-RCB-": "}", "``": '"',
            "''": '"'}


def text_of_words(words: Sequence[str]) -> Text:
    """Treebank words as raw text: joined by single spaces, brackets and quotes restored (``-LRB-`` -> ``(``)."""
    spans, pieces, position = [], [], 0
    for word in words:
        surface = _SURFACE.get(word, word)
        spans.append((position, position + len(surface)))
        pieces.append(surface)
        position += len(surface) + 1
    return Text(" ".join(pieces), tuple(words), tuple(spans))


@runtime_checkable
class Scorer(Protocol):
    """Anything that scores sentences: a family's model, a baseline, an external LM."""

    name: str
    convention: Convention

    def score(self, sentences: Sequence[Sequence[str]]) -> list[SentenceScore]:
        """Score tokenized sentences; the result is independent of batching and order."""
        ...


@runtime_checkable
class TextScorer(Protocol):
    """A Scorer that reads raw text through its own tokenizer (``score`` still takes words: their text)."""

    def score_texts(self, texts: Sequence[Text]) -> list[SentenceScore]:
        """Score raw sentences; ``word_logprobs`` follow ``Text.words`` (pieces summed by character offsets)."""
        ...


def score_texts(scorer: Scorer, texts: Sequence[Text]) -> list[SentenceScore]:
    """What evaluators call: raw text for text-reading scorers, the words for every other Scorer."""
    if isinstance(scorer, TextScorer):
        return scorer.score_texts(texts)
    return scorer.score([t.words for t in texts])


def score_choices(scorer: Scorer, texts: Sequence[Text]) -> list[SentenceScore]:
    """What BLiMP calls: each text one sentence of a minimal pair. A scorer with ``score_choices`` scores them as
    the answers of a multiple-choice item (``hf:`` under lm-eval's convention: after a space); others as texts."""
    choices = getattr(scorer, "score_choices", None)
    return choices(texts) if choices is not None else score_texts(scorer, texts)
