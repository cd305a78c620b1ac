"""Corpus -> encoded training data for the DTG family (``dtg``, ``txl-trans``).

A dependency corpus (CoNLL-U, or a constituency corpus as ``NAME-dep``) is read sentence by sentence; words
map to terminal tokens (``data.terminals``): ``words`` (the default), the training vocabulary with unknown-word
classes (``vocab.WordVocab``, ``data.min_count``), or ``sentencepiece``, the pieces of a SentencePiece unigram
model of ``data.sp_vocab_size`` pieces (``<unk>`` for a piece outside the model's alphabet), one token per
piece (``encoding.encode_pieces``: the paper's appendix on subword tokenizers). The model is trained on
``data.sp_text`` (``SP_TEXTS``): ``transitions`` (the default), as the official ``tokenizer_build.py``, on the
training split's transition sequences written out (``sentencepiece_text``: ``The cat left_arc sat left_arc .
right_arc pop_root``) with the transition tokens as user-defined symbols (one piece each, never split or
learnt from); ``words``, as TG's tokenizer, on the training split's sentences, no symbols (so DTG reads TG's
pieces). The oracle
of ``model.system`` turns each tree into transitions; non-projective trees have none and are left out, as the
official preprocessing drops them, and so are sentences whose sequence exceeds one segment (DTG is sentence
level, as the official code, which keeps the first 512-token chunk); both are counted in the run's stats.

``dtg`` sequences are the doubled DTG encoding; ``txl-trans`` sequences are the undoubled transitions with
causal attention and linear relative positions. Each example carries ``added``, the ids whose embeddings are
added to the inputs (the head word's token at arc positions under ``arc_input: w+arc``; with ``w`` the arc
input *is* the head word's token).
"""

from __future__ import annotations

import base64
import re
from collections.abc import Sequence
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from lightning_modules.data.corpora import load_corpus
from lightning_modules.data.dependency import DepTree
from lightning_modules.data.encodings.batch import Batch, collate_chunk
from lightning_modules.data.encodings.choe_charniak import ActionVocab
from lightning_modules.data.encodings.example import Example
from lightning_modules.data.encodings.segmentation import Segmentation, segment
from lightning_modules.data.train_data import TrainData
from lightning_modules.data.vocab import WordVocab
from lightning_modules.errors import InputError
from lightning_modules.families.dtg import encoding as dtg

if TYPE_CHECKING:
    from lightning_modules.data.sentencepiece import SentencePieceModel

TERMINALS = ("words", "sentencepiece")
SP_TEXTS = ("transitions", "words")  # what the SentencePiece model is trained on (module docstring)
UNKNOWN_PIECE = "<unk>"  # the token of a piece outside the SentencePiece model's alphabet (TG's)

# the spelling of every non-GEN transition token and of the sequence ends: a word spelled so is escaped
_NOT_A_WORD = re.compile(r"(?:left_arc|right_arc)(?:\[\d+\])?|pop|pop_root|<s>|</s>|\\.*")


def word_token(words: WordVocab, word: str) -> str:
    """The vocabulary token of ``word``: its known form or unknown class (``escaped``)."""
    return escaped(words.unkify(word))


def sentence_tokens(terminals: WordVocab | SentencePieceModel, forms: Sequence[str]) -> list[list[str]]:
    """Each word's vocabulary tokens: its known form or unknown class, or its SentencePiece pieces (``escaped``)."""
    if isinstance(terminals, WordVocab):
        return [[word_token(terminals, w)] for w in forms]
    pieces, index = terminals.encode_words(forms)
    out: list[list[str]] = [[] for _ in forms]
    for piece, i in zip(pieces, index):
        out[i].append(escaped(piece))
    return out


def is_unknown(terminals: WordVocab | SentencePieceModel, vocab: ActionVocab, word: str) -> bool:
    """Whether ``word`` is outside the vocabulary (an unknown class, or a piece that falls back to ``<unk>``)."""
    if isinstance(terminals, WordVocab):
        return word not in terminals.known
    return any(piece not in vocab for piece in sentence_tokens(terminals, [word])[0])


