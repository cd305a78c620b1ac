"""A constituency corpus as training sequences: cleaned, POS-free, transformed trees grouped per sentence or
document, and the mapping of their words to terminal tokens (Berkeley unknown-word classes or SentencePiece).

Shared by the families that train on constituency trees (action sequences, attachment tapes, parser targets).
"""

from __future__ import annotations

import base64
from collections.abc import Callable, Sequence
from typing import Any

from lightning_modules.data.corpora import load_corpus
from lightning_modules.data.encodings.choe_charniak import transform_tree
from lightning_modules.data.tree import Tree, clean, drop_pos_tags
from lightning_modules.errors import InputError


def corpus_splits(family: str, cfg: dict[str, Any]) -> dict[str, list[list[Tree]]]:
    """``{"train_split": ..., "valid_split": ...}``: the configured splits of ``data.corpus`` as training
    sequences (``sequences``); a dependency corpus or a missing split is an error at its config key."""
    data = cfg["data"]
    corpus = load_corpus(data["corpus"], cfg["runtime"].get("data_dir"))
    if corpus.kind != "constituency":
        raise InputError(f"corpus {corpus.name!r} has dependency trees; {family} needs constituency trees",
                         "data.corpus")
    splits = {}
    for key in ("train_split", "valid_split"):
        splits[key] = sequences(corpus.documents(data[key], f"data.{key}"), data["level"], data["tree_transform"])
    return splits


def sequences(documents: Sequence[Any], level: str, transform: str) -> list[list[Tree]]:
    """Cleaned, POS-free, transformed trees grouped as training sequences (one sentence or one document)."""
    if level not in ("sentence", "document"):
        raise InputError(f"must be 'sentence' or 'document', not {level!r}", "data.level")
    out: list[list[Tree]] = []
    for doc in documents:
        trees = []
        for location, tree in doc.sentences:
            try:
                trees.append(transform_tree(drop_pos_tags(clean(tree)), transform))
            except InputError as e:
                raise InputError(e.message, e.location or location) from None
        if level == "sentence":
            out.extend([t] for t in trees)
        elif trees:
            out.append(trees)
    return out


def terminal_mapping(data: dict[str, Any], train_words: list[str], train_seqs: list[list[Tree]]
                     ) -> tuple[Callable[[str], Sequence[str]], dict[str, Any], list[str]]:
    """(word -> terminal tokens, vocabulary payload for checkpoints, every terminal token of the vocabulary)."""
    kind = data["terminals"]
    if kind == "words":
        from lightning_modules.data.vocab import WordVocab

        words = WordVocab.build(train_words, min_count=int(data["min_count"]))
        tokens = [words.token(i) for i in range(len(words))]
        return (lambda w: (words.unkify(w),)), {"terminals": "words", "words": words.to_dict()}, tokens
    if kind == "sentencepiece":
        from lightning_modules.data.sentencepiece import SentencePieceModel

        sp = SentencePieceModel.train([t.leaves() for seq in train_seqs for t in seq],
                                      vocab_size=int(data["sp_vocab_size"]))
        tokens = [sp.id_to_piece(i) for i in range(4, len(sp))]
        payload = {"terminals": "sentencepiece", "unknown": "<unk>",
                   "sentencepiece": base64.b64encode(sp.to_bytes()).decode("ascii")}
        return (lambda w: sp.encode_words([w])[0]), payload, tokens + ["<unk>"]
    raise InputError(f"must be 'words' or 'sentencepiece', not {kind!r}", "data.terminals")
