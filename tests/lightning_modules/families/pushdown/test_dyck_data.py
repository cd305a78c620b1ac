"""Dyck training data and test sets from a run config (``dyck_data``): deterministic, encoded as officially."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from experiments.config import resolve_train_config
from lightning_modules.errors import InputError
from lightning_modules.families.pushdown import dyck, dyck_data
from lightning_modules.families.pushdown.data import build
from lightning_modules.families.pushdown.model import build as build_model

TINY = ["data.train_strings=12", "data.valid_strings=4", "data.max_length=80"]


def _cfg(*overrides: str, family: str = "pushdown") -> dict:
    return resolve_train_config(family, "dyck", [*TINY, *overrides])


def _arrays(rows) -> list[tuple]:
    return [(r.ids.tolist(), r.attachment.tolist(), r.spans.tolist(), r.words) for r in rows]


def test_the_same_config_gives_the_same_data_and_the_seed_changes_it():
    first, again = build("pushdown", _cfg()), build("base-lm", _cfg(family="base-lm"))
    assert _arrays(first.train) == _arrays(again.train) and _arrays(first.valid) == _arrays(again.valid)
    assert first.vocab == again.vocab and first.stats == again.stats
    other = build("pushdown", _cfg("data.generation_seed=1"))
    assert _arrays(other.train) != _arrays(first.train)
    assert _arrays(first.train)[: len(first.valid)] != _arrays(first.valid)  # independent streams


def test_strings_are_the_language_encoded_with_the_official_labels():
    cfg = _cfg()
    data = build("pushdown", cfg)
    tokens = data.vocab["tokens"]
    names = dyck.bracket_types(20)
    assert tokens == ["<pad>", "<s>", "<eos>", *(f"({n}" for n in names), *(f"{n})" for n in names)]
    assert data.vocab_size == 43 and data.vocab["terminals"] == "dyck"
    strings = dyck_data.strings(cfg["data"], "train")
    assert len(strings) == 12 and len(data.valid) == 4
    for s, row in zip(strings, data.train, strict=True):
        dyck.check_string(s)
        assert 6 <= len(s) <= 80 and dyck.max_depth(s) <= 10
        assert [tokens[i] for i in row.ids] == ["<s>", *s, "<eos>"]
        example = dyck.encode_dyck(s)
        assert row.attachment.tolist() == example.attachment.tolist()
        assert row.spans.tolist() == example.spans.tolist()
    assert data.stats["max_train_nesting"] == max(dyck.max_depth(s) for s in strings)
    batch = data.collate(data.train[:2])
    # the attachment of the word predicted at each position; a closing bracket attaches to its opening one
    for b, s in enumerate(strings[:2]):
        for opening, closing in dyck.dependencies(s):
            assert int(batch.attachment[b, closing]) == opening + 1


@pytest.mark.parametrize(("override", "key"), [("data.train_strings=0", "data.train_strings"),
                                               ("data.max_length=3", "data.max_length"),
                                               ("data.generation_seed=-1", "data.generation_seed")])
def test_bad_dyck_keys_name_the_key(override, key):
    with pytest.raises(InputError) as err:
        build("pushdown", _cfg(override))
    assert err.value.location == key


def test_test_sets_are_deterministic_and_hold_what_they_promise():
    data = _cfg()["data"]
    for name, length in dyck_data.LONG_RANGE.items():
        prefixes, targets = dyck_data.test_set(data, name, size=3, seed=0)
        assert (prefixes, targets) == dyck_data.test_set(data, name, size=3, seed=0)
        assert len(prefixes) >= 3
        for p, t in zip(prefixes, targets, strict=True):
            assert t == dyck.next_closing(p) and len(p) <= dyck_data.MAX_PREFIX_LENGTH
            assert len(p) - dyck.open_stack(p)[-1][1] >= length  # the dependency closed by t
    prefixes, targets = dyck_data.test_set(data, "depth", seed=0)
    assert len(prefixes) == 105  # three rounds of depths 15..49, as the official
    assert all(t == dyck.next_closing(p) and dyck.max_depth(p) >= 15 for p, t in zip(prefixes, targets, strict=True))
    assert dyck_data.test_set(data, "depth", seed=1) != (prefixes, targets)
    # a perfect predictor (the PDFA's top closing bracket) scores 1
    def perfect(batch):
        return [{dyck.next_closing(p): 0.0, **{t: -1.0 for t in targets if t != dyck.next_closing(p)}} for p in batch]

    assert dyck.closing_bracket_accuracy(perfect, prefixes, targets) == 1.0
    with pytest.raises(InputError):
        dyck_data.test_set(data, "long-7")


def test_depth_vocab_2_is_the_official_binary_tape():
    """Depths are clamped to the table, so depth_vocab 2 reads exactly ``depth > 0`` (official Dyck tape)."""
    cfg = _cfg()
    data = build("pushdown", cfg)
    torch.manual_seed(0)
    model = build_model({**cfg["model"], "d_model": 32, "n_layers": 2, "n_heads": 2, "d_ff": 64,
                         "attachment_depth_dim": 8, "vocab_size": data.vocab_size}, "pushdown").eval()
    batch = data.collate(data.train[:3])
    assert int(batch.tape.max()) > 1
    binary = type(batch)(batch.inputs, batch.targets, batch.attachment, (batch.tape > 0).long(), batch.lengths)
    with torch.no_grad():
        words, attach = model(batch)
        words_binary, attach_binary = model(binary)
    assert torch.equal(words, words_binary)
    assert torch.equal(torch.nan_to_num(attach), torch.nan_to_num(attach_binary))
    assert not np.array_equal(batch.tape.numpy(), binary.tape.numpy())
