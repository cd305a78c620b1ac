"""Corpus -> training data for the CAG: the RNNG's (``lightning_modules.families.rnng.data``: the same words,
actions and vocabularies), each tree checked against the fixed stack, whose positions the stack decoder's
position embeddings number (a tree needing more elements than ``model.stack_size`` is an error, located)."""

from __future__ import annotations

from typing import Any

from lightning_modules.data.train_data import TrainData
from lightning_modules.errors import InputError
from lightning_modules.families.rnng import data as rnng_data
from lightning_modules.families.rnng.cag_model import CAGConfig


def build(cfg: dict[str, Any]) -> TrainData:
    """The RNNG's training data; a tree deeper than the fixed stack is an ``InputError`` at its split and index."""
    data = rnng_data.build(cfg)
    limit = int(cfg["model"].get("stack_size", CAGConfig.stack_size))
    for key, examples in (("train_split", data.train), ("valid_split", data.valid)):
        for i, example in enumerate(examples):
            if example.stack_size > limit:
                raise InputError(f"the tree needs a stack of {example.stack_size} elements; the CAG's fixed stack "
                                 f"holds {limit} (model.stack_size)", f"data.{key} tree {i}")
    return data
