"""``synbench inspect {tg,txl,pushdown}``: print what the model sees and attends to for a tree, as JSON.

The tree (PTB style, POS tags allowed) is cleaned as corpora are (unwrap, drop ``-NONE-``, strip function
tags). For tg and txl its POS tags are dropped, and words are the terminals. Output per tree::

    {"tokens": [...], "types": [...], "labels": [... or null], "depth": [...],
     "chunks": [{"start": s, "attend": [[[key_position, relpos], ...] for each query]}]}

``types`` are ``SOS ONT T CNT1 CNT2`` for TG (transformed sequence) and ``SOS ONT T CNT`` for TXL (trees);
keys are absolute positions (a key may come from the memory), sorted; relpos is raw; padding is never
listed. Without ``--segment-length`` the whole sequence is one chunk.

``pushdown`` prints ``{"tokens", "attachment", "stack_tape"}`` as the official Pushdown Layers code computes
them (see ``lightning_modules.data.encodings.pushdown``): tokens ``<s>``, the words, ``<eos>``; attachment
labels ``[0] + per word + [0]``; the depth tape, one row per prefix. The chunking, relpos and tree-transform
options are TG/TXL settings and are refused.
"""

from __future__ import annotations

import argparse
import json
import sys

FAMILIES = ("tg", "txl", "pushdown")
_TYPE_NAMES = {
    "tg": {1: "SOS", 2: "ONT", 3: "T", 4: "CNT1", 14: "CNT2"},
    "txl": {1: "SOS", 2: "ONT", 3: "T", 4: "CNT"},
}


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "inspect",
        help="print a tree's encoding (tokens, labels, depth, attention per chunk) as JSON",
        description="Print the encoding of a tree as the model consumes it: tokens, types, labels, depth "
        "and, per chunk, the keys (absolute positions, from the chunk or its memory) and raw relative "
        "positions each query attends to (tg, txl); tokens, attachment labels and the depth stack tape "
        "(pushdown).",
    )
    p.add_argument("family", choices=FAMILIES,
                   help="tg (Transformer Grammar), txl (Transformer-XL on trees), pushdown (Pushdown Layers)")
    source = p.add_mutually_exclusive_group(required=True)
    source.add_argument("--tree", help="one PTB-style tree, e.g. '(S (NP (DT a) (NN cat)) (VP (VBZ meows)))'")
    source.add_argument("--trees-file", metavar="FILE", help="bracketed trees (.mrg or one per line)")
    p.add_argument("--jsonl", action="store_true", help="one JSON object per line (per tree)")
    p.add_argument("--segment-length", type=int, metavar="L", help="chunk length L (default: one chunk)")
    p.add_argument("--memory-length", type=int, metavar="M", help="memory length; must equal L (default: L)")
    p.add_argument("--memory", choices=("smart", "plain"),
                   help="memory between chunks (tg default: smart, the paper's; txl: plain only)")
    p.add_argument("--relpos", choices=("depth", "linear", "none"),
                   help="relative positions (tg default: depth; txl default and only other choice: linear)")
    p.add_argument("--tree-transform", choices=("none", "left", "right", "reversed"), default="none",
                   help="TG ablation: transform the tree before encoding (default: none)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from lightning_modules.data.tree import parse_tree, read_bracketed
    from lightning_modules.errors import InputError

    options = _options(args)
    if args.tree is not None:
        sources = [("--tree", parse_tree(args.tree, "--tree"))]
    else:
        sources = [(f"{args.trees_file}:{line}", tree) for line, tree in read_bracketed(args.trees_file)]
    records = []
    for location, tree in sources:
        try:
            records.append(inspect_tree(tree, args.family, **options))
        except InputError as e:
            raise InputError(e.message, e.location or location) from None
    if args.jsonl or args.tree is not None:
        text = "".join(json.dumps(r, separators=(",", ":")) + "\n" for r in records)
    else:
        text = json.dumps(records, separators=(",", ":")) + "\n"
    sys.stdout.write(text)
    return 0


def _options(args: argparse.Namespace) -> dict:
    from lightning_modules.errors import InputError

    length, memory_length = args.segment_length, args.memory_length
    if args.family == "pushdown":
        transform = None if args.tree_transform == "none" else args.tree_transform
        given = {"--segment-length": length, "--memory-length": memory_length, "--memory": args.memory,
                 "--relpos": args.relpos, "--tree-transform": transform}
        for flag, value in given.items():
            if value is not None:
                raise InputError("is a tg/txl option; pushdown prints the whole sentence", flag)
        return {}
    if memory_length is not None and length is None:
        raise InputError("needs --segment-length", "--memory-length")
    if length is not None:
        if length < 1:
            raise InputError(f"must be a positive integer, not {length}", "--segment-length")
        if memory_length is not None and memory_length != length:
            raise InputError(f"must equal --segment-length ({length}), as in the official TG library; "
                             f"got {memory_length}", "--memory-length")
    memory = args.memory or ("smart" if args.family == "tg" else "plain")
    relpos = args.relpos or ("depth" if args.family == "tg" else "linear")
    if args.family == "txl":
        if memory != "plain":
            raise InputError("txl has plain (Transformer-XL) memory only", "--memory")
        if relpos == "depth":
            raise InputError("txl relative positions are linear or none", "--relpos")
        if args.tree_transform != "none":
            raise InputError("tree transforms are TG ablations; use them with tg", "--tree-transform")
    return {"length": length, "memory": memory, "relpos": relpos, "tree_transform": args.tree_transform}


def inspect_tree(tree, family: str, length: int | None = None, memory: str = "smart",
                 relpos: str | None = None, tree_transform: str = "none") -> dict:
    """The inspect JSON record of one PTB-style tree (see the module docstring)."""
    if family == "pushdown":
        return _pushdown_record(tree)

    import numpy as np

    from lightning_modules.data.encodings import tg, txl
    from lightning_modules.data.encodings.choe_charniak import ActionVocab, choe_charniak, transform_tree
    from lightning_modules.data.encodings.segmentation import chunk_attention, segment
    from lightning_modules.data.tree import clean, drop_pos_tags

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


def _pushdown_record(tree) -> dict:
    from lightning_modules.data.encodings import pushdown
    from lightning_modules.data.tree import clean

    example = pushdown.encode(clean(tree))
    return {"tokens": example.tokens, "attachment": example.attachment.tolist(),
            "stack_tape": example.stack_tape().tolist()}
