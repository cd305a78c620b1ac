"""Dependency proposals: N distinct projective trees per sentence from the dependency parser q(y | x).

DTG §4 marginalises over 300 trees per sentence sampled without replacement from a biaffine parser. Ours is
the seq2seq proposal parser of the constituency families (``models/parser.py``, unchanged) writing the
canonical arc-standard actions of ``encodings/dep_parser.py``, searched by the same stochastic beam search
(``experiments.families.parser.proposals.search``: Gumbel-top-k, Kool et al. 2019). Why this design and not
a biaffine scorer with projective sampling: q is then a locally normalised sequence model, for which
Gumbel-top-k over sequences is *exact* sampling without replacement, and the canonical order makes sequences
and trees one-to-one, so the N samples are N distinct trees drawn without replacement from q(y | x) with
their exact log q. A biaffine (arc-factored, globally normalised) q needs a structured top-k Gumbel sampler
over Eisner's chart for the same guarantee; the transition parser reuses the search, the network and its
training loop, and is a projective parser by construction (as DTG needs).

``method="beam"`` with n = 1 is the greedy parse (its UAS is the parser's reported UAS).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import Tensor

from experiments.families.parser.proposals import METHODS, search
from lightning_modules.data.dependency import DepTree
from lightning_modules.data.encodings import dep_parser as encoding
from lightning_modules.errors import InputError

FAMILY = "dep-parser"


class DepParserDecoder:
    """The search ``Decoder`` of a parser network over a collated batch of sentences, k rows per sentence."""

    def __init__(self, model: Any, batch: dict[str, Tensor], k: int):
        self.model, self.k = model, k
        self.items = int(batch["source"].shape[0])
        self.enc = model.encode(batch["source"], batch["word_first"], batch["n_words"])
        self.state = encoding.DepParseState(np.repeat(batch["n_words"].numpy(), k))
        self.cache = model.empty_cache(self.items * k)
        self.prev = torch.full((self.items, k), encoding.BOS, dtype=torch.long)
        self.position = 0

    def finished(self) -> np.ndarray:
        return self.state.finished

    def logprobs(self) -> Tensor:
        front = torch.from_numpy(self.state.shifted).view(self.items, self.k)
        logits = self.model.step(self.enc, self.prev, front, self.position, self.cache).float()
        mask = self.state.allowed()
        mask[self.state.finished, encoding.PAD] = True  # keeps the softmax finite; search ignores finished rows
        mask_t = torch.from_numpy(mask).view(self.items, self.k, -1)
        return logits.masked_fill(~mask_t, -math.inf).log_softmax(-1)

    def advance(self, rows: Tensor, actions: Tensor) -> None:
        self.state.select(rows.numpy())
        self.state.advance(actions.numpy())
        for layer in self.cache:
            layer[0], layer[1] = layer[0][rows], layer[1][rows]
        self.prev = actions.view(self.items, self.k)
        self.position += 1


@dataclass
class DepProposals:
    """Distinct trees (heads, 1-based) of one sentence with their log q, most probable first."""

    words: list[str]
    heads: list[tuple[int, ...]]
    logq: list[float]

    def trees(self) -> list[DepTree]:
        return [DepTree(tuple(self.words), h, ("dep",) * len(h)) for h in self.heads]


def propose(model: Any, payload: dict[str, Any], sentences: Sequence[Sequence[str]], n: int,
            method: str = "sample", seed: int = 0, max_rows: int = 2048) -> list[DepProposals]:
    """N distinct trees per sentence (``sample``: without replacement; ``beam``: top-N beam search).

    Sentence i's noise comes from a generator seeded with (seed, i), so results do not depend on batching.
    """
    from lightning_modules.data.parser_data import collate_source, source_mapping

    if method not in METHODS:
        raise InputError(f"must be one of {', '.join(METHODS)}", "--method")
    if n < 1:
        raise InputError("must be at least 1", "-n")
    for i, words in enumerate(sentences):
        if not words:
            raise InputError(f"sentence {i} is empty")
    source = source_mapping(payload)
    encoded = [source(list(words)) for words in sentences]
    order = sorted(range(len(sentences)), key=lambda i: len(encoded[i][0]))
    per_batch = max(1, max_rows // n)
    out: list[DepProposals | None] = [None] * len(sentences)
    model.eval()
    with torch.no_grad():
        for start in range(0, len(order), per_batch):
            chosen = order[start : start + per_batch]
            batch = collate_source([encoded[i] for i in chosen])
            generators = [torch.Generator().manual_seed(seed * 1_000_003 + i) for i in chosen]
            found = search(DepParserDecoder(model, batch, n), len(chosen), n, method == "sample", generators)
            for i, hyps in zip(chosen, found, strict=True):
                hyps = sorted(hyps, key=lambda h: -h.logprob)
                out[i] = DepProposals(list(sentences[i]), [encoding.actions_to_heads(h.actions) for h in hyps],
                                      [h.logprob for h in hyps])
    return out  # type: ignore[return-value]


def load_parser(checkpoint: str | Path) -> tuple[Any, dict[str, Any]]:
    """The network (eval mode) and vocabulary payload of a ``dep-parser`` checkpoint."""
    from experiments.checkpoints import read_checkpoint
    from lightning_modules.data.parser_data import source_vocab_size
    from lightning_modules.models.parser import build

    ckpt = read_checkpoint(checkpoint, FAMILY)
    meta = ckpt["synbench"]
    payload = meta["vocab"]
    model = build({**meta["config"]["model"], "source_vocab_size": source_vocab_size(payload),
                   "action_vocab_size": encoding.VOCAB_SIZE})
    model.load_state_dict(ckpt["state_dict"])
    model.eval()
    return model, payload
