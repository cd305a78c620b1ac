"""Proposal trees from the built-in parser q(y | x): N distinct trees per sentence, and the proposals file.

TG §3.1 marginalises a joint model over "a set of N = 300 trees, sampled without replacement" from a
discriminative parser. Here the N trees come from one of:

* ``sample``: stochastic beam search (Kool, van Hoof & Welling 2019), i.e. Gumbel-top-k sampling over
  whole action sequences. Every partial sequence S carries its log-probability φ(S) and a perturbed key
  G(S), the maximum of the Gumbel-perturbed log-probabilities of its completions. Children of S get keys
  ``G_i ~ Gumbel(φ_i)`` conditioned on ``max_i G_i = G(S)``:
  ``G~_i = -log(exp(-G(S)) - exp(-Z) + exp(-G_i))`` with ``Z = max_i G_i`` (computed in the stable form of
  their appendix). Keeping the k largest keys at every step gives exactly k sequences sampled without
  replacement from q; for k = 1 it is ancestral sampling.
* ``beam``: deterministic beam search of width N on log q (an approximation to the N most probable trees).

Both are batched over the beam and over sentences; the whole search state (keys, constraint state, the
decoder's key/value cache) is reordered by parent at each step. A finished sequence stays in the beam as its
own single child (with probability 1), so sequences of different lengths compete fairly. Sampling noise is
drawn per sentence from a generator seeded with (seed, sentence index), so results do not depend on batching.

The trees are written as a proposals file (``experiments/evaluate/proposal_files.py``), PTB-style with the
gold POS tags when the sentences come from a treebank (the parser predicts none), ``XX`` otherwise.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import torch
from torch import Tensor

from experiments.evaluate.proposal_files import (
    Proposals,
    read_corpus_sentences,
    read_sentences,
    with_tags,
    write_proposals,
)
from experiments.families.adapter import ProposeRequest
from lightning_modules.data.atomic import atomic_write_text
from lightning_modules.errors import InputError
from lightning_modules.families.parser.encoding import (
    BOS,
    PAD,
    ParserVocab,
    ParseState,
    actions_to_tree,
    allowed_mask,
)

METHODS = ("sample", "beam")


# -- search over any left-to-right model -------------------------------------------------------------------
class Decoder(Protocol):
    """Rows ``B * k`` of partial sequences (k per item, item-major) of some left-to-right model."""

    def finished(self) -> np.ndarray:
        """[B*k] bool: the row's sequence is complete."""
        ...

    def logprobs(self) -> Tensor:
        """[B, k, V] log-probabilities of the next action (-inf where not allowed) of unfinished rows."""
        ...

    def advance(self, rows: Tensor, actions: Tensor) -> None:
        """Keep rows ``rows`` [B*k] (in that order), then append ``actions`` [B*k] (PAD: leave as is)."""
        ...


def gumbel(shape: tuple[int, ...], generators: Sequence[torch.Generator]) -> Tensor:
    """Standard Gumbel noise [B, ...] in float64, item b drawn from ``generators[b]``."""
    tiny = torch.finfo(torch.float64).tiny
    u = torch.stack([torch.rand(shape[1:], generator=g, dtype=torch.float64) for g in generators])
    return -torch.log(-torch.log(u.clamp(min=tiny)))


def log1mexp(x: Tensor) -> Tensor:
    """log(1 - exp(x)) for x <= 0, accurate on both sides of -log 2 (Mächler 2012)."""
    return torch.where(x > -math.log(2.0), torch.log(-torch.expm1(x)), torch.log1p(-torch.exp(x)))


def conditional_gumbel(parent: Tensor, perturbed: Tensor) -> Tensor:
    """Children keys ``G~`` given the parent key [..., 1] and the children's Gumbel(φ_i) draws [..., V].

    ``-log(exp(-T) - exp(-Z) + exp(-G_i))`` in Kool et al.'s stable form: with
    ``v = T - G_i + log(1 - exp(G_i - Z))``, ``G~_i = T - max(v, 0) - log1p(exp(-|v|))``. The child with the
    largest draw gets exactly T. Children with ``G_i = -inf`` (not allowed) get -inf, and so does every
    child of a row without allowed children or with ``T = -inf``.
    """
    valid = perturbed > -math.inf
    z = perturbed.max(dim=-1, keepdim=True).values
    has_child = z > -math.inf
    z = torch.where(has_child, z, torch.zeros_like(z))
    g = torch.where(valid, perturbed, z)
    live = parent > -math.inf
    t = torch.where(live, parent, torch.zeros_like(parent))
    v = t - g + log1mexp(g - z)
    out = t - v.clamp(min=0) - torch.log1p(torch.exp(-v.abs()))
    return torch.where(valid & has_child & live, out, torch.full_like(out, -math.inf))


