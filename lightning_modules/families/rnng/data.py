"""Corpus -> training data for the RNNG: cleaned POS-free trees of the configured splits as word ids and
action ids (``encoding.py``), the word vocabulary built on the training split as rnng-pytorch's
``preprocess.py`` builds it, the nonterminals of the training and validation trees."""

from __future__ import annotations

from typing import Any

from lightning_modules.data.train_data import TrainData
from lightning_modules.data.treebank_sequences import corpus_splits
from lightning_modules.errors import InputError
from lightning_modules.families.rnng.encoding import ActionDict, WordDict, encode, nonterminals
from lightning_modules.families.rnng.model import collate

FAMILY = "rnng"


def build(cfg: dict[str, Any]) -> TrainData:
    """Vocabularies on the training split (nonterminals: training and validation), both splits encoded."""
    data, model = cfg["data"], cfg["model"]
    if data.get("terminals", "words") != "words":
        raise InputError("the RNNG reads words (unknown words as rnng-pytorch's Berkeley classes); "
                         "SentencePiece terminals are not built yet", "data.terminals")
    if data.get("level", "sentence") != "sentence":
        raise InputError("the RNNG reads sentences", "data.level")
    splits = {key: [seq[0] for seq in seqs] for key, seqs in corpus_splits(FAMILY, cfg).items()}
    words = WordDict.build([w for t in splits["train_split"] for w in t.leaves()], min_count=int(data["min_count"]))
    actions = ActionDict(tuple(nonterminals(splits["train_split"] + splits["valid_split"], pos_tags=False)),
                         model.get("strategy", "top_down"))
    encoded = {key: [encode(t, words, actions, f"data.{key} tree {i}") for i, t in enumerate(trees)]
               for key, trees in splits.items()}
    train, valid = encoded["train_split"], encoded["valid_split"]
    return TrainData(
        train=train, valid=valid, collate=collate, vocab={"words": words.to_json(), "actions": actions.to_json()},
        vocab_size=len(words), valid_words=sum(len(e.token_ids) for e in valid),
        stats={"train_sentences": len(train), "valid_sentences": len(valid), "vocab_size": len(words),
               "nonterminals": len(actions.nonterminals),
               "train_actions": sum(len(e.action_ids) for e in train)},
    )
