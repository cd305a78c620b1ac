"""Corpus -> training data for the Pushdown Layers family (``pushdown``, ``base-lm``).

Sentences are cleaned (Dyer et al. 2016 / Choe & Charniak 2016 as for TG), optionally transformed (TG
Table 2 ablations), and their words mapped to terminal tokens exactly as TG's data: words with Berkeley
unknown-word classes, or SentencePiece pieces (a word of several pieces becomes a right-branching subtree,
Appendix C). ``encodings.pushdown.encode`` gives each sentence's attachment labels and tape spans.

Ids: 0 ``<pad>``, 1 ``<s>``, 2 ``<eos>``, then the terminal tokens in vocabulary order. A batch of n-token
sentences (T = max n + 1, padded with 0):
  ``inputs``     [B, T]    ``<s> x_1 .. x_n``
  ``targets``    [B, T]    ``x_1 .. x_n <eos>`` (the LM labels)
  ``attachment`` [B, T]    the attachment of the word predicted at each position, i.e. labels[1:] of the
                           encoding; the ``<eos>`` step and padding hold 0, which is never a word's label
                           (words attach to positions >= 1), so 0 means "no attachment loss" (official mask)
  ``tape``       [B, T, T] depth tape rows 0..n: row t = depths after tokens 0..t (what position t sees)
  ``lengths``    [B]       n + 1, the valid input positions
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import Tensor

from lightning_modules.data.encodings.pushdown import encode, stack_tape
from lightning_modules.data.tg_data import corpus_splits, terminal_mapping
from lightning_modules.data.train_data import TrainData
from lightning_modules.data.tree import Tree
from lightning_modules.errors import InputError

PAD, SOS, EOS = "<pad>", "<s>", "<eos>"
SPECIALS = (PAD, SOS, EOS)


@dataclass(frozen=True, eq=False)
class PushdownSentence:
    """One encoded sentence: token ids ``<s> x_1..x_n <eos>``, attachment labels, tape spans, word count."""

    ids: np.ndarray  # int64[n + 2]
    attachment: np.ndarray  # int64[n + 2]: [0] + per token + [0]
    spans: np.ndarray  # int64[n - 1, 2]
    words: int  # words before splitting into pieces

    @property
    def labels(self) -> np.ndarray:
        """The LM labels ``x_1..x_n <eos>`` (for unigram baselines)."""
        return self.ids[1:]

    def __len__(self) -> int:
        return len(self.ids)


@dataclass
class PushdownBatch:
    """Padded tensors of a batch (module docstring); ``to(device)`` moves them all."""

    inputs: Tensor
    targets: Tensor
    attachment: Tensor
    tape: Tensor
    lengths: Tensor

    def to(self, device: torch.device | str) -> PushdownBatch:
        return PushdownBatch(*(t.to(device) for t in (self.inputs, self.targets, self.attachment, self.tape,
                                                        self.lengths)))


class TokenVocab:
    """Token strings <-> ids: the three specials, then the terminal tokens."""

    def __init__(self, terminals: Sequence[str]):
        clash = set(SPECIALS) & set(terminals)
        if clash:
            raise InputError(f"terminal tokens clash with special tokens: {sorted(clash)}")
        self.tokens = (*SPECIALS, *terminals)
        self._ids = {t: i for i, t in enumerate(self.tokens)}

    def __len__(self) -> int:
        return len(self.tokens)

    def id(self, token: str) -> int:
        return self._ids[token]

    def __contains__(self, token: object) -> bool:
        return token in self._ids


def with_unknown(terminals: Callable[[str], Sequence[str]], vocab: TokenVocab, unknown: str | None
                 ) -> Callable[[str], tuple[str, ...]]:
    """``terminals`` with every token outside ``vocab`` replaced by ``unknown`` (SentencePiece's ``<unk>``:
    a character never seen in training is a piece of no vocabulary). Word vocabularies (``unknown`` None)
    already map every word to a token of the vocabulary."""
    if unknown is None:
        return lambda word: tuple(terminals(word))
    return lambda word: tuple(t if t in vocab else unknown for t in terminals(word))


def encode_sentence(tree: Tree, vocab: TokenVocab, terminals: Callable[[str], Sequence[str]]
                    ) -> PushdownSentence:
    """Encode one cleaned tree; words become terminal tokens (pieces) via ``terminals``."""
    example = encode(tree, split=lambda word, _index: terminals(word))
    ids = [vocab.id(SOS), *(vocab.id(t) for t in example.leaves), vocab.id(EOS)]
    return PushdownSentence(np.array(ids, dtype=np.int64), example.attachment, example.spans,
                            len(tree.leaves()))


def max_depth(sentence: PushdownSentence) -> int:
    """The largest depth on the sentence's tape (its last row: depths only grow), in O(n)."""
    first, last = sentence.spans.reshape(-1, 2).T
    diff = np.bincount(first, minlength=len(sentence) + 1) - np.bincount(last + 1, minlength=len(sentence) + 1)
    return int(np.cumsum(diff).max())


