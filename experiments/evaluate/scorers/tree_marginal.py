"""The marginal of a joint model p(x, y) over given trees, generic over the family's encoding.

All numbers are natural logs. A joint model's log p(x, y) of one tree is the sum of its sequence's label
log-probs; over a set Y' of distinct trees, ``total = logsumexp_y log p(x, y) <= log p(x)``. The incremental
estimate after word i is the logsumexp over the *distinct* prefixes of Y' that end with the last token of
word i: the structure tokens before the word (closing previous units, opening new ones) belong to word i's
step, those after it to word i+1's (or to the end). Counting each distinct prefix once matters: trees that
share a prefix would otherwise count its probability several times. Every distinct prefix at word i extends
exactly one at word i-1 with less probability, so ``word_logprobs`` are <= 0 and telescope:
``total = sum(word_logprobs) + end_logprob``, with ``end_logprob`` what follows the last word.

**Corrected word probabilities** (``word_prob="corrected"``, Pimentel & Meister 2024, ``evaluate/word_prob.py``),
for models of SentencePiece pieces: a word's pieces do not say that it has ended, so each prefix value is
taken with the mass of B = every token that does not continue a word (pieces that begin one, structure
tokens, the end) after the word's last piece: D_i = logsumexp over the distinct prefixes ending with word i
of ``log p(prefix) + log P(B | prefix)``, D_-1 = log P(B | the start), and word i's value is D_i - D_{i-1}.
The masses come from a second pass over the trees (``distributions``); the totals do not change.

The model is anything with the ``TreeModel`` methods below: Transformer Grammars over Choe–Charniak actions,
and any other family whose sequences interleave structure and words (a dependency TG over arc transitions)
plugs in the same way.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
import torch

from experiments.evaluate.scorer import Convention, SentenceScore, batches, check_sentences
from experiments.evaluate.scorers.trie import PREFIX_SHARING
from experiments.evaluate.word_prob import WORD_PROBS, check
from lightning_modules.errors import InputError
from lightning_modules.numeric import logsumexp

TreeSource = Callable[[Sequence[Sequence[str]]], list[list[Any]]]


class TreeModel(Protocol):
    """What the marginal needs of a joint model: its view of a tree, the encoding and label log-probs."""

    name: str
    joint: bool

    def model_tree(self, tree: Any, pos_tags: bool, location: str) -> Any:
        """A given tree as the model reads it (cleaned, POS tags dropped when ``pos_tags``, transformed)."""

    def tree_words(self, tree: Any) -> list[str]:
        """The words of a model tree, in order."""

    def tree_text(self, tree: Any) -> str:
        """A given tree as text (``best_tree``)."""

    def encode_tree(self, tree: Any) -> Any:
        """The encoded sequence (``tokens`` and ``word_index`` arrays) of a model tree."""

    def label_logprobs(self, examples: Sequence[Any]) -> list[np.ndarray]:
        """Each example's label log-probs in one pass (entry j = log p(token j+1 | tokens <= j))."""

    def is_unknown(self, word: str) -> bool:
        """Whether the word is outside the model's vocabulary."""

    def word_boundary_ids(self) -> list[int] | None:
        """B of corrected word probabilities: the ids of every token that does not continue a word (pieces that
        begin one, structure tokens, the end of the sentence); None for a vocabulary of words."""

    def distributions(self, examples: Sequence[Any], positions: Sequence[Sequence[int]]) -> list[Any]:
        """Log-probabilities over the vocabulary at ``positions[b]`` of example b ([len, V] tensors)."""


@dataclass
class Candidate:
    """One distinct tree of a sentence as the model sees it."""

    original: Any  # as given (for best_tree)
    example: Any
    last_piece: np.ndarray  # encoded position of each word's last token


def last_pieces(example: Any, n_words: int) -> np.ndarray:
    """The encoded position of each word's last token."""
    out = np.zeros(n_words, dtype=np.int64)
    is_word = example.word_index >= 0
    np.maximum.at(out, example.word_index[is_word], np.flatnonzero(is_word))
    return out