def escaped(token: str) -> str:
    """A word's token with a leading backslash where it is spelled like a transition token (UD EWT's train split
    has the word "pop", arc-eager's POP token) or starts with a backslash, so that words and transitions never
    share an id."""
    return "\\" + token if _NOT_A_WORD.fullmatch(token) else token


@dataclass(frozen=True, eq=False)
class DTGExample(Example):
    """An ``Example`` with the ids added to its inputs' embeddings (0: nothing)."""

    added: np.ndarray | None = None  # int64[N]


@dataclass
class DTGBatch(Batch):
    """A ``Batch`` with ``added`` [B, L] long."""

    added: torch.Tensor | None = None

    def to(self, device: torch.device | str, non_blocking: bool = False) -> DTGBatch:
        moved = super().to(device, non_blocking)
        assert self.added is not None
        return DTGBatch(**{f.name: getattr(moved, f.name) for f in fields(Batch)},
                        added=self.added.to(device, non_blocking=non_blocking))


def build(family: str, cfg: dict[str, Any]) -> TrainData:
    """Vocabularies from the training split, encoded training and validation sentences, drop counts."""
    data, model = cfg["data"], cfg["model"]
    corpus = load_corpus(data["corpus"], cfg["runtime"].get("data_dir"))
    if corpus.kind != "dependency":
        raise InputError(f"corpus {corpus.name!r} has constituency trees; {family} needs dependency trees "
                         f"(use {corpus.name}-dep for its head-rule conversion)", "data.corpus")
    system = str(model["system"])
    length = int(model["segment_length"])
    stats: dict[str, Any] = {}
    parsed = {}
    train_forms: list[tuple[str, ...]] = []
    for key in ("train_split", "valid_split"):
        trees = [tree for _, tree in corpus.sentences(data[key], f"data.{key}")]
        kept = [(t, dtg.oracle(t.heads, system)) for t in trees if t.is_projective()]
        stats[f"{key.split('_')[0]}_nonprojective"] = len(trees) - len(kept)
        parsed[key] = kept
        if key == "train_split":
            train_forms = [t.forms for t in trees]
    terminals, terminal_tokens, payload = terminal_vocabulary(data, parsed["train_split"], train_forms)
    # transitions from the training split only: one seen only in validation (an arc-swift reach) would get an
    # untrained embedding; validation sentences that need one are left out and counted
    transitions = sorted({t.token() for _, ts in parsed["train_split"] for t in ts if t.action != "gen"})
    known = set(transitions)
    valid = [(t, ts) for t, ts in parsed["valid_split"] if all(x.action == "gen" or x.token() in known for x in ts)]
    stats["valid_unknown_transitions"] = len(parsed["valid_split"]) - len(valid)
    parsed["valid_split"] = valid
    vocab = ActionVocab(terminal_tokens, (), tuple(transitions))
    encode = example_encoder(family, system, str(model["arc_input"]), vocab, terminals)

    prepared: dict[str, list[tuple[DTGExample, Segmentation]]] = {}
    for key, kept in parsed.items():
        rows = [encode(tree, ts) for tree, ts in kept]
        fitting = [(e, segment(e, length, length, "plain")) for e in rows if len(e) <= length]
        stats[f"{key.split('_')[0]}_too_long"] = len(rows) - len(fitting)
        prepared[key] = fitting
    train, valid = prepared["train_split"], prepared["valid_split"]
    if not train or not valid:
        raise InputError("no sentence is left to train or validate on (all non-projective or too long)",
                         "data.corpus")
    valid_words = sum(int(e.word_index.max()) + 1 for e, _ in valid)
    stats.update(train_sequences=len(train), valid_sequences=len(valid),
                 train_tokens=int(sum(len(e) for e, _ in train)), vocab_size=len(vocab))
    payload = {**payload, "actions": vocab.to_json(), "system": system}
    return TrainData(train=train, valid=valid, collate=collate_sentences, vocab=payload, vocab_size=len(vocab),
                     valid_words=valid_words, stats=stats)


