"""Corpus -> training data for the dependency proposal parser q(y | x) (family ``dep-parser``).

A dependency corpus (CoNLL-U, or ``NAME-dep``) is read as for the DTG family: the same projective trees
(non-projective ones are left out and counted, as DTG's training data leaves them out), the words mapped to
the training vocabulary with unknown-word classes. The encoder of the seq2seq parser (``families/parser/model.py``)
reads the words; its decoder writes the canonical arc-standard actions of ``families/parser/dep_encoding.py``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from lightning_modules.data.corpora import load_corpus
from lightning_modules.data.dependency import DepTree
from lightning_modules.data.train_data import TrainData
from lightning_modules.data.vocab import WordVocab
from lightning_modules.errors import InputError
from lightning_modules.families.parser import dep_encoding as encoding
from lightning_modules.families.parser.data import collate_source, source_mapping


@dataclass(frozen=True)
class DepParserExample:
    """One sentence: encoder ids, gold actions, decoder inputs, buffer fronts and allowed-action masks."""

    source: np.ndarray
    word_first: np.ndarray
    actions: np.ndarray
    inputs: np.ndarray
    front: np.ndarray
    mask: np.ndarray  # [T, VOCAB_SIZE]

    def __len__(self) -> int:
        return len(self.actions)


@dataclass
class DepParserData(TrainData):
    """``TrainData`` plus the validation trees (UAS of greedy parses)."""

    valid_trees: list[DepTree] = field(default_factory=list)


def encode(tree: DepTree, source: Any) -> DepParserExample:
    """The example of a projective gold tree; ``source`` maps words to (encoder ids, first id of each word)."""
    ids, first = source(list(tree.forms))
    actions = encoding.tree_actions(tree.heads)
    front, mask = encoding.gold_masks(actions, len(tree))
    return DepParserExample(np.asarray(ids, dtype=np.int64), np.asarray(first, dtype=np.int64),
                            np.asarray(actions, dtype=np.int64),
                            np.asarray([encoding.BOS, *actions[:-1]], dtype=np.int64), front, mask)


def build(cfg: dict[str, Any]) -> DepParserData:
    """Word vocabulary from the training split; encoded training and validation sentences."""
    data = cfg["data"]
    corpus = load_corpus(data["corpus"], cfg["runtime"].get("data_dir"))
    if corpus.kind != "dependency":
        raise InputError(f"corpus {corpus.name!r} has constituency trees; the dependency parser needs dependency "
                         f"trees (use {corpus.name}-dep for its head-rule conversion)", "data.corpus")
    stats: dict[str, Any] = {}
    kept: dict[str, list[DepTree]] = {}
    for key in ("train_split", "valid_split"):
        if data[key] not in corpus.splits:
            raise InputError(f"corpus {corpus.name!r} has no split {data[key]!r} "
                             f"(splits: {', '.join(corpus.splits)})", f"data.{key}")
        trees = [tree for _, tree in corpus.sentences(data[key])]
        kept[key] = [t for t in trees if t.is_projective()]
        stats[f"{key.split('_')[0]}_nonprojective"] = len(trees) - len(kept[key])
    words = WordVocab.build([w for t in kept["train_split"] for w in t.forms], int(data["min_count"]))
    payload = {"terminals": "words", "words": words.to_dict()}
    source = source_mapping(payload)
    train = [encode(t, source) for t in kept["train_split"]]
    valid = [encode(t, source) for t in kept["valid_split"]]
    if not train or not valid:
        raise InputError("no projective sentence is left to train or validate on", "data.corpus")
    stats.update(train_sentences=len(train), valid_sentences=len(valid),
                 train_actions=int(sum(len(e) for e in train)), source_vocab_size=len(words) + 1)
    return DepParserData(train=train, valid=valid, collate=collate, vocab=payload, vocab_size=encoding.VOCAB_SIZE,
                         valid_words=sum(len(t) for t in kept["valid_split"]), stats=stats,
                         valid_trees=kept["valid_split"])


def collate(rows: list[DepParserExample]) -> dict[str, torch.Tensor]:
    """Pad a batch as ``parser_data.collate`` does: the encoder side, decoder ``inputs``/``actions``/``front``
    [B, T] (``actions`` 0 = padding) and the allowed-action ``mask`` [B, T, V]."""
    size, t_len = len(rows), max(len(r) for r in rows)
    inputs = np.zeros((size, t_len), dtype=np.int64)
    actions = np.zeros((size, t_len), dtype=np.int64)
    front = np.zeros((size, t_len), dtype=np.int64)
    mask = np.zeros((size, t_len, encoding.VOCAB_SIZE), dtype=bool)
    for b, r in enumerate(rows):
        t = len(r)
        inputs[b, :t], actions[b, :t], front[b, :t], mask[b, :t] = r.inputs, r.actions, r.front, r.mask
    mask[actions == 0, encoding.PAD] = True  # padded steps: a finite (ignored) softmax
    out = collate_source([(r.source, r.word_first) for r in rows])
    out.update({"inputs": torch.from_numpy(inputs), "actions": torch.from_numpy(actions),
                "front": torch.from_numpy(front), "mask": torch.from_numpy(mask)})
    return out
