"""Training data of AWD-LSTM and PaLM: a treebank's splits as Mikolov-style token streams (``mikolov``), with
PaLM-S's span targets aligned to every token (``encodings.palm``), read in truncated-BPTT windows (``bptt``).

The gold spans of PaLM-S come from the tree binarized as the official code does (nltk's right-factored
``chomsky_normal_form`` of the cleaned tree) and then stripped of punctuation; trivial spans (single words, the
whole sentence) are never targets. A text corpus (``corpora``: a user's WikiText-2 copy) is read as written,
one line one sentence, without Mikolov's normalisation and without trees (no PaLM-S). ``model.vocab_size``
caps the vocabulary (10,000: Mikolov's; WikiText-2 has 33,278 types with ``<eos>``); the module is
built with the size the training split gives.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from lightning_modules.data.corpora import load_corpus
from lightning_modules.data.mikolov import EOS, mikolov_tree, stream_ids, vocabulary
from lightning_modules.data.train_data import FixedBatches, TrainData
from lightning_modules.data.transforms import binarize
from lightning_modules.data.tree import Tree, clean, nontrivial_spans
from lightning_modules.errors import InputError
from lightning_modules.families.palm.bptt import StreamBatches, batchify, fixed_windows
from lightning_modules.families.palm.encoding import span_targets


@dataclass(frozen=True)
class StreamSentence:
    """One sentence as PaLM reads it: its Mikolov words and the gold spans over them (binarized tree)."""

    words: tuple[str, ...]
    spans: frozenset[tuple[int, int]]


def stream_sentence(tree: Tree) -> StreamSentence | None:
    """A raw treebank tree as a stream sentence (None when only punctuation is left)."""
    words_tree = mikolov_tree(clean(tree))
    if words_tree is None:
        return None
    binary = mikolov_tree(binarize(clean(tree)))
    assert binary is not None
    return StreamSentence(tuple(words_tree.leaves()), frozenset(nontrivial_spans(binary)))


def split_sentences(documents: Sequence[Any], kind: str = "constituency") -> list[StreamSentence]:
    out = []
    for doc in documents:
        for location, tree in doc.sentences:
            if kind == "text":  # a line as written (a blank line still ends with <eos>)
                out.append(StreamSentence(tuple(tree.leaves()), frozenset()))
                continue
            try:
                sentence = stream_sentence(tree)
            except InputError as e:
                raise InputError(e.message, e.location or location) from None
            if sentence is not None:
                out.append(sentence)
    return out


def aligned_targets(sentences: Sequence[StreamSentence], max_span: int) -> np.ndarray:
    """float32[tokens, m]: each stream token's normalised gold selection (``encodings.palm.span_targets``)."""
    return np.concatenate([span_targets(s.spans, len(s.words), max_span) for s in sentences])


@dataclass
class StreamData(TrainData):
    """``TrainData`` whose training batches are BPTT windows of one stream (not shuffled sentences)."""

    train_ids: np.ndarray | None = None
    train_targets: np.ndarray | None = None  # palm-s: aligned span targets
    valid_ids: np.ndarray | None = None
    test_ids: np.ndarray | None = None  # the corpus's test split, for the stream-level test perplexity
    bptt: int = 70

    def train_batches(self, batch_size: int, seed: int, consumed: Callable[[], int]) -> StreamBatches:
        assert self.train_ids is not None
        rows, targets = batchify(self.train_ids, batch_size, self.train_targets)
        return StreamBatches(rows, targets, self.bptt, seed, consumed, per_epoch=self.epochs > 0)

    def valid_batches(self, batch_size: int) -> FixedBatches:
        assert self.valid_ids is not None
        return self.eval_batches(self.valid_ids, batch_size)

    def eval_batches(self, ids: np.ndarray, batch_size: int) -> FixedBatches:
        """A held-out stream in ``batch_size`` parallel rows of consecutive ``bptt`` windows."""
        rows, _ = batchify(ids, min(batch_size, max(len(ids) // 2, 1)))
        return FixedBatches(fixed_windows(rows, None, self.bptt))


def build(family: str, cfg: dict[str, Any]) -> StreamData:
    """The configured training and validation splits as streams, the vocabulary from the training split, and
    the test split (``data.test_split``, default ``test``) when the corpus has one."""
    data, model = cfg["data"], cfg["model"]
    corpus = load_corpus(data["corpus"], cfg["runtime"].get("data_dir"))
    if corpus.kind == "dependency":
        raise InputError(f"corpus {corpus.name!r} has dependency trees; {family} reads a treebank's text and "
                         "trees, or a text corpus", "data.corpus")
    if corpus.kind == "text" and family == "palm-s":
        raise InputError(f"corpus {corpus.name!r} is text without trees; palm-s trains on gold spans",
                         "data.corpus")
    splits = {}
    for key in ("train_split", "valid_split"):
        splits[key] = split_sentences(corpus.documents(data[key], f"data.{key}"), corpus.kind)
    train, valid = splits["train_split"], splits["valid_split"]
    tokens = vocabulary((s.words for s in train), int(model.get("vocab_size", 10000)))
    index = {w: i for i, w in enumerate(tokens)}
    train_ids = np.array(stream_ids((s.words for s in train), index), dtype=np.int64)
    valid_ids = np.array(stream_ids((s.words for s in valid), index), dtype=np.int64)
    test_name = data.get("test_split", "test")
    test_ids = (np.array(stream_ids((s.words for s in split_sentences(corpus.splits[test_name], corpus.kind)),
                                    index),
                         dtype=np.int64) if test_name in corpus.splits else None)
    targets = aligned_targets(train, int(model.get("max_span", 20))) if family == "palm-s" else None
    return StreamData(
        train=train, valid=valid, collate=list, vocab={"tokens": tokens, "eos": EOS}, vocab_size=len(tokens),
        valid_words=int(len(valid_ids)), train_ids=train_ids, train_targets=targets, valid_ids=valid_ids,
        test_ids=test_ids,
        bptt=int(model.get("bptt", 70)),
        epochs=int(model.get("epochs", 0)),
        stats={"train_tokens": int(len(train_ids)), "valid_tokens": int(len(valid_ids)),
               **({} if test_ids is None else {"test_tokens": int(len(test_ids))}), "vocab_size": len(tokens),
               "train_sentences": len(train), "valid_sentences": len(valid)})
