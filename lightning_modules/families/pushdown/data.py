"""Corpus -> training data for the Pushdown Layers family (``pushdown``, ``base-lm``).

Sentences are cleaned (Dyer et al. 2016 / Choe & Charniak 2016 as for TG), optionally transformed (TG
Table 2 ablations), and their words mapped to terminal tokens exactly as TG's data: words with Berkeley
unknown-word classes, or SentencePiece pieces (a word of several pieces becomes a right-branching subtree,
Appendix C). ``encodings.pushdown.encode`` gives each sentence's attachment labels and tape spans.

Token ids and the layout of batches: ``pushdown_batch``. ``data.corpus: dyck`` runs are built by ``dyck_data``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from lightning_modules.data.train_data import TrainData
from lightning_modules.data.tree import Tree
from lightning_modules.data.treebank_sequences import corpus_splits, terminal_mapping
from lightning_modules.data.vocab import TokenVocab
from lightning_modules.errors import InputError
from lightning_modules.families.pushdown import dyck_data
from lightning_modules.families.pushdown.batch import PushdownSentence, collate, max_depth
from lightning_modules.families.pushdown.encoding import encode


# the specials, sentences, vocabulary and batches of ``pushdown_batch`` are part of this module's interface
def with_unknown(terminals: Callable[[str], Sequence[str]], vocab: TokenVocab, unknown: str | None
                 ) -> Callable[[str], tuple[str, ...]]:
    """``terminals`` with every token outside ``vocab`` replaced by ``unknown`` (SentencePiece's ``<unk>``:
    a character never seen in training is a piece of no vocabulary). Word vocabularies (``unknown`` None)
    already map every word to a token of the vocabulary."""
    if unknown is None:
        return lambda word: tuple(terminals(word))
    return lambda word: tuple(t if t in vocab else unknown for t in terminals(word))


def encode_sentence(tree: Tree, vocab: TokenVocab, terminals: Callable[[str], Sequence[str]]
                    ) -> PushdownSentence:
    """Encode one cleaned tree; words become terminal tokens (pieces) via ``terminals``."""
    example = encode(tree, split=lambda word, _index: terminals(word))
    return PushdownSentence(vocab.sentence_ids(example.leaves), example.attachment, example.spans,
                            len(tree.leaves()))


def build(family: str, cfg: dict[str, Any]) -> TrainData:
    """Vocabulary from the training split; training and validation sentences encoded.

    ``data.corpus: dyck`` generates Dyck strings instead of reading a treebank (``dyck_data.build``).
    """
    data = cfg["data"]
    if data.get("corpus") == "dyck":
        return dyck_data.build(family, cfg)
    if data.get("level", "sentence") != "sentence":
        raise InputError(f"{family} is trained on sentences (got {data['level']!r})", "data.level")
    splits = {key: [seq[0] for seq in seqs] for key, seqs in corpus_splits(family, cfg).items()}
    train_words = [w for tree in splits["train_split"] for w in tree.leaves()]
    terminals, payload, tokens = terminal_mapping(data, train_words, [[t] for t in splits["train_split"]])
    vocab = TokenVocab(tokens)
    payload["tokens"] = list(vocab.tokens)
    terminals = with_unknown(terminals, vocab, payload.get("unknown"))
    train = [encode_sentence(t, vocab, terminals) for t in splits["train_split"]]
    valid = [encode_sentence(t, vocab, terminals) for t in splits["valid_split"]]
    if not train or not valid:
        raise InputError("the training and validation splits need at least one sentence each", "data.corpus")
    return TrainData(
        train=train, valid=valid, collate=collate, vocab=payload, vocab_size=len(vocab),
        valid_words=sum(s.words for s in valid),
        stats={"train_sequences": len(train), "valid_sequences": len(valid),
               "train_tokens": int(sum(len(s) - 1 for s in train)), "vocab_size": len(vocab),
               "max_train_depth": max(max_depth(s) for s in train)},
    )