class TreeScorer:
    """log p(x, y) of given trees and the marginal over each sentence's distinct trees (module doc).

    ``source`` maps sentences to their trees (a ``ProposalFile``, the proposal parser, a treebank lookup);
    ``score_trees`` takes the trees directly. The first ``n`` distinct trees of a sentence are used (None: all;
    a family's proposals method gives its paper's N), after the model's view of them (cleaning, POS tags,
    transforms). All trees of a sentence go through the network in
    one forward pass; sentences are grouped up to ``batch_size`` trees. ``prefix_sharing="trie"`` (the
    default) computes the prefixes a sentence's trees share once, where the model offers it
    (``grouped_label_logprobs``, ``scorers.trie``); ``off`` scores every tree's whole sequence. Both give the
    same numbers up to float32 rounding.
    """

    def __init__(self, model: TreeModel, source: TreeSource | None, *, method: str = "proposals",
                 n: int | None = None, pos_tags: bool = False, batch_size: int = 32,
                 source_name: str | None = None, prefix_sharing: str = "trie", word_prob: str = WORD_PROBS[0]):
        if not model.joint:
            raise InputError(f"{model.name} is a string model: score it with method=exact", "method")
        if method not in ("proposals", "gold"):
            raise ValueError(f"TreeScorer method must be proposals or gold, not {method!r}")
        if n is not None and n < 1:
            raise InputError("must be at least 1", "n_proposals")
        if batch_size < 1:
            raise InputError("must be at least 1", "batch_size")
        if prefix_sharing not in PREFIX_SHARING:
            raise InputError(f"must be one of {', '.join(PREFIX_SHARING)}", "prefix_sharing")
        self.model, self.source, self.pos_tags, self.batch_size = model, source, pos_tags, batch_size
        self.prefix_sharing = prefix_sharing
        self.n = 1 if method == "gold" else n
        self.splits_structure = method == "gold"  # its scores carry extra["structure_logprob"]
        self.name = model.name
        name = source_name or getattr(source, "name", None)
        self.boundary = None if check(word_prob) == WORD_PROBS[0] else model.word_boundary_ids()
        if word_prob != WORD_PROBS[0] and self.boundary is None:
            raise InputError(f"{model.name} reads one token per word: --word-prob {word_prob} needs SentencePiece "
                             "terminals", "--word-prob")
        self.convention = Convention(
            method=method, bound=True, n_proposals=self.n, proposal_source=name,
            incremental="gold-prefix" if method == "gold" else "proposal-prefixes", end_of_sentence=True,
            word_prob=word_prob,
        )

    def score(self, sentences: Sequence[Sequence[str]]) -> list[SentenceScore]:
        if self.source is None:
            raise InputError("this scorer has no tree source: call score_trees with the trees", "proposals")
        check_sentences(sentences)
        return self.score_trees(sentences, self.source(sentences))

    def score_trees(self, sentences: Sequence[Sequence[str]], trees: Sequence[Sequence[Any]],
                    locations: Sequence[Sequence[str]] | None = None) -> list[SentenceScore]:
        """Score ``trees[k]`` (proposals or a gold tree) of ``sentences[k]``; their words must be the sentence."""
        check_sentences(sentences)
        if len(trees) != len(sentences):
            raise InputError(f"{len(trees)} tree sets for {len(sentences)} sentences", "proposals")
        candidates = [self.candidates(k, words, trees[k], locations[k] if locations else None)[0]
                      for k, words in enumerate(sentences)]
        return self.score_candidates(sentences, candidates)

    def score_candidates(self, sentences: Sequence[Sequence[str]], candidates: Sequence[list[Candidate]]
                         ) -> list[SentenceScore]:
        """The marginal of each sentence over its candidates (distinct trees), batched forward passes."""
        order = sorted(range(len(sentences)), key=lambda k: -len(candidates[k][0].example))
        out: list[SentenceScore | None] = [None] * len(sentences)
        grouped = getattr(self.model, "grouped_label_logprobs", None) if self.prefix_sharing == "trie" else None
        for batch in batches(order, [len(c) for c in candidates], self.batch_size):
            if grouped is not None:  # shared prefixes once (scorers.trie)
                logprobs = [lp for g in grouped([[c.example for c in candidates[k]] for k in batch]) for lp in g]
            else:
                logprobs = self.model.label_logprobs([c.example for k in batch for c in candidates[k]])
            masses = self.boundary_masses([c for k in batch for c in candidates[k]])
            start = 0
            for k in batch:
                n = len(candidates[k])
                out[k] = self.marginal(sentences[k], candidates[k], logprobs[start : start + n],
                                       masses[start : start + n] if masses else None)
                start += n
        return out  # type: ignore[return-value]

    def boundary_masses(self, candidates: Sequence[Candidate]) -> list[np.ndarray] | None:
        """Corrected word probabilities: each candidate's log P(B | ·) after its start token and after each
        word's last piece; None otherwise."""
        if self.boundary is None:
            return None
        ids = torch.tensor(self.boundary)
        found = self.model.distributions([c.example for c in candidates],
                                         [[0, *c.last_piece.tolist()] for c in candidates])
        return [d[:, ids].logsumexp(-1).double().numpy() for d in found]

    def candidates(self, k: int, words: Sequence[str], trees: Sequence[Any], locations: Sequence[str] | None = None,
                   encode: Callable[[Any], Any] | None = None) -> tuple[list[Candidate], list[Any]]:
        """The sentence's first ``n`` distinct trees (and their model views); ``encode`` replaces the
        model's ``encode_tree`` (a document prefix around the tree)."""
        if not trees:
            raise InputError("no trees to score", f"sentence {k}")
        seen: set[Any] = set()
        out: list[Candidate] = []
        views: list[Any] = []
        for j, tree in enumerate(trees):
            location = locations[j] if locations else f"sentence {k}, tree {j}"
            view = self.model.model_tree(tree, self.pos_tags, location)
            if self.model.tree_words(view) != list(words):
                raise InputError(f"tree words {' '.join(self.model.tree_words(view))!r} differ from the sentence "
                                 f"{' '.join(words)!r}", location)
            if view in seen:
                continue
            seen.add(view)
            example = (encode or self.model.encode_tree)(view)
            out.append(Candidate(tree, example, last_pieces(example, len(words))))
            views.append(view)
            if len(out) == self.n:
                break
        return out, views

    def marginal(self, words: Sequence[str], candidates: list[Candidate], logprobs: list[np.ndarray],
                 masses: list[np.ndarray] | None = None) -> SentenceScore:
        """The sentence's score from its candidates' label log-probs (and, corrected, their boundary masses:
        ``boundary_masses``) (module doc)."""
        joint = np.array([lp.sum() for lp in logprobs])
        cumulative = [np.cumsum(lp) for lp in logprobs]
        # distinct prefixes ending with word i: word i-1's classes refined by the tokens up to word i's end
        classes = [0] * len(candidates)
        prefix = np.empty(len(words))
        corrected = np.empty(len(words) + 1)  # D_-1 .. D_n-1 (module doc)
        if masses is not None:
            corrected[0] = masses[0][0]
        for i in range(len(words)):
            keys: dict[tuple, int] = {}
            values: list[float] = []
            with_boundary: list[float] = []
            for j, c in enumerate(candidates):
                lo = c.last_piece[i - 1] + 1 if i else 0
                key = (classes[j], tuple(c.example.tokens[lo : c.last_piece[i] + 1].tolist()))
                if key not in keys:
                    keys[key] = len(keys)
                    values.append(cumulative[j][c.last_piece[i] - 1])
                    if masses is not None:
                        with_boundary.append(values[-1] + masses[j][i + 1])
                classes[j] = keys[key]
            prefix[i] = logsumexp(values)
            if masses is not None:
                corrected[i + 1] = logsumexp(with_boundary)
        word_logprobs = np.diff(prefix, prepend=0.0) if masses is None else np.diff(corrected)
        total = logsumexp(joint)
        best = int(np.argmax(joint))
        extra = {"trees": len(candidates), "best_logprob": float(joint[best])}
        if self.splits_structure:  # the gold tree alone: its structure tokens' log-probs, the tree's share
            extra["structure_logprob"] = structure_logprob(candidates[0].example, logprobs[0])
        return SentenceScore(
            words=tuple(words), word_logprobs=tuple(float(v) for v in word_logprobs),
            total=total, end_logprob=total - float(prefix[-1]),
            best_tree=self.model.tree_text(candidates[best].original),
            unknown_words=sum(self.model.is_unknown(w) for w in words), extra=extra,
        )


