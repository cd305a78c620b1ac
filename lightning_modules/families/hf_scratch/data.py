"""Corpus -> training data for a standard transformer: the terminals of the configured treebank splits.

The same cleaned, POS-free trees and the same terminal mapping as TXL (terminals) (``treebank_sequences``):
only the words are kept, one sentence per sequence.
"""

from __future__ import annotations

from typing import Any

import torch

from lightning_modules.data.train_data import TrainData
from lightning_modules.data.treebank_sequences import corpus_splits, terminal_mapping
from lightning_modules.errors import InputError
from lightning_modules.families.hf_scratch.encoding import PAD, Example, encode, token_list


def collate(examples: list[Example]) -> tuple[torch.Tensor, torch.Tensor]:
    """(inputs, labels), each [B, T], right-padded with ``<pad>`` (0)."""
    width = max(map(len, examples))
    inputs = torch.full((len(examples), width), PAD, dtype=torch.long)
    labels = torch.full((len(examples), width), PAD, dtype=torch.long)
    for row, example in enumerate(examples):
        inputs[row, : len(example)] = torch.from_numpy(example.inputs)
        labels[row, : len(example)] = torch.from_numpy(example.labels)
    return inputs, labels


def build(family: str, cfg: dict[str, Any], max_length: int | None) -> TrainData:
    """Vocabulary on the training split, sentences of both splits encoded; a sentence longer than the
    model's positions (``max_length``) is an error (a causal LM of fixed positions has no memory to carry)."""
    data = cfg["data"]
    if data["level"] != "sentence":
        raise InputError(f"{family} trains on sentences (got {data['level']!r})", "data.level")
    splits = corpus_splits(family, cfg)
    trees = {key: [seq[0] for seq in value] for key, value in splits.items()}
    train_words = [w for tree in trees["train_split"] for w in tree.leaves()]
    terminals, payload, terminal_tokens = terminal_mapping(data, train_words, splits["train_split"])
    tokens = token_list(terminal_tokens)
    index = {t: i for i, t in enumerate(tokens)}
    encoded = {key: [encode(t.leaves(), terminals, index, payload.get("unknown")) for t in value]
               for key, value in trees.items()}
    longest = max(len(e) for examples in encoded.values() for e in examples)
    if max_length is not None and longest > max_length:
        raise InputError(f"a sentence of the corpus is {longest} tokens long, more than the model's "
                         f"{max_length} positions", "model.config")
    return TrainData(
        train=encoded["train_split"], valid=encoded["valid_split"], collate=collate,
        vocab={**payload, "tokens": tokens}, vocab_size=len(tokens),
        valid_words=sum(len(t.leaves()) for t in trees["valid_split"]),
        stats={"train_sequences": len(encoded["train_split"]), "valid_sequences": len(encoded["valid_split"]),
               "train_tokens": int(sum(len(e) for e in encoded["train_split"])), "vocab_size": len(tokens)},
    )
