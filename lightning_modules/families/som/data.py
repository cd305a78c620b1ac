"""Corpus -> training data for Syntactic Ordered Memory (``som``): UD sentences, Γ, padded batches.

Sentences come from a dependency corpus (UD CoNLL-U: ``ud-ewt`` or a registered converted treebank); each
gives Γ (Fig. 4, crossed arcs lifted) or, for Table 2's ablation ``model.tree_labels: left_branching``, the
left-branching tree over its words. Words map to tokens with Berkeley unknown-word classes, as the paper's
PTB preprocessing (§4.1), through the same vocabulary as the other word-level families.

Ids: 0 ``<pad>``, 1 ``<s>``, 2 ``<eos>``, then the word tokens. A batch of sentences of n words (T = max n
+ 1, padded with 0):
  ``inputs``        [B, T]      ``<s> w_1 .. w_n``
  ``targets``       [B, T]      ``w_1 .. w_n <eos>`` (0 = padding, no loss)
  ``first_sibling`` [B, T + 1]  Algorithm 1's first_sibling over ``<s> w_1 .. w_n <eos>`` (-1 first, 0 padding)
  ``slots``         [B, T + 1]  the gold grid labels of the same tokens (``encodings.som``)
  ``lengths``       [B]         n + 1, the valid input positions
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import Tensor

from lightning_modules.data.vocab import TokenVocab
from lightning_modules.errors import InputError
from lightning_modules.families.som import encoding as som


@dataclass
class SOMBatch:
    """Padded tensors of a batch (module docstring); ``to(device)`` moves them all."""

    inputs: Tensor
    targets: Tensor
    first_sibling: Tensor
    slots: Tensor
    lengths: Tensor

    def to(self, device: torch.device | str) -> SOMBatch:
        return SOMBatch(*(t.to(device) for t in (self.inputs, self.targets, self.first_sibling, self.slots,
                                                   self.lengths)))


def collate(rows: Sequence[som.SOMExample]) -> SOMBatch:
    """Pad a list of encoded sentences into a ``SOMBatch``."""
    length = max(len(r) for r in rows)
    arrays = {name: np.zeros((len(rows), length + extra), dtype=np.int64)
              for name, extra in (("inputs", 0), ("targets", 0), ("first_sibling", 1), ("slots", 1))}
    for b, r in enumerate(rows):
        for name, array in arrays.items():
            value = getattr(r, name)
            array[b, : len(value)] = value
    lengths = np.array([len(r) for r in rows], dtype=np.int64)
    return SOMBatch(**{k: torch.from_numpy(v) for k, v in arrays.items()}, lengths=torch.from_numpy(lengths))


def sentence_shape(words: Sequence[str], tree: Any, tree_labels: str) -> som.Shape:
    """The binary tree the model learns for a sentence: Γ of a dependency tree (or the binary shape of a
    constituency tree), or the left-branching tree (Table 2)."""
    if tree_labels == "left_branching":
        return som.left_branching(len(words))
    if tree_labels != "gold":
        raise InputError(f"must be one of {', '.join(som.TREE_LABELS)}, not {tree_labels!r}", "model.tree_labels")
    from lightning_modules.data.dependency import DepTree

    return som.binary_shape(som.gamma(tree) if isinstance(tree, DepTree) else tree)


def scoring_tags(tree: Any) -> list[str]:
    """The POS tags a sentence's parses are scored with (``experiments.families.som.parsing``): the
    preterminals of a constituency tree; for a dependency tree its UPOS (UD marks punctuation ``PUNCT``,
    whatever its XPOS: LinES writes ``Period``, ParTUT ``FS``), XPOS for words without one (trees converted
    from a constituency treebank tag only punctuation, ``lightning_modules.data.head_rules``)."""
    from lightning_modules.data.dependency import DepTree

    if isinstance(tree, DepTree):
        return [u if u != "_" else x for u, x in zip(tree.upos, tree.xpos)]
    return [t for _, t in tree.pos()]


def clamped(example: som.SOMExample, n_slots: int) -> bool:
    """Whether a sentence's tree is deeper than the memory, so that its grid labels are clamped at slot 0."""
    return bool(som.depth_slots(example.first_sibling, n_slots).min() < 0)


def encode_sentence(words: Sequence[str], tree: Any, vocab: TokenVocab, unkify: Any, n_slots: int,
                    tree_labels: str, tags: Sequence[str] = ()) -> som.SOMExample:
    """One sentence's example: word ids through ``unkify`` and the vocabulary, and its structure."""
    ids = [vocab.id(unkify(w)) for w in words]
    return som.encode(ids, sentence_shape(words, tree, tree_labels), n_slots, vocab.id(som.SOS),
                      vocab.id(som.EOS), tags)


def build(cfg: dict[str, Any]) -> Any:
    """Vocabulary from the training split (Berkeley unknown-word classes); training and validation sentences
    encoded under ``model.tree_labels``. A dependency corpus gives Γ (Fig. 4); a constituency treebank its
    cleaned trees binarized left (Appendix B.1's "original PTB trees" setting)."""
    from lightning_modules.data.corpora import read_split
    from lightning_modules.data.train_data import TrainData
    from lightning_modules.data.vocab import WordVocab

    data, model = cfg["data"], cfg["model"]
    if data.get("level", "sentence") != "sentence":
        raise InputError(f"SOM is trained on sentences (got {data['level']!r})", "data.level")
    if data.get("terminals", "words") != "words":
        raise InputError("SOM reads words (Berkeley unknown-word classes), not subword pieces", "data.terminals")
    splits = {}
    for key in ("train_split", "valid_split"):
        try:
            _, splits[key] = read_split(data["corpus"], data[key], data_dir=cfg["runtime"].get("data_dir"))
        except InputError as e:
            where = {"--split": f"data.{key}", "--corpus": "data.corpus", None: "data.corpus"}
            raise InputError(e.message, where.get(e.location, e.location)) from None
    words = WordVocab.build([w for s in splits["train_split"] for w in s.words], int(data.get("min_count", 2)))
    vocab = TokenVocab([words.token(i) for i in range(len(words))])
    n_slots, labels = int(model.get("n_slots", 15)), model.get("tree_labels", "gold")

    def encode_split(sentences: list[Any]) -> list[som.SOMExample]:
        out = []
        for s in sentences:
            try:
                out.append(encode_sentence(s.words, s.tree, vocab, words.unkify, n_slots, labels,
                                           scoring_tags(s.tree)))
            except InputError as e:
                raise InputError(e.message, e.location or s.location) from None
        return out

    train, valid = encode_split(splits["train_split"]), encode_split(splits["valid_split"])
    deep = {name: sum(clamped(e, n_slots) for e in split) for name, split in (("train", train), ("valid", valid))}
    payload = {"terminals": "words", "words": words.to_dict(), "tokens": list(vocab.tokens)}
    return TrainData(
        train=train, valid=valid, collate=collate, vocab=payload, vocab_size=len(vocab),
        valid_words=sum(len(e) - 1 for e in valid),
        stats={"train_sequences": len(train), "valid_sequences": len(valid),
               "train_tokens": int(sum(len(e) for e in train)), "vocab_size": len(vocab),
               "train_lowest_slot": int(min(e.slots.min() for e in train)),
               # sentences deeper than the memory (their labels clamped at slot 0, ``encoding``)
               "train_clamped_sentences": deep["train"], "train_clamped_share": deep["train"] / len(train),
               "valid_clamped_sentences": deep["valid"], "valid_clamped_share": deep["valid"] / len(valid)},
    )
