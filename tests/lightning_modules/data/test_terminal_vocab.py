"""Vocabulary payloads -> the terminal vocabulary (``vocab.terminal_vocab``), and the parser's encoder ids."""

from __future__ import annotations

import base64

import pytest

from lightning_modules.data.sentencepiece import SentencePieceModel
from lightning_modules.data.vocab import WordVocab, terminal_vocab
from lightning_modules.errors import InputError
from lightning_modules.families.parser import data as parser_data

SENTENCES = [["the", "cat", "sat", "on", "the", "mat"], ["a", "dog", "barked", "at", "the", "cats"],
             ["cats", "and", "dogs", "sat", "together"]] * 20


def _sp_payload() -> tuple[SentencePieceModel, dict]:
    sp = SentencePieceModel.train(SENTENCES, vocab_size=24)
    return sp, {"terminals": "sentencepiece", "unknown": "<unk>",
                "sentencepiece": base64.b64encode(sp.to_bytes()).decode("ascii")}


def test_a_word_payload_gives_its_word_vocabulary_and_shifted_encoder_ids():
    words = WordVocab.build([w for s in SENTENCES for w in s], min_count=2)
    payload = {"terminals": "words", "words": words.to_dict()}
    assert terminal_vocab(payload) == words
    assert parser_data.source_vocab_size(payload) == len(words) + 1
    sentence = ["the", "zebra", "sat"]
    assert parser_data.source_mapping(payload)(sentence) == ([words.id(w) + 1 for w in sentence], [0, 1, 2])


def test_a_sentencepiece_payload_gives_its_model_and_piece_ids():
    sp, payload = _sp_payload()
    model = terminal_vocab(payload)
    assert isinstance(model, SentencePieceModel) and model.to_bytes() == sp.to_bytes()
    assert parser_data.source_vocab_size(payload) == len(sp)
    sentence = ["the", "cats", "barked"]
    ids, index = sp.encode_words_as_ids(sentence)
    first = [i for i, w in enumerate(index) if i == 0 or index[i - 1] != w]
    assert parser_data.source_mapping(payload)(sentence) == (ids, first)
    assert len(first) == len(sentence)


def test_an_unknown_kind_is_an_input_error_at_the_source():
    with pytest.raises(InputError, match="unknown vocabulary kind 'chars'") as err:
        terminal_vocab({"terminals": "chars"}, "checkpoint vocabulary")
    assert err.value.location == "checkpoint vocabulary"