def terminal_vocabulary(data: dict[str, Any], train: list[tuple[DepTree, list[dtg.Transition]]],
                        train_forms: list[tuple[str, ...]]
                        ) -> tuple[WordVocab | SentencePieceModel, tuple[str, ...], dict[str, Any]]:
    """The terminals of ``data.terminals`` (a ``WordVocab`` from the projective training trees, or a
    SentencePiece model trained on ``data.sp_text``: the projective training trees' transition sequences, or
    every training sentence), their vocabulary tokens and their checkpoint payload. A piece spelled like a
    transition (a user-defined symbol inside a word) is a terminal token of its own (``escaped``)."""
    kind = data.get("terminals", "words")
    if kind == "words":
        words = WordVocab.build([w for t, _ in train for w in t.forms], int(data["min_count"]))
        return words, tuple(escaped(w) for w in words.tokens), {"terminals": "words", "words": words.to_dict()}
    if kind != "sentencepiece":
        raise InputError(f"must be one of {', '.join(TERMINALS)} (got {kind!r})", "data.terminals")
    if data.get("sp_vocab_size") is None:
        raise InputError("data.terminals: sentencepiece needs the number of pieces", "data.sp_vocab_size")
    from lightning_modules.data.sentencepiece import SentencePieceModel

    sentences, symbols = sentencepiece_text(data, train, train_forms)
    try:
        sp = SentencePieceModel.train(sentences, vocab_size=int(data["sp_vocab_size"]), user_defined_symbols=symbols)
    except InputError as e:
        raise InputError(e.message, "data.sp_vocab_size") from None
    tokens = (*(escaped(sp.id_to_piece(i)) for i in range(4, len(sp))), UNKNOWN_PIECE)
    return sp, tokens, {"terminals": "sentencepiece", "unknown": UNKNOWN_PIECE,
                        "sentencepiece": base64.b64encode(sp.to_bytes()).decode("ascii")}


def sentencepiece_text(data: dict[str, Any], train: list[tuple[DepTree, list[dtg.Transition]]],
                       train_forms: list[tuple[str, ...]]) -> tuple[list[list[str]], list[str]]:
    """What the SentencePiece model of ``data.sp_text`` is trained on: its lines (each a sequence of items that
    ``SentencePieceModel.train`` joins by spaces) and user-defined symbols. ``transitions``: each projective
    training tree's undoubled transition sequence, a GEN written as its word (the official ``conll_to_dep.py``
    output, ``The cat left_arc sat left_arc . right_arc pop_root``), the transition tokens as symbols;
    ``words``: every training sentence, no symbols."""
    text = data.get("sp_text", SP_TEXTS[0])
    if text not in SP_TEXTS:
        raise InputError(f"must be one of {', '.join(SP_TEXTS)} (got {text!r})", "data.sp_text")
    if text == "words":
        return [list(forms) for forms in train_forms], []
    return [dtg.items(t.forms, ts) for t, ts in train], transition_symbols([x for _, ts in train for x in ts])


def transition_symbols(transitions: Sequence[dtg.Transition]) -> list[str]:
    """The user-defined symbols of the SentencePiece model: the non-GEN transition tokens of the training
    sequences, by action (left_arc, right_arc, pop, pop_root: the official ``left_arc,right_arc,pop_root`` for
    arc-standard) and reach (arc-swift)."""
    order = (dtg.LEFT_ARC, dtg.RIGHT_ARC, dtg.POP, dtg.POP_ROOT)
    made = {t for t in transitions if t.action != "gen"}
    return [t.token() for t in sorted(made, key=lambda t: (order.index(t.action), t.k or 0))]


def example_encoder(family: str, system: str, arc_input: str, vocab: ActionVocab,
                    words: WordVocab | SentencePieceModel):
    """``(tree, transitions) -> DTGExample`` for ``family`` ("dtg" or "txl-trans") over the terminals
    ``words`` (a word vocabulary, or a SentencePiece model: one token per piece)."""
    unknown = None if isinstance(words, WordVocab) else UNKNOWN_PIECE

    def encode(tree: DepTree, transitions: Sequence[dtg.Transition]) -> DTGExample:
        pieces = sentence_tokens(words, tree.forms)
        if family == "txl-trans":
            return causal_example(pieces, transitions, vocab, unknown)
        return dtg_example(dtg.encode_pieces(pieces, transitions, system), vocab, arc_input, unknown)

    return encode