@dataclass
class Hypothesis:
    actions: list[int]
    logprob: float  # log q of the sequence
    key: float  # the search key it was ranked by (perturbed for sampling)


def search(decoder: Decoder, items: int, k: int, stochastic: bool,
           generators: Sequence[torch.Generator] | None = None) -> list[list[Hypothesis]]:
    """The k best complete sequences per item by key: Gumbel-top-k samples or beam search (see module doc).

    Returns, per item, the complete sequences found (fewer than k when fewer exist), best key first.
    """
    if stochastic and (generators is None or len(generators) != items):
        raise ValueError("stochastic search needs one generator per item")
    inf = math.inf
    keys = torch.full((items, k), -inf, dtype=torch.float64)
    keys[:, 0] = 0.0  # one live root per item (the root's key is arbitrary: top-k is shift invariant)
    phi = keys.clone()
    history = torch.zeros((items * k, 0), dtype=torch.long)
    while True:
        finished = torch.from_numpy(decoder.finished()).view(items, k)
        alive = keys > -inf
        if not (alive & ~finished).any():
            break
        logp = decoder.logprobs().double()
        vocab = logp.shape[-1]
        child_phi = phi[..., None] + logp
        if stochastic:
            child_key = conditional_gumbel(keys[..., None], child_phi + gumbel(tuple(logp.shape), generators))
        else:
            child_key = child_phi.clone()
        child_key[~alive] = -inf
        hold = alive & finished  # a complete sequence is its own only child
        child_key[hold] = -inf
        child_key[..., PAD][hold] = keys[hold]
        child_phi[..., PAD][hold] = phi[hold]
        keys, index = child_key.view(items, k * vocab).topk(k, dim=1)
        phi = child_phi.view(items, k * vocab).gather(1, index)
        parent, action = index // vocab, index % vocab
        dead = keys == -inf
        action[dead] = PAD
        phi[dead] = -inf
        rows = (torch.arange(items)[:, None] * k + parent).flatten()
        history = torch.cat([history[rows], action.flatten()[:, None]], dim=1)
        decoder.advance(rows, action.flatten())
    out = []
    for b in range(items):
        found = []
        for j in range(k):
            if keys[b, j] > -inf:
                seq = [a for a in history[b * k + j].tolist() if a != PAD]
                found.append(Hypothesis(seq, float(phi[b, j]), float(keys[b, j])))
        out.append(found)
    return out


# -- the parser as a search decoder ---------------------------------------------------------------------------
class ActionDecoder:
    """``Decoder`` of a ``ProposalParser`` network over a collated batch of sentences, k rows per sentence.

    ``state`` is the constraint state of the rows (``shifted``, ``finished``, ``select``, ``advance``) and
    ``allowed(state)`` its [rows, V] mask of allowed actions: the constituency actions (``ParserDecoder``) or
    a dependency parser's (``experiments.families.parser.dep_proposals``).
    """

    def __init__(self, model: Any, batch: dict[str, Tensor], k: int, state: Any,
                 allowed: Callable[[Any], np.ndarray]):
        self.model, self.k, self.state, self.allowed = model, k, state, allowed
        self.items = int(batch["source"].shape[0])
        self.enc = model.encode(batch["source"], batch["word_first"], batch["n_words"])
        self.cache = model.empty_cache(self.items * k)
        self.prev = torch.full((self.items, k), BOS, dtype=torch.long)
        self.position = 0

    def finished(self) -> np.ndarray:
        return self.state.finished

    def logprobs(self) -> Tensor:
        front = torch.from_numpy(self.state.shifted).view(self.items, self.k)
        logits = self.model.step(self.enc, self.prev, front, self.position, self.cache).float()
        mask = self.allowed(self.state)
        mask[self.state.finished, PAD] = True  # keeps the softmax finite; search ignores finished rows
        mask = torch.from_numpy(mask).view(self.items, self.k, -1)
        return logits.masked_fill(~mask, -math.inf).log_softmax(-1)

    def advance(self, rows: Tensor, actions: Tensor) -> None:
        self.state.select(rows.numpy())
        self.state.advance(actions.numpy())
        for layer in self.cache:
            layer[0], layer[1] = layer[0][rows], layer[1][rows]
        self.prev = actions.view(self.items, self.k)
        self.position += 1


class ParserDecoder(ActionDecoder):
    """The constituency parser's ``ActionDecoder`` (``ParseState``, ``allowed_mask``)."""

    def __init__(self, model: Any, batch: dict[str, Tensor], k: int, vocab: ParserVocab):
        state = ParseState(np.repeat(batch["n_words"].numpy(), k), vocab, model.config.max_depth)
        super().__init__(model, batch, k, state, lambda s: allowed_mask(*s.fields(), vocab))


