"""``synbench inspect tg|txl``: what a TG or a TXL (trees) sees and attends to for a tree, as JSON.

The tree (PTB style, POS tags allowed) is cleaned as corpora are (unwrap, drop ``-NONE-``, strip function
tags), its POS tags are dropped, and words are the terminals. Output per tree::

    {"tokens": [...], "types": [...], "labels": [... or null], "depth": [...],
     "chunks": [{"start": s, "attend": [[[key_position, relpos], ...] for each query]}]}

``types`` are ``SOS ONT T CNT1 CNT2`` for TG (transformed sequence) and ``SOS ONT T CNT`` for TXL (trees);
keys are absolute positions (a key may come from the memory), sorted; relpos is raw; padding is never
listed. Without ``--segment-length`` the whole sequence is one chunk.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from lightning_modules.errors import InputError

_TYPE_NAMES = {
    "tg": {1: "SOS", 2: "ONT", 3: "T", 4: "CNT1", 14: "CNT2"},
    "txl": {1: "SOS", 2: "ONT", 3: "T", 4: "CNT"},
}


def inspect_options(name: str, options: Mapping[str, Any]) -> dict:
    """The chunking, memory, relpos and transform settings of ``inspect tg|txl`` (from ``options``, by option
    name: ``segment_length``, ``memory_length``, ``memory``, ``relpos``, ``tree_transform``), checked."""
    length, memory_length = options.get("segment_length"), options.get("memory_length")
    transform = options.get("tree_transform") or "none"
    if memory_length is not None and length is None:
        raise InputError("needs --segment-length", "--memory-length")
    if length is not None:
        if length < 1:
            raise InputError(f"must be a positive integer, not {length}", "--segment-length")
        if memory_length is not None and memory_length != length:
            raise InputError(f"must equal --segment-length ({length}), as in the official TG library; "
                             f"got {memory_length}", "--memory-length")
    memory = options.get("memory") or ("smart" if name == "tg" else "plain")
    relpos = options.get("relpos") or ("depth" if name == "tg" else "linear")
    if name == "txl":
        if memory != "plain":
            raise InputError("txl has plain (Transformer-XL) memory only", "--memory")
        if relpos == "depth":
            raise InputError("txl relative positions are linear or none", "--relpos")
        if transform != "none":
            raise InputError("tree transforms are TG ablations; use them with tg", "--tree-transform")
    return {"length": length, "memory": memory, "relpos": relpos, "tree_transform": transform}


def inspect_tree(tree, family: str, length: int | None = None, memory: str = "smart",
                 relpos: str | None = None, tree_transform: str = "none") -> dict:
    """The inspect JSON record of one PTB-style tree for ``tg`` or ``txl`` (module docstring)."""
    import numpy as np

    from lightning_modules.data.encodings.choe_charniak import ActionVocab, choe_charniak, transform_tree
    from lightning_modules.data.encodings.segmentation import chunk_attention, segment
    from lightning_modules.data.tree import clean, drop_pos_tags
    from lightning_modules.families.tg import encoding as tg
    from lightning_modules.families.tg import txl_encoding as txl

    actions = choe_charniak(transform_tree(drop_pos_tags(clean(tree)), tree_transform))
    vocab = ActionVocab.build([actions])
    if family == "tg":
        example = tg.encode(actions, vocab, relpos or "depth")
    else:
        example = txl.encode(actions, vocab, relpos or "linear")
    seg = segment(example, length or len(example), memory=memory)
    names = _TYPE_NAMES[family]
    chunks = []
    for c in range(len(seg)):
        att = chunk_attention(example, seg, c)
        start = int(seg.starts[c])
        queries = min(start + seg.length, len(example)) - start
        bounds = np.searchsorted(att.query, np.arange(queries + 1)).tolist()  # entries are sorted by query
        pairs = [[int(k), int(r)] for k, r in zip(att.key.tolist(), att.relpos.tolist())]
        chunks.append({"start": start, "attend": [pairs[bounds[q] : bounds[q + 1]] for q in range(queries)]})
    tokens = vocab.tokens
    return {
        "tokens": [tokens[i] for i in example.tokens.tolist()],
        "types": [names[t] for t in example.types.tolist()],
        "labels": [tokens[i] if i else None for i in example.labels.tolist()],
        "depth": example.depth.tolist(),
        "chunks": chunks,
    }
