"""Document-level scoring with document-level TG-family checkpoints (``data.level=document``; TG §3.1).

A document-level model was trained on whole documents, one sequence each: ``<s> w ... w </s>`` for
``txl-terminals``, ``<s> (DOC (S ... S) ... (S ... S) DOC)`` for the joint models (``document_choe_charniak``).
A document is scored sentence by sentence, each sentence conditioned on the document so far; all numbers are
natural logs and a document's log-prob is the sum of its sentences' totals.

**Exact** (``txl-terminals``): the document is one sequence, scored in one pass; ``word_logprobs`` are
log p(w | every previous word of the document), and log p(</s> | document) is the last sentence's
``end_logprob`` (the other sentences have none). The sum of the totals is exactly log p(document).

**Greedy single-path prefix** (``tg``, ``txl-trees``; TG §3.1): for sentence i, the prefix is ``<s> (DOC``
followed by one tree of every previous sentence — the tree chosen for it, i.e. the one with the highest
log p(x_j, y_j | prefix_j) among its candidates given its own prefix (greedy, never revised). Then

    log p(x_i | prefix_i) >= log Σ_{y ∈ Y'_i} p(x_i, y | prefix_i) = logsumexp_y [log p(prefix_i + y) - log p(prefix_i)]

over the sentence's distinct candidate trees Y'_i (proposals, or the gold tree alone). The last sentence's
candidates end with ``DOC)``, whose log-prob is part of that sentence (of its ``end_logprob``), and the
``(DOC`` after ``<s>`` is part of the first sentence (of its first word, as the opening nonterminals before
a word are): so with the gold tree of every sentence the totals add up exactly to log p(gold document).
Within a sentence, ``word_logprobs`` and ``end_logprob`` follow ``TreeScorer`` (distinct candidate prefixes;
``end_logprob`` = the closing nonterminals after the last word). All candidates of a sentence go through the
network in one pass (``batch_size`` rows at most), each row the whole prefix plus one candidate: the prefix
is recomputed per row (no shared key/value cache), which costs prefix length x candidates tokens per sentence.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import numpy as np

from experiments.evaluate.scorer import Convention, SentenceScore, check_sentences
from experiments.evaluate.scorers.tree_marginal import Candidate, TreeScorer
from experiments.families.tg.scorers import ExactScorer
from lightning_modules.data.encodings.choe_charniak import Actions, TokenType, choe_charniak
from lightning_modules.data.tree import Tree
from lightning_modules.errors import InputError

ROOT = "DOC"  # the document root of document_choe_charniak
INCREMENTAL = "document-level, greedy single-path prefix"


class DocumentScorer:
    """Scores documents (lists of sentences) with a document-level checkpoint; see the module doc.

    Wraps the sentence-level scorer that holds the model and the tree source: ``ExactScorer``
    (``txl-terminals``) or ``TreeScorer`` (methods ``gold`` and ``proposals``).
    """

    def __init__(self, inner: ExactScorer | TreeScorer):
        self.inner = inner
        self.model = inner.model
        self.name = inner.name
        self.convention: Convention = replace(
            inner.convention,
            incremental=INCREMENTAL if isinstance(inner, ExactScorer)
            else f"{INCREMENTAL}; within a sentence: {inner.convention.incremental}")

    def score(self, sentences: Sequence[Sequence[str]]) -> list[SentenceScore]:
        """The sentences as one document (the Scorer protocol)."""
        return self.score_documents([sentences])[0]

    def score_documents(self, documents: Sequence[Sequence[Sequence[str]]]) -> list[list[SentenceScore]]:
        for d, sentences in enumerate(documents):
            if not sentences:
                raise InputError("a document needs at least one sentence", f"document {d}")
            check_sentences(sentences)
        if isinstance(self.inner, ExactScorer):
            return [self._exact(sentences) for sentences in documents]
        if self.inner.source is None:
            raise InputError("this scorer has no tree source", "proposals")
        return [self._greedy(sentences, self.inner.source(sentences)) for sentences in documents]

    # -- txl-terminals: one exact pass per document ------------------------------------------------------
    def _exact(self, sentences: Sequence[Sequence[str]]) -> list[SentenceScore]:
        words = [w for s in sentences for w in s]
        example = self.model.encode(self.inner.actions(words))
        whole = self.inner.sentence_score(words, example, self.model.label_logprobs([example])[0])
        out, start = [], 0
        for i, s in enumerate(sentences):
            per_word = whole.word_logprobs[start : start + len(s)]
            end = whole.end_logprob if i == len(sentences) - 1 else 0.0
            out.append(SentenceScore(words=tuple(s), word_logprobs=per_word, total=float(sum(per_word)) + end,
                                     end_logprob=end, unknown_words=sum(self.model.is_unknown(w) for w in s)))
            start += len(s)
        return out

    # -- joint models: greedy single-path prefix ---------------------------------------------------------
    def _greedy(self, sentences: Sequence[Sequence[str]], trees: Sequence[Sequence[Tree]]
                ) -> list[SentenceScore]:
        if len(trees) != len(sentences):
            raise InputError(f"{len(trees)} tree sets for {len(sentences)} sentences", "proposals")
        prefix = Actions(("<s>", f"({ROOT}"), (int(TokenType.SOS), int(TokenType.ONT)), (-1, -1))
        closing = 0  # closing nonterminals in the prefix (TG encodes each as two tokens)
        out = []
        for i, words in enumerate(sentences):
            last = i == len(sentences) - 1
            candidates, model_trees = self._candidates(i, words, trees[i], prefix, last)
            # label j predicts token j+1: the sentence's tokens are predicted from the prefix's last position
            # on; the first sentence also owns "(DOC" (predicted at position 0)
            start = self.model.encoded_length(len(prefix), closing) - 1 if i else 0
            logprobs = []
            for lo in range(0, len(candidates), self.inner.batch_size):
                logprobs += self.model.label_logprobs([c.example for c in candidates[lo : lo + self.inner.batch_size]])
            for lp in logprobs:
                lp[:start] = 0.0
            score = self.inner.marginal(words, candidates, logprobs)
            out.append(score)
            best = model_trees[int(np.argmax([lp.sum() for lp in logprobs]))]
            actions = choe_charniak(best, self.model.terminals)
            prefix = Actions(prefix.tokens + actions.tokens[1:], prefix.types + actions.types[1:],
                             prefix.word_index + (-1,) * (len(actions) - 1))
            closing += sum(t == TokenType.CNT for t in actions.types)
        return out

    def _candidates(self, i: int, words: Sequence[str], trees: Sequence[Tree], prefix: Actions, last: bool
                    ) -> tuple[list[Candidate], list[Tree]]:
        """The sentence's first ``n`` distinct trees as ``prefix + tree (+ DOC) for the last sentence)``."""
        end = ((f"{ROOT})",), (int(TokenType.CNT),), (-1,)) if last else ((), (), ())

        def encode(model_tree: Tree):
            actions = choe_charniak(model_tree, self.model.terminals)
            return self.model.encode(Actions(prefix.tokens + actions.tokens[1:] + end[0],
                                             prefix.types + actions.types[1:] + end[1],
                                             prefix.word_index + actions.word_index[1:] + end[2]))

        return self.inner.candidates(i, words, trees, encode=encode)
