"""Corpus -> encoded training data for the TG family (``tg``, ``txl-trees``, ``txl-terminals``).

Trees are cleaned as Dyer et al. (2016) / Choe & Charniak (2016), POS tags dropped, optionally transformed
(TG Table 2 ablations), their terminals mapped to words with Berkeley unknown-word classes (PTB convention)
or to SentencePiece pieces, then Choe–Charniak-linearised and encoded by the family's rule. Sequences are
sentences, or documents (``<s>`` once, TG §3's document-level setting).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from lightning_modules.data.encodings.batch import collate_chunk
from lightning_modules.data.encodings.choe_charniak import (
    Actions,
    ActionVocab,
    choe_charniak,
    document_choe_charniak,
    terminal_actions,
)
from lightning_modules.data.encodings.segmentation import segment
from lightning_modules.data.train_data import TrainData
from lightning_modules.data.tree import Tree
from lightning_modules.data.treebank_sequences import corpus_splits, terminal_mapping
from lightning_modules.errors import InputError
from lightning_modules.families.tg import encoding as tg_encoding
from lightning_modules.families.tg import txl_encoding

FAMILIES = ("tg", "txl-trees", "txl-terminals")  # the three share the TXL LM (models/txl_lm.py)
RELPOS = {"delta_depth": "depth", "linear": "linear", "none": "none"}


def build(family: str, cfg: dict[str, Any]) -> TrainData:
    """Build vocabularies on the training split and encode training and validation sequences."""
    data, model = cfg["data"], cfg["model"]
    splits = corpus_splits(family, cfg)

    train_words = [w for seq in splits["train_split"] for tree in seq for w in tree.leaves()]
    terminals, vocab_payload, terminal_tokens = terminal_mapping(data, train_words, splits["train_split"])
    linearise = actions_function(family, data["level"], terminals)
    train_actions = [linearise(seq) for seq in splits["train_split"]]
    valid_actions = [linearise(seq) for seq in splits["valid_split"]]
    action_vocab = build_action_vocab(terminal_tokens, train_actions + valid_actions)
    unknown = vocab_payload.get("unknown")

    encode = encoder(family, model["relpos"])
    length, memory = int(model["segment_length"]), int(model["memory_length"])
    if memory != length:
        raise InputError(f"must equal model.segment_length={length} (as the official library)",
                         "model.memory_length")

    def prepare(actions: Actions) -> tuple[Any, Any]:
        example = encode(actions, action_vocab, unknown=unknown)
        return example, segment(example, length, length, data["memory"])

    train = [prepare(a) for a in train_actions]
    valid = [prepare(a) for a in valid_actions]
    vocab_payload["actions"] = action_vocab.to_json()
    return TrainData(
        train=train, valid=valid, collate=collate_sequences, vocab=vocab_payload, vocab_size=len(action_vocab),
        valid_words=sum(len(tree.leaves()) for seq in splits["valid_split"] for tree in seq),
        stats={"train_sequences": len(train), "valid_sequences": len(valid),
               "train_tokens": int(sum(len(e) for e, _ in train)), "vocab_size": len(action_vocab)},
    )


def actions_function(family: str, level: str, terminals: Callable[[str], Sequence[str]]
                     ) -> Callable[[list[Tree]], Actions]:
    """How one sequence of trees is linearised for ``family``."""
    if family == "txl-terminals":
        return lambda trees: terminal_actions(trees, terminals)
    if level == "document":
        return lambda trees: document_choe_charniak(trees, terminals)
    return lambda trees: choe_charniak(trees[0], terminals)


def build_action_vocab(terminal_tokens: list[str], sequences: list[Actions]) -> ActionVocab:
    """All terminal tokens of the word/piece vocabulary plus the nonterminals seen in the given sequences.

    Nonterminal labels are taken from training and validation trees: they are structure, not lexical data,
    and a validation tree with an unseen label would otherwise be unencodable.
    """
    seen = ActionVocab.build(sequences)
    terminals = sorted(set(terminal_tokens) - {"<s>", "</s>", "<pad>", "<XXX>"})
    return ActionVocab(tuple(terminals), seen.opening, seen.closing)


def encoder(family: str, relpos: str) -> Callable[..., Any]:
    """The family's encoding function with the configured relative positions."""
    if relpos not in RELPOS:
        raise InputError(f"must be one of {', '.join(RELPOS)}", "model.relpos")
    if family == "tg":
        return lambda actions, vocab, unknown=None: tg_encoding.encode(actions, vocab, RELPOS[relpos], unknown)
    if relpos == "delta_depth":
        raise InputError(f"{family} has no tree depth; use relpos=linear or none", "model.relpos")
    return lambda actions, vocab, unknown=None: txl_encoding.encode(actions, vocab, RELPOS[relpos], unknown)


def collate_sequences(rows: list[tuple[Any, Any]]) -> list[Any]:
    """A batch of whole sequences as the list of its chunk batches (memory carried across them)."""
    examples = [e for e, _ in rows]
    segs = [s for _, s in rows]
    return [collate_chunk(examples, segs, c, trim=True) for c in range(max(len(s) for s in segs))]