def search_sentences(model: Any, payload: dict[str, Any], sentences: Sequence[Sequence[str]], n: int,
                     method: str, seed: int, max_rows: int,
                     decoder: Callable[[dict[str, Tensor], int], Decoder]) -> list[list[Hypothesis]]:
    """The n hypotheses of each sentence, most probable first, from ``decoder(batch, n)`` over batches of
    sentences of similar lengths; sentence i's noise comes from a generator seeded with (seed, i)."""
    from lightning_modules.families.parser.data import collate_source, source_mapping

    if method not in METHODS:
        raise InputError(f"must be one of {', '.join(METHODS)}", "--method")
    if n < 1:
        raise InputError("must be at least 1", "-n")
    for i, words in enumerate(sentences):
        if not words:
            raise InputError(f"sentence {i} is empty")
    source = source_mapping(payload)
    encoded = [source(list(words)) for words in sentences]
    order = sorted(range(len(sentences)), key=lambda i: len(encoded[i][0]))  # similar lengths together
    per_batch = max(1, max_rows // n)
    out: list[list[Hypothesis]] = [[] for _ in sentences]
    model.eval()
    with torch.no_grad():
        for start in range(0, len(order), per_batch):
            chosen = order[start : start + per_batch]
            batch = collate_source([encoded[i] for i in chosen])
            generators = [torch.Generator().manual_seed(seed * 1_000_003 + i) for i in chosen]
            found = search(decoder(batch, n), len(chosen), n, method == "sample", generators)
            for i, hyps in zip(chosen, found, strict=True):
                out[i] = sorted(hyps, key=lambda h: -h.logprob)
    return out


def propose(model: Any, payload: dict[str, Any], sentences: Sequence[Sequence[str]], n: int,
            method: str = "sample", seed: int = 0, max_rows: int = 2048) -> list[Proposals]:
    """N distinct trees per sentence (``method`` ``sample`` or ``beam``; ``beam`` with n = 1 is greedy)."""
    vocab = ParserVocab.from_json(payload["parser_labels"])
    found = search_sentences(model, payload, sentences, n, method, seed, max_rows,
                             lambda batch, k: ParserDecoder(model, batch, k, vocab))
    return [Proposals(list(words), [actions_to_tree(h.actions, list(words), vocab) for h in hyps],
                      [h.logprob for h in hyps]) for words, hyps in zip(sentences, found, strict=True)]


def load_parser(checkpoint: str | Path) -> tuple[Any, dict[str, Any]]:
    """The parser module (eval mode) and the vocabulary payload of a ``proposal-parser`` checkpoint."""
    from experiments.checkpoints import read_checkpoint
    from lightning_modules.families.parser.data import source_vocab_size
    from lightning_modules.families.parser.model import build

    ckpt = read_checkpoint(checkpoint, "proposal-parser")
    meta = ckpt["synbench"]
    payload = meta["vocab"]
    model = build({**meta["config"]["model"], "source_vocab_size": source_vocab_size(payload),
                   "action_vocab_size": len(ParserVocab.from_json(payload["parser_labels"]))})
    model.load_state_dict(ckpt["state_dict"])
    model.eval()
    return model, payload


def write(args: ProposeRequest) -> str:
    """``synbench propose`` with a proposal-parser checkpoint: the files, and the line it prints."""
    model, payload = load_parser(args.checkpoint)
    gold = None
    if args.corpus is not None:
        sentences, tags, gold = read_corpus_sentences(args.corpus, args.split, args.data_dir)
    else:
        sentences, tags = read_sentences(args.sentences), None
    proposals = propose(model, payload, sentences, args.n, args.method, args.seed, args.max_rows)
    write_proposals(args.out, proposals, tags, args.logq)
    trees = sum(len(p.trees) for p in proposals)
    meta = {"checkpoint": str(args.checkpoint), "n": args.n, "method": args.method, "seed": args.seed,
            "source": {"corpus": args.corpus, "split": args.split} if gold else {"sentences": str(args.sentences)},
            "sentences": len(proposals), "trees": trees}
    if gold is not None:
        from experiments.evaluate.rerank import proposal_quality

        ns = sorted({n for n in (1, 10, 100) if n < args.n} | {args.n})
        tagged = [[with_tags(t, tg) for t in p.trees] for p, tg in zip(proposals, tags)]  # as in OUT
        meta.update(proposal_quality(gold, tagged, ns))
        meta["f1_convention"] = "EVALB COLLINS.prm, labeled, against the cleaned corpus trees (percent)"
    meta_path = args.out.with_suffix(".meta.json")
    atomic_write_text(meta_path, json.dumps(meta, indent=1) + "\n")
    return (f"wrote {trees} trees for {len(proposals)} sentences to {args.out} ({meta_path.name}"
            + (f": 1-best F1 {meta['one_best_f1']}, oracle F1 at N = {args.n}: {meta['oracle_f1'][str(args.n)]})"
               if gold is not None else ")"))