def structure_logprob(example: Any, logprobs: np.ndarray) -> float:
    """The sum of the label log-probs that predict structure tokens (not words) of one encoded tree: label j
    predicts token j + 1, a word where its ``word_index`` is >= 0. The rest of ``log p(x, y)`` is the words'
    log-probs given the tree."""
    predicts_word = np.append(np.asarray(example.word_index)[1:], -1)[: len(logprobs)] >= 0
    return float(logprobs[~predicts_word].sum())


class UnionScorer:
    """The marginal over the union of a tree source's trees and a search's trees (distinct trees only).

    Where a joint model has both a beam search and proposals, the beam's final trees (``search``: sentences
    -> their trees as the model reads them) and the first ``n`` distinct proposals of ``scorer`` (a
    ``TreeScorer`` over the proposal source) are pooled; a tree found by both counts once, so the total is
    still a lower bound on log p(x), and no looser than the bound of either set alone. Per-word values are
    the distinct prefixes of the pooled trees (``TreeScorer.marginal``); every tree is rescored in one
    forward pass with the proposals.
    """

    def __init__(self, scorer: TreeScorer, search: TreeSource, convention: Convention):
        if scorer.source is None:
            raise InputError("the union needs a proposal source", "proposals")
        self.scorer, self.search, self.convention = scorer, search, convention
        self.name = scorer.name

    def score(self, sentences: Sequence[Sequence[str]]) -> list[SentenceScore]:
        check_sentences(sentences)
        proposals = self.scorer.source(sentences)
        found = self.search(sentences)
        if len(proposals) != len(sentences):
            raise InputError(f"{len(proposals)} tree sets for {len(sentences)} sentences", "proposals")
        candidates, added = [], []
        for k, words in enumerate(sentences):
            pooled, views = self.scorer.candidates(k, words, proposals[k])
            seen, proposed = set(views), len(pooled)
            for view in found[k]:
                if view not in seen:
                    seen.add(view)
                    example = self.scorer.model.encode_tree(view)
                    pooled.append(Candidate(view, example, last_pieces(example, len(words))))
            candidates.append(pooled)
            added.append(len(pooled) - proposed)
        scores = self.scorer.score_candidates(sentences, candidates)
        for score, count in zip(scores, added):
            score.extra["search_only_trees"] = count  # found by the search, not among the proposals
        return scores
