"""Corpus -> training data for the proposal parser q(y | x) (family ``proposal-parser``).

Trees are cleaned and POS-free exactly as for the TG family (``treebank_sequences.sequences``), so the parser proposes
the trees the joint models score. The encoder reads each word as the LM's terminal mapping does (the word
vocabulary with Berkeley unknown-word classes, or SentencePiece pieces); the decoder predicts the actions of
``families/parser/encoding.py``. Sentences only: proposals are drawn per sentence.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from lightning_modules.data.corpora import load_corpus
from lightning_modules.data.train_data import TrainData
from lightning_modules.data.tree import Tree, clean
from lightning_modules.data.treebank_sequences import sequences, terminal_mapping
from lightning_modules.data.vocab import WordVocab, terminal_vocab
from lightning_modules.errors import InputError
from lightning_modules.families.parser import encoding

SourceMapping = Callable[[Sequence[str]], tuple[list[int], list[int]]]
"""Words -> (encoder ids, index of each word's first id)."""


@dataclass
class ParserData(TrainData):
    """``TrainData`` plus what parse evaluation needs: validation words, gold trees and POS tags."""

    valid_trees: list[Tree] = field(default_factory=list)  # POS-free gold trees
    valid_tags: list[list[str]] = field(default_factory=list)


def build(cfg: dict[str, Any]) -> ParserData:
    """Vocabularies from the training split; encoded training and validation sentences."""
    data = cfg["data"]
    if data["level"] != "sentence":
        raise InputError("the proposal parser parses sentences; set data.level=sentence", "data.level")
    if data["tree_transform"] != "none":
        raise InputError("the proposal parser proposes treebank trees; the scorers apply a joint model's tree "
                         "transform themselves, so train it with data.tree_transform=none", "data.tree_transform")
    corpus = load_corpus(data["corpus"], cfg["runtime"].get("data_dir"))
    if corpus.kind != "constituency":
        raise InputError(f"corpus {corpus.name!r} has dependency trees; the parser needs constituency trees",
                         "data.corpus")
    trees: dict[str, list[Tree]] = {}
    for key in ("train_split", "valid_split"):
        trees[key] = [seq[0] for seq in sequences(corpus.documents(data[key], f"data.{key}"), "sentence", "none")]
    train_words = [w for t in trees["train_split"] for w in t.leaves()]
    _, payload, _ = terminal_mapping(data, train_words, [[t] for t in trees["train_split"]])
    labels = encoding.ParserVocab.build(trees["train_split"] + trees["valid_split"])
    payload["parser_labels"] = labels.to_json()
    source = source_mapping(payload)
    max_depth = int(cfg["model"]["max_depth"])

    def prepare(tree: Tree) -> encoding.ParserExample:
        ids, first = source(tree.leaves())
        return encoding.encode(tree, ids, first, labels, max_depth)

    train = [prepare(t) for t in trees["train_split"]]
    valid = [prepare(t) for t in trees["valid_split"]]
    tags = [[tag for _, tag in clean(t).pos()] for doc in corpus.splits[data["valid_split"]]
            for _, t in doc.sentences]
    return ParserData(
        train=train, valid=valid, collate=lambda rows: collate(rows, labels), vocab=payload,
        vocab_size=len(labels), valid_words=sum(len(t.leaves()) for t in trees["valid_split"]),
        stats={"train_sentences": len(train), "valid_sentences": len(valid),
               "train_actions": int(sum(len(e) for e in train)), "labels": len(labels.labels),
               "source_vocab_size": source_vocab_size(payload)},
        valid_trees=trees["valid_split"], valid_tags=tags,
    )


def source_mapping(payload: dict[str, Any]) -> SourceMapping:
    """The encoder's word -> ids mapping recorded in a vocabulary payload (ids start at 1; 0 = padding)."""
    terminals = terminal_vocab(payload)
    if isinstance(terminals, WordVocab):
        return lambda words: ([terminals.id(w) + 1 for w in words], list(range(len(words))))

    def pieces(words: Sequence[str]) -> tuple[list[int], list[int]]:
        ids, index = terminals.encode_words_as_ids(words)
        first = [i for i, w in enumerate(index) if i == 0 or index[i - 1] != w]
        return ids, first  # piece id 0 is SentencePiece's <pad>, never produced by encoding

    return pieces


def source_vocab_size(payload: dict[str, Any]) -> int:
    """Size of the encoder's embedding table for a vocabulary payload (word ids are shifted by one)."""
    terminals = terminal_vocab(payload)
    return len(terminals) + 1 if isinstance(terminals, WordVocab) else len(terminals)


def collate_source(rows: Sequence[tuple[Sequence[int], Sequence[int]]]) -> dict[str, torch.Tensor]:
    """Pad the encoder side of sentences given as (ids, word_first): ``source`` [B,S] (0 = padding),
    ``word_first`` [B,W] (padded with 0; ``n_words`` [B] gives the real count)."""
    size = len(rows)
    source = np.zeros((size, max(len(ids) for ids, _ in rows)), dtype=np.int64)
    word_first = np.zeros((size, max(len(first) for _, first in rows)), dtype=np.int64)
    for b, (ids, first) in enumerate(rows):
        source[b, : len(ids)] = ids
        word_first[b, : len(first)] = first
    n_words = np.array([len(first) for _, first in rows], dtype=np.int64)
    return {"source": torch.from_numpy(source), "word_first": torch.from_numpy(word_first),
            "n_words": torch.from_numpy(n_words)}


def collate(rows: list[encoding.ParserExample], vocab: encoding.ParserVocab) -> dict[str, torch.Tensor]:
    """Pad a batch: the encoder side (``collate_source``), decoder ``inputs``/``actions``/``front`` [B,T]
    (``actions`` 0 = padding) and the allowed-action ``mask`` [B,T,V]."""
    size = len(rows)
    t_len = max(len(r) for r in rows)
    inputs = np.zeros((size, t_len), dtype=np.int64)
    actions = np.zeros((size, t_len), dtype=np.int64)
    front = np.zeros((size, t_len), dtype=np.int64)
    mask = np.zeros((size, t_len, len(vocab)), dtype=bool)
    for b, r in enumerate(rows):
        t = len(r)
        inputs[b, :t], actions[b, :t], front[b, :t] = r.inputs, r.actions, r.front
        mask[b, :t] = encoding.allowed_mask(r.can_open, r.can_shift, r.close_id, vocab)
    mask[actions == 0, encoding.PAD] = True  # padded steps: a finite (ignored) softmax
    out = collate_source([(r.source, r.word_first) for r in rows])
    out.update({"inputs": torch.from_numpy(inputs), "actions": torch.from_numpy(actions),
                "front": torch.from_numpy(front), "mask": torch.from_numpy(mask)})
    return out
