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

METHODS = ("exact", "proposals", "beam", "gold")


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
    incremental: str | None = None  # how per-word values were obtained for joint models
    end_of_sentence: bool = True  # whether log p(</s> | x) (or the closing of the root) is included in total
    unit: str = "word"

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
    estimates need not telescope to the bound).
    """

    words: tuple[str, ...]
    word_logprobs: tuple[float, ...]
    total: float
    end_logprob: float = 0.0
    best_tree: str | None = None  # joint models: highest-scoring tree found (bracketed), for parsing
    unknown_words: int = 0  # words outside the model's vocabulary (mapped to unknown classes / pieces)
    extra: dict[str, Any] = field(default_factory=dict)


@runtime_checkable
class Scorer(Protocol):
    """Anything that scores sentences: a family's model, a baseline, an external LM."""

    name: str
    convention: Convention

    def score(self, sentences: Sequence[Sequence[str]]) -> list[SentenceScore]:
        """Score tokenized sentences; the result is independent of batching and order."""
        ...
