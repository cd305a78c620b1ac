"""Scoring AWD-LSTM and PaLM checkpoints: exact sentence log-probabilities and PaLM's greedy parses.

The models read Mikolov-style text (``lightning_modules.data.mikolov``): an evaluator's treebank words are
lower-cased and numbers become ``N`` (tag-free: a word that reads as a number); words outside the vocabulary
are ``<unk>`` (counted in ``unknown_words``). Punctuation is not in that text: a punctuation word is not read
by the model and gets log-probability 0 (recorded in the convention and counted in ``extra["punctuation"]``).

Each sentence is scored as its own stream: the model reads ``<eos> w_1 … w_n`` from a zero state and predicts
``w_1 … w_n <eos>``; ``total`` includes log p(<eos> | x) (the sentence-level protocol shared by all families;
the papers' stream-level perplexity is the training run's ``final_metrics``: ``val_ppl`` and ``ppl_stream``).

Parses (PaLM, §2.2): the span scores of every length are read from the span attention while the model reads
``<eos> w_1 … w_n <eos>`` (the scores of spans ending at w_n come with the final ``<eos>``) and decoded by the
greedy top-down parser (``encodings.palm.greedy_parse``). Punctuation words are then put back, each under the
smallest node that covers its neighbouring words, so removing them gives back the model's tree.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from experiments.evaluate.scorer import Convention, SentenceScore, check_sentences
from lightning_modules.data.mikolov import EOS, UNK, normalise
from lightning_modules.data.tree import Tree, to_bracketed
from lightning_modules.families.palm.encoding import greedy_parse
from lightning_modules.families.palm.model import FAMILIES

# tokens that are punctuation whatever their tag (an apostrophe may be the possessive POS, a word in the text)
PUNCTUATION_WORDS = frozenset({",", ".", ":", ";", "?", "!", "--", "-", "...", "``", "''", '"', "-LRB-", "-RRB-",
                               "-LCB-", "-RCB-", "-LSB-", "-RSB-", "(", ")", "[", "]", "{", "}"})
_NUMERIC = re.compile(r"[-+]?[\d.,:/\\]*\d[\d.,:/\\]*%?")


def mikolov_form(word: str) -> str | None:
    """How the model reads an evaluator's word (None: punctuation, not read)."""
    if word in PUNCTUATION_WORDS:
        return None
    return normalise(word, "CD" if _NUMERIC.fullmatch(word) else "")


class PalmModel:
    """A loaded AWD-LSTM / PaLM module (eval mode) with its vocabulary."""

    def __init__(self, module: Any, meta: dict[str, Any], device: str = "cpu"):
        self.module = module.to(device).eval()
        self.device = torch.device(device)
        self.family: str = meta["family"]
        self.tokens: list[str] = list(meta["vocab"]["tokens"])
        self.ids = {t: i for i, t in enumerate(self.tokens)}

    @classmethod
    def load(cls, checkpoint: str, device: str = "cpu") -> PalmModel:
        """The checkpoint's model: its ``state_dict`` (after the switch to averaged SGD, the averaged weights)."""
        from experiments.checkpoints import read_checkpoint
        from lightning_modules.families.palm.model import build

        ckpt = read_checkpoint(checkpoint, FAMILIES)
        meta = ckpt["synbench"]
        module = build({**meta["config"]["model"], "vocab_size": len(meta["vocab"]["tokens"])}, meta["family"])
        module.load_state_dict(ckpt["state_dict"])
        return cls(module, meta, device)

    def encode(self, words: Sequence[str]) -> tuple[list[int], list[int], int, int]:
        """(ids of the read words, their positions in ``words``, unknown words, punctuation words)."""
        ids, positions, unknown, punctuation = [], [], 0, 0
        for k, word in enumerate(words):
            form = mikolov_form(word)
            if form is None:
                punctuation += 1
                continue
            unknown += form not in self.ids
            ids.append(self.ids.get(form, self.ids[UNK]))
            positions.append(k)
        return ids, positions, unknown, punctuation


class ExactScorer:
    """Exact log p(x) sentence by sentence (one batched pass), with PaLM's greedy parse when asked."""

    def __init__(self, model: PalmModel, batch_size: int = 32, trees: bool = False):
        self.model = model
        self.batch_size = batch_size
        self.trees = trees and model.family != "awd-lstm"
        self.name = model.family
        self.convention = Convention("exact", bound=False, tokenizer="mikolov-ptb (lower-case, numbers -> N, "
                                     "<unk>; punctuation not modelled: log p = 0)", bos=EOS)

    @torch.no_grad()
    def score(self, sentences: Sequence[Sequence[str]]) -> list[SentenceScore]:
        check_sentences(sentences)
        out = []
        for start in range(0, len(sentences), self.batch_size):
            out.extend(self._score_batch(sentences[start : start + self.batch_size]))
        return out

    def _score_batch(self, sentences: Sequence[Sequence[str]]) -> list[SentenceScore]:
        model = self.model
        eos = model.ids[EOS]
        encoded = [model.encode(words) for words in sentences]
        width = max(len(ids) for ids, *_ in encoded) + 1
        rows = torch.full((len(sentences), width + 1), eos, dtype=torch.long)
        for r, (ids, *_) in enumerate(encoded):
            rows[r, 1 : len(ids) + 1] = torch.tensor(ids, dtype=torch.long)
        rows = rows.to(model.device)
        logprobs = model.module.token_logprobs(rows[:, :-1], rows[:, 1:]).double().cpu().numpy()
        scores = model.module.all_span_scores(rows).float().cpu().numpy() if self.trees else None
        out = []
        for r, (words, (ids, positions, unknown, punctuation)) in enumerate(zip(sentences, encoded)):
            n = len(ids)
            per_word = np.zeros(len(words))
            per_word[positions] = logprobs[r, :n]
            end = float(logprobs[r, n])
            extra: dict[str, Any] = {"punctuation": punctuation}
            best = None
            if scores is not None and n:
                # span [a, b] of the read words is scored at input position b + 2 (column b − a)
                tree = greedy_parse(scores[r, 2 : n + 2, :n], [words[k] for k in positions])
                best = to_bracketed(with_words(tree, words, positions))
                extra["best_logprob"] = float(per_word.sum() + end)
            out.append(SentenceScore(tuple(words), tuple(float(x) for x in per_word), float(per_word.sum() + end),
                                     end, best, unknown, extra))
        return out


def with_words(tree: Tree, words: Sequence[str], positions: Sequence[int]) -> Tree:
    """``tree`` over ``words[positions]`` with every other word of ``words`` put back under the smallest node
    covering its nearest read neighbours (the root at the edges)."""
    leaf_at = iter(positions)

    def rebuild(node: Tree | str) -> tuple[Tree | str, int, int]:
        if isinstance(node, str):
            p = next(leaf_at)
            return node, p, p
        parts = [rebuild(c) for c in node.children]
        kids = [parts[0][0]]
        for (_, _, previous_last), (child, first, _) in zip(parts, parts[1:]):
            kids.extend(words[p] for p in range(previous_last + 1, first))
            kids.append(child)
        return Tree(node.label, tuple(kids)), parts[0][1], parts[-1][2]

    root, first, last = rebuild(tree)
    assert isinstance(root, Tree)
    return Tree(root.label, (*words[:first], *root.children, *words[last + 1 :]))
