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


@dataclass
class Sample:
    """One sampled sequence: its actions, tree (None for terminal-only models), words and log-probability."""

    actions: list[str]
    tree: Tree | None
    words: list[str]
    logprob: float


class _State:
    """Open constituents of one sample: labels and whether each already dominates a terminal."""

    def __init__(self) -> None:
        self.open: list[list[Any]] = []  # [label, has_terminal]
        self.started = False
        self.finished = False


def load_model(checkpoint: str) -> tuple[Any, dict[str, Any], ActionVocab]:
    """Module (eval mode), resolved config and action vocabulary of a TG-family checkpoint."""
    from experiments.checkpoints import read_checkpoint
    from lightning_modules.models.tg import build

    ckpt = read_checkpoint(checkpoint, ("tg", "txl-trees", "txl-terminals"))
    meta = ckpt["synbench"]
    vocab = ActionVocab.from_json(meta["vocab"]["actions"])
    module = build({**meta["config"]["model"], "vocab_size": len(vocab)})
    module.load_state_dict(ckpt["state_dict"])
    module.eval()
    return module, meta, vocab


def sample(checkpoint: str, n: int, seed: int = 0, temperature: float = 1.0, max_length: int = 200) -> list[Sample]:
    """Draw ``n`` sequences (in one batch) from a checkpoint."""
    if n < 1:
        raise InputError("must be at least 1", "-n")
    if temperature <= 0:
        raise InputError("must be positive", "--temperature")
    module, meta, vocab = load_model(checkpoint)
    family = meta["family"]
    encode = _encoder(family, meta["config"]["model"]["relpos"])
    types = vocab.token_types(np.arange(len(vocab)))
    bos = vocab.id("<s>")
    eos = vocab.id("</s>") if "</s>" in vocab else None
    gen = torch.Generator().manual_seed(seed)
    seqs: list[list[int]] = [[bos] for _ in range(n)]
    states = [_State() for _ in range(n)]
    logprobs = [0.0] * n
    length = int(meta["config"]["model"]["segment_length"])
    memory = meta["config"]["data"]["memory"]
    from lightning_modules.data.encodings.batch import collate_chunk
    from lightning_modules.data.encodings.segmentation import segment

    with torch.no_grad():
        while not all(s.finished for s in states):
            active = [i for i, s in enumerate(states) if not s.finished]
            examples = [encode(_actions(seqs[i], vocab, types), vocab) for i in active]
            segs = [segment(e, length, length, memory) for e in examples]
            chunks = [collate_chunk(examples, segs, c, trim=True) for c in range(max(len(s) for s in segs))]
            logits, _ = module(chunks)
            for row, i in enumerate(active):
                last = len(examples[row]) - 1
                scores = logits[last // length][row, last % length].float() / temperature
                allowed = _allowed(states[i], seqs[i], family, vocab, types, eos, max_length)
                scores = scores.masked_fill(~torch.from_numpy(allowed), -math.inf)
                logp = scores.log_softmax(-1)
                token = int(torch.multinomial(logp.exp(), 1, generator=gen))
                logprobs[i] += float(logp[token])
                seqs[i].append(token)
                _advance(states[i], token, family, vocab, types, eos)
    return [_result(seq, lp, vocab, types, family) for seq, lp in zip(seqs, logprobs)]


def _encoder(family: str, relpos: str) -> Any:
    from lightning_modules.data.tg_data import encoder

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


def _allowed(state: _State, seq: list[int], family: str, vocab: ActionVocab, types: np.ndarray,
             eos: int | None, max_length: int) -> np.ndarray:
    """Boolean mask over the vocabulary of the actions that keep the sample well-formed."""
    terminal = types == TokenType.T
    if eos is not None:
        terminal[eos] = False
    if family == "txl-terminals":
        allowed = terminal.copy()
        if eos is not None and (len(seq) > 1 or len(seq) >= max_length):
            allowed[eos] = True
        if len(seq) >= max_length and eos is not None:
            allowed[:] = False
            allowed[eos] = True
        return allowed
    allowed = np.zeros(len(vocab), dtype=bool)
    opening = types == TokenType.ONT
    if not state.started:
        return opening
    top_label, top_has_terminal = state.open[-1]
    if len(seq) < max_length:
        allowed |= opening | terminal
    elif not top_has_terminal:
        allowed |= terminal
    if top_has_terminal:
        allowed[vocab.id(f"{top_label})")] = True
    return allowed


def _advance(state: _State, token: int, family: str, vocab: ActionVocab, types: np.ndarray,
             eos: int | None) -> None:
    if family == "txl-terminals":
        state.finished = token == eos
        return
    kind = types[token]
    if kind == TokenType.ONT:
        state.started = True
        state.open.append([vocab.tokens[token][1:], False])
    elif kind == TokenType.T:
        for frame in state.open:
            frame[1] = True
    elif kind == TokenType.CNT:
        state.open.pop()
        state.finished = not state.open


def _result(seq: list[int], logprob: float, vocab: ActionVocab, types: np.ndarray, family: str) -> Sample:
    tokens = [vocab.tokens[i] for i in seq[1:]]
    if family == "txl-terminals":
        words = [t for t in tokens if t != "</s>"]
        return Sample(tokens, None, words, logprob)
    stack: list[tuple[str, list]] = []
    root: Tree | None = None
    words = []
    for i, tok in zip(seq[1:], tokens):
        if types[i] == TokenType.ONT:
            stack.append((tok[1:], []))
        elif types[i] == TokenType.T:
            stack[-1][1].append(tok)
            words.append(tok)
        else:
            label, kids = stack.pop()
            node = Tree(label, tuple(kids))
            if stack:
                stack[-1][1].append(node)
            else:
                root = node
    return Sample(tokens, root, words, logprob)
