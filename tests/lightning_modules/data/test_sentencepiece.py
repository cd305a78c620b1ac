"""SentencePiece unigram models: deterministic training, serialisation, word <-> piece alignment, decoding."""

from __future__ import annotations

import pickle
from pathlib import Path

import pytest
import sentencepiece as spm

from lightning_modules.data.sentencepiece import BOUNDARY, UNK_ID, SentencePieceModel
from lightning_modules.data.tree import clean, read_bracketed
from lightning_modules.errors import InputError

VOCAB_SIZE = 2000
NONTERMINALS = ["(S", "S)", "(NP", "NP)"]
Splits = dict[str, list[list[str]]]


def _ptb_sentences(ptb: Path, first: int, last: int) -> list[list[str]]:
    trees = [tree for k in range(first, last + 1) for _, tree in read_bracketed(ptb / f"wsj_{k:04d}.mrg")]
    return [clean(tree).leaves() for tree in trees]


@pytest.fixture(scope="module")
def splits(shared_data: Path) -> Splits:
    ptb = shared_data / "ptb_nltk_sample" / "combined"
    return {"train": _ptb_sentences(ptb, 1, 159), "valid": _ptb_sentences(ptb, 160, 179)}


@pytest.fixture(scope="module")
def model(splits: Splits) -> SentencePieceModel:
    return SentencePieceModel.train(splits["train"], VOCAB_SIZE, user_defined_symbols=NONTERMINALS)


def test_training_is_deterministic(splits: Splits, model: SentencePieceModel) -> None:
    again = SentencePieceModel.train(splits["train"], VOCAB_SIZE, user_defined_symbols=NONTERMINALS)
    assert again.to_bytes() == model.to_bytes()


def test_vocabulary_layout(model: SentencePieceModel) -> None:
    assert len(model) == VOCAB_SIZE
    assert [model.id_to_piece(i) for i in range(4)] == ["<pad>", "<s>", "</s>", "<unk>"]
    # nonterminals are user-defined symbols right after the specials, each one piece
    assert [model.piece_to_id(nt) for nt in NONTERMINALS] == [4, 5, 6, 7]
    assert model.encode_words(["(NP"]) == ([BOUNDARY, "(NP"], [0, 0])


def test_serialisation_round_trip(splits: Splits, model: SentencePieceModel) -> None:
    loaded = SentencePieceModel.from_bytes(model.to_bytes())
    assert loaded.to_bytes() == model.to_bytes()
    for words in splits["valid"][:200]:
        assert loaded.encode_words_as_ids(words) == model.encode_words_as_ids(words)
    unpickled = pickle.loads(pickle.dumps(model))
    assert unpickled.to_bytes() == model.to_bytes()
    assert unpickled.encode_words(splits["valid"][0]) == model.encode_words(splits["valid"][0])
    # the bytes are a regular SentencePiece model proto
    plain = spm.SentencePieceProcessor(model_proto=model.to_bytes())
    assert plain.get_piece_size() == VOCAB_SIZE


def test_alignment_invariants(splits: Splits, model: SentencePieceModel) -> None:
    plain = spm.SentencePieceProcessor(model_proto=model.to_bytes())
    for words in splits["valid"]:
        pieces, word_index = model.encode_words(words)
        assert len(pieces) == len(word_index)
        # word indices run 0..n-1 in order, each word with at least one piece
        assert word_index == sorted(word_index)
        assert sorted(set(word_index)) == list(range(len(words)))
        # per-word encoding equals encoding the space-joined sentence
        assert pieces == plain.encode(" ".join(words), out_type=str)
        for i, word in enumerate(words):
            own = [p for p, j in zip(pieces, word_index) if j == i]
            assert own[0].startswith(BOUNDARY)
            assert not any(p.startswith(BOUNDARY) for p in own[1:])
            assert "".join(own).replace(BOUNDARY, "") == model.normalize(word).replace(BOUNDARY, "")


def test_decode_round_trip(splits: Splits, model: SentencePieceModel) -> None:
    for words in splits["valid"]:
        pieces, _ = model.encode_words(words)
        ids, _ = model.encode_words_as_ids(words)
        assert ids == [model.piece_to_id(p) for p in pieces]
        assert model.decode(pieces) == " ".join(words)
        if UNK_ID not in ids:
            assert model.decode(ids) == " ".join(words)


def test_word_offsets_in_detokenized_text(splits: Splits, model: SentencePieceModel) -> None:
    for words in splits["valid"][:300]:
        text, offsets = model.detokenize_words(words)
        assert text == model.decode(model.encode_words(words)[0])
        assert [text[s:e] for s, e in offsets] == words
    text, offsets = model.detokenize_words(["Caf\u00e9", "costs", "\u20ac5\u2026"])
    assert text == "Caf\u00e9 costs \u20ac5..."  # NFKC turns the ellipsis into three dots
    assert offsets == [(0, 4), (5, 10), (11, 16)]


def test_unknown_characters_keep_their_surface(model: SentencePieceModel) -> None:
    words = ["na\u00efve", "\u65e5\u672c"]  # characters never seen in the (ASCII) training text
    pieces, word_index = model.encode_words(words)
    ids, _ = model.encode_words_as_ids(words)
    assert UNK_ID in ids
    assert model.decode(pieces) == "na\u00efve \u65e5\u672c"
    assert "\u2047" in model.decode(ids)  # ids render unknown characters as the ⁇ placeholder
    assert word_index[-1] == 1


def test_empty_words_get_one_boundary_piece(model: SentencePieceModel) -> None:
    words = ["the", "", "\u200b", "cat"]  # a zero-width space normalises to nothing
    pieces, word_index = model.encode_words(words)
    assert sorted(set(word_index)) == [0, 1, 2, 3]
    assert [p for p, i in zip(pieces, word_index) if i in (1, 2)] == [BOUNDARY, BOUNDARY]
    text, offsets = model.detokenize_words(words)
    assert text == model.decode(pieces) == "the   cat"
    assert offsets == [(0, 3), (4, 4), (5, 5), (6, 9)]
    assert model.encode_words([]) == ([], [])
    assert model.detokenize_words([]) == ("", [])


def test_byte_fallback_round_trips_unseen_characters(splits: Splits) -> None:
    byte_model = SentencePieceModel.train(splits["train"][:800], 1000, byte_fallback=True)
    words = ["na\u00efve", "\u65e5\u672c", "cats"]
    ids, word_index = byte_model.encode_words_as_ids(words)
    assert UNK_ID not in ids
    assert byte_model.decode(ids) == "na\u00efve \u65e5\u672c cats"
    text, offsets = byte_model.detokenize_words(words)
    assert [text[s:e] for s, e in offsets] == words
    assert word_index == sorted(word_index)


def test_too_large_vocabulary_is_an_input_error() -> None:
    with pytest.raises(InputError) as err:
        SentencePieceModel.train([["a", "b"], ["b", "c"]], 5000)
    assert err.value.location == "vocab_size"


def test_corrupt_model_bytes_are_an_input_error() -> None:
    with pytest.raises(InputError):
        SentencePieceModel.from_bytes(b"not a model")