def dtg_example(seq: dtg.DTGSequence, vocab: ActionVocab, arc_input: str, unknown: str | None = None
                ) -> DTGExample:
    """The DTG sequence as ids, with its arc representation (``w+arc``, ``arc`` or ``w``: the head word's
    last piece); a token missing from the vocabulary is ``unknown`` (pieces' ``<unk>``), else an error."""
    tokens = vocab.ids(seq.tokens, unknown)
    arcs = seq.arc_heads >= 0
    heads = tokens[np.where(arcs, seq.arc_heads, 0)]
    added = np.where(arcs, heads, 0) if arc_input == "w+arc" else np.zeros_like(tokens)
    if arc_input == "w":
        tokens = np.where(arcs, heads, tokens)
    n = len(tokens)
    return DTGExample(
        tokens=tokens,
        labels=np.where([lab is None for lab in seq.labels], 0,
                        vocab.ids([dtg.BOS if lab is None else lab for lab in seq.labels], unknown)),
        types=seq.types,
        depth=np.zeros(n, dtype=np.int32),  # relpos are stored per attended pair; depth is not read
        compose=np.isin(seq.types, [int(t) for t in dtg.COMPOSE_TYPES]),
        word_index=seq.word_index,
        attend_ptr=seq.attend_ptr,
        attend_key=seq.attend_key,
        attend_rel=seq.attend_rel,
        relpos="depth",
        added=added,
    )


def causal_example(pieces: Sequence[Sequence[str]], transitions: Sequence[dtg.Transition], vocab: ActionVocab,
                   unknown: str | None = None) -> DTGExample:
    """TXL (trans): ``<s>`` and the undoubled transitions (a GEN as its word's pieces, ``pieces[i]`` word i's),
    each predicting the next, ``</s>`` last."""
    undoubled = dtg.piece_items(pieces, transitions)
    tokens = vocab.ids([dtg.BOS, *(item for item, _ in undoubled)], unknown)
    kinds = {"left_arc": dtg.DTGType.LA, "right_arc": dtg.DTGType.RA, "pop": dtg.DTGType.POPSTACK,
             "pop_root": dtg.DTGType.POP}
    types = [dtg.DTGType.SOS]
    words = iter(pieces)
    for t in transitions:  # a word's first piece is a GEN token (W), its later pieces T tokens
        if t.action == "gen":
            types += [dtg.DTGType.W] + [dtg.DTGType.T] * (len(next(words)) - 1)
        else:
            types.append(kinds[t.action])
    n = len(tokens)
    return DTGExample(
        tokens=tokens,
        labels=np.append(tokens[1:], vocab.id(dtg.EOS)),
        types=np.asarray(types, dtype=np.int8),
        depth=np.zeros(n, dtype=np.int32),
        compose=np.zeros(n, dtype=bool),
        word_index=np.asarray([-1, *(w for _, w in undoubled)], dtype=np.int32),
        attend_ptr=np.zeros(n + 1, dtype=np.int64),
        attend_key=np.zeros(0, dtype=np.int32),
        attend_rel=np.zeros(0, dtype=np.int32),
        relpos="linear",
        causal=True,
        added=np.zeros(n, dtype=np.int64),
    )


def collate_sentences(rows: list[tuple[DTGExample, Segmentation]]) -> list[DTGBatch]:
    """A batch of sentences (one chunk each) as a one-chunk list, with ``added`` padded like the inputs."""
    examples = [e for e, _ in rows]
    batch = collate_chunk(examples, [s for _, s in rows], 0, trim=True)
    added = np.zeros(tuple(batch.inputs.shape), dtype=np.int64)
    for r, e in enumerate(examples):
        added[r, : len(e)] = e.added
    return [DTGBatch(**{f.name: getattr(batch, f.name) for f in fields(Batch)}, added=torch.from_numpy(added))]
