"""Ancestral sampling from TG-family checkpoints: TGs sample trees like any left-to-right LM (TG §1).

Each step re-encodes the prefix with the family's own rule (the TG mask of the prefix is the prefix of the
mask), runs the network, and draws the next action under well-formedness constraints: the first action opens
the root, a terminal only inside an open constituent, a closing nonterminal only for the constituent on top of
the stack and only once it dominates a terminal, nothing after the root closes. At ``max_length`` only
closing actions (or a terminal where a constituent is still empty) remain, so every sample is a tree.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from lightning_modules.data.encodings.choe_charniak import Actions, ActionVocab, TokenType
from lightning_modules.data.tree import Tree
from lightning_modules.errors import InputError
from lightning_modules.families.tg.cc_constraints import ActionMasks, CCState, build_tree


@dataclass
class Sample:
    """One sampled sequence: its actions, tree (None for terminal-only models), words and log-probability."""

    actions: list[str]
    tree: Tree | None
    words: list[str]
    logprob: float


def sample(checkpoint: str, n: int, seed: int = 0, temperature: float = 1.0, max_length: int = 200) -> list[Sample]:
    """Draw ``n`` sequences (in one batch) from a checkpoint."""
    if n < 1:
        raise InputError("must be at least 1", "-n")
    if temperature <= 0:
        raise InputError("must be positive", "--temperature")
    from experiments.families.tg.scorers import TGModel

    model = TGModel.load(checkpoint)
    module, meta, vocab = model.module, {"family": model.family, "config": model.config}, model.vocab
    family = meta["family"]
    encode = _encoder(family, meta["config"]["model"]["relpos"])
    types = vocab.token_types(np.arange(len(vocab)))
    bos = vocab.id("<s>")
    eos = vocab.id("</s>") if "</s>" in vocab else None
    gen = torch.Generator().manual_seed(seed)
    seqs: list[list[int]] = [[bos] for _ in range(n)]
    masks = ActionMasks(vocab)
    states = [CCState() for _ in range(n)]
    finished = [False] * n
    logprobs = [0.0] * n
    length = int(meta["config"]["model"]["segment_length"])
    memory = meta["config"]["data"]["memory"]
    from lightning_modules.data.encodings.batch import collate_chunk
    from lightning_modules.data.encodings.segmentation import segment

    with torch.no_grad():
        while not all(finished):
            active = [i for i in range(n) if not finished[i]]
            examples = [encode(_actions(seqs[i], vocab, types), vocab) for i in active]
            segs = [segment(e, length, length, memory) for e in examples]
            chunks = [collate_chunk(examples, segs, c, trim=True) for c in range(max(len(s) for s in segs))]
            logits, _ = module(chunks)
            for row, i in enumerate(active):
                last = len(examples[row]) - 1
                scores = logits[last // length][row, last % length].float() / temperature
                allowed = _allowed(states[i], seqs[i], family, masks, eos, max_length)
                scores = scores.masked_fill(~torch.from_numpy(allowed), -math.inf)
                logp = scores.log_softmax(-1)
                token = int(torch.multinomial(logp.exp(), 1, generator=gen))
                logprobs[i] += float(logp[token])
                seqs[i].append(token)
                if family == "txl-terminals":
                    finished[i] = token == eos
                else:
                    states[i] = states[i].advance(int(types[token]), vocab.tokens[token])
                    finished[i] = states[i].finished
    return [_result(seq, lp, vocab, types, family) for seq, lp in zip(seqs, logprobs)]


def _encoder(family: str, relpos: str) -> Any:
    from lightning_modules.families.tg.data import encoder

    return encoder(family, relpos)


def _actions(ids: list[int], vocab: ActionVocab, types: np.ndarray) -> Actions:
    tokens = tuple(vocab.tokens[i] for i in ids)
    word_index, w = [], 0
    for i in ids:
        if types[i] == TokenType.T:
            word_index.append(w)
            w += 1
        else:
            word_index.append(-1)
    return Actions(tokens, tuple(int(types[i]) for i in ids), tuple(word_index))


def _allowed(state: CCState, seq: list[int], family: str, masks: ActionMasks, eos: int | None,
             max_length: int) -> np.ndarray:
    """Boolean mask over the vocabulary of the actions that keep the sample well-formed."""
    if family == "txl-terminals":
        allowed = masks.terminal.copy()
        if eos is not None and (len(seq) > 1 or len(seq) >= max_length):
            allowed[eos] = True
        if len(seq) >= max_length and eos is not None:
            allowed[:] = False
            allowed[eos] = True
        return allowed
    short = len(seq) < max_length
    return masks.allowed(state, opening=short, terminal=short or state.empty > 0)


def _result(seq: list[int], logprob: float, vocab: ActionVocab, types: np.ndarray, family: str) -> Sample:
    tokens = [vocab.tokens[i] for i in seq[1:]]
    if family == "txl-terminals":
        words = [t for t in tokens if t != "</s>"]
        return Sample(tokens, None, words, logprob)
    tree = build_tree(tokens, [int(types[i]) for i in seq[1:]])
    return Sample(tokens, tree, tree.leaves(), logprob)