def collate(rows: Sequence[PushdownSentence]) -> PushdownBatch:
    """Pad a list of sentences into a ``PushdownBatch``."""
    length = max(len(r) for r in rows) - 1
    batch = len(rows)
    inputs = np.zeros((batch, length), dtype=np.int64)
    targets = np.zeros((batch, length), dtype=np.int64)
    attachment = np.zeros((batch, length), dtype=np.int64)
    tape = np.zeros((batch, length, length), dtype=np.int64)
    lengths = np.zeros(batch, dtype=np.int64)
    for b, r in enumerate(rows):
        n = len(r) - 1  # <s> + tokens
        inputs[b, :n] = r.ids[:-1]
        targets[b, :n] = r.ids[1:]
        attachment[b, :n] = r.attachment[1:]
        tape[b, :n, :n] = stack_tape(r.spans, len(r))[:n, :n]
        lengths[b] = n
    return PushdownBatch(*(torch.from_numpy(a) for a in (inputs, targets, attachment, tape, lengths)))


def build(family: str, cfg: dict[str, Any]) -> TrainData:
    """Vocabulary from the training split; training and validation sentences encoded.

    ``data.corpus: dyck`` generates Dyck strings instead of reading a treebank (``dyck_data.build``).
    """
    data = cfg["data"]
    if data.get("corpus") == "dyck":
        from lightning_modules.data import dyck_data

        return dyck_data.build(family, cfg)
    if data.get("level", "sentence") != "sentence":
        raise InputError(f"{family} is trained on sentences (got {data['level']!r})", "data.level")
    splits = {key: [seq[0] for seq in seqs] for key, seqs in corpus_splits(family, cfg).items()}
    train_words = [w for tree in splits["train_split"] for w in tree.leaves()]
    terminals, payload, tokens = terminal_mapping(data, train_words, [[t] for t in splits["train_split"]])
    vocab = TokenVocab(tokens)
    payload["tokens"] = list(vocab.tokens)
    terminals = with_unknown(terminals, vocab, payload.get("unknown"))
    train = [encode_sentence(t, vocab, terminals) for t in splits["train_split"]]
    valid = [encode_sentence(t, vocab, terminals) for t in splits["valid_split"]]
    if not train or not valid:
        raise InputError("the training and validation splits need at least one sentence each", "data.corpus")
    return TrainData(
        train=train, valid=valid, collate=collate, vocab=payload, vocab_size=len(vocab),
        valid_words=sum(s.words for s in valid),
        stats={"train_sequences": len(train), "valid_sequences": len(valid),
               "train_tokens": int(sum(len(s) - 1 for s in train)), "vocab_size": len(vocab),
               "max_train_depth": max(max_depth(s) for s in train)},
    )
