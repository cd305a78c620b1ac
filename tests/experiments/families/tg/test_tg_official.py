"""Network parity with the official Transformer Grammars code, and its checkpoints imported.

The golden files (``tests/golden/tg``, written by ``benchmarks/golden_tg_network.py`` from the official
JAX/Haiku model; README there) hold small official models with random weights and their per-token
log-probabilities and per-chunk losses on 20 PTB-sample sentences (dropout off, several segments per
sentence). Converted to our module, our encoding of the same trees must give the same numbers (fp32).
"""

from __future__ import annotations

import json
import os
import pickle
from pathlib import Path

import numpy as np
import pytest
import torch

from experiments.families import get_family
from lightning_modules.data.encodings.choe_charniak import ActionVocab, choe_charniak, terminal_actions
from lightning_modules.data.encodings.segmentation import segment
from lightning_modules.data.tree import drop_pos_tags, parse_tree
from lightning_modules.errors import InputError
from lightning_modules.families.tg import data as tg_data
from lightning_modules.families.tg import official
from lightning_modules.models.txl_lm import build, config_from_dict

GOLDEN = Path(__file__).resolve().parents[3] / "golden" / "tg"
CONFIGS = {"tg": "tg", "tg-compose-attn": "tg", "tg-plain-memory": "tg", "tg-no-positions": "tg",
           "txl-trees": "txl-trees", "txl-terminals": "txl-terminals"}
RTOL = 1e-5


def golden(name: str) -> dict:
    return json.loads((GOLDEN / f"{name}.json").read_text(encoding="utf-8"))


def dictionary(name: str) -> Path:
    return GOLDEN / f"{golden(name)['dictionary']}.txt"


def module_of(converted: official.Converted) -> torch.nn.Module:
    module = build({**converted.model, "attention": "dense"})
    module.load_state_dict({k: torch.from_numpy(v) for k, v in converted.state_dict.items()})
    return module.eval()


def our_scores(family: str, converted: official.Converted, sentences: list[dict]) -> tuple[list, list]:
    """Per sentence: our log-probs of the predicted tokens, and (loss sum, count) per chunk."""
    encode = tg_data.encoder(family, converted.model["relpos"])
    length = converted.model["segment_length"]
    rows = []
    for s in sentences:
        tree = drop_pos_tags(parse_tree(s["tree"]))
        actions = terminal_actions([tree]) if family == "txl-terminals" else choe_charniak(tree)
        assert list(actions.tokens) == s["tokens"]  # our Choe–Charniak sequence is the official one
        example = encode(actions, converted.vocab)
        rows.append((example, segment(example, length, length, converted.memory)))
    chunks = tg_data.collate_sequences(rows)
    logprobs = module_of(converted).token_logprobs(chunks).double()
    labels = torch.cat([c.labels for c in chunks], dim=1)
    tokens, losses = [], []
    for b in range(len(sentences)):
        tokens.append(logprobs[b][labels[b] != 0].numpy())
        n_chunks = len(rows[b][1].starts)
        losses.append([(-float(logprobs[b, c * length:(c + 1) * length].sum()),
                        int((labels[b, c * length:(c + 1) * length] != 0).sum())) for c in range(n_chunks)])
    return tokens, losses


@pytest.mark.parametrize("name", list(CONFIGS))
def test_our_network_equals_the_official_one(name):
    family, gold = CONFIGS[name], golden(name)
    converted = official.convert(family, GOLDEN / f"{name}.npz", dictionary(name))
    tokens, losses = our_scores(family, converted, gold["sentences"])
    assert sum(len(c) for c in losses) > len(losses)  # sentences span several segments
    total = count = 0.0
    for ours, chunk_losses, s in zip(tokens, losses, gold["sentences"], strict=True):
        np.testing.assert_allclose(ours, s["logprobs"], rtol=RTOL, atol=0)
        assert [n for _, n in chunk_losses] == [n for _, n in s["chunk_losses"]]
        for (loss, n), (official_loss, _) in zip(chunk_losses, s["chunk_losses"], strict=True):
            if n:  # train.py's per-chunk loss: total_loss / total_count
                assert loss / n == pytest.approx(official_loss / n, rel=RTOL)
        total += sum(loss for loss, _ in chunk_losses)
        count += sum(n for _, n in chunk_losses)
    assert count == gold["total_count"] and total / count == pytest.approx(gold["loss"], rel=RTOL)


def test_pickle_and_npz_forms_convert_identically():
    from_pickle = official.convert("tg", GOLDEN / "tg.pkl", dictionary("tg"))
    from_npz = official.convert("tg", GOLDEN / "tg.npz", dictionary("tg"))
    assert from_pickle.source["format"] == "pickle" and from_npz.source["format"] == "npz"
    assert from_pickle.model == from_npz.model and from_pickle.memory == from_npz.memory == "smart"
    assert from_pickle.state_dict.keys() == from_npz.state_dict.keys()
    assert all(np.array_equal(from_pickle.state_dict[k], from_npz.state_dict[k]) for k in from_npz.state_dict)


def test_converted_settings_are_the_official_conventions():
    tg = official.convert("tg", GOLDEN / "tg-compose-attn.npz", dictionary("tg")).model
    assert (tg["relpos"], tg["min_rel"], tg["max_rel"], tg["use_different_attn_fns"]) == ("delta_depth", -1, 62, True)
    txl = official.convert("txl-trees", GOLDEN / "txl-trees.npz", dictionary("txl-trees"))
    assert (txl.model["relpos"], txl.model["min_rel"], txl.model["max_rel"], txl.memory) == ("linear", -15, 32, "plain")
    assert txl.model["attention_dropout"] == txl.model["core_dropout"]
    config_from_dict(txl.model)  # a valid TGConfig
    assert official.convert("tg", GOLDEN / "tg-plain-memory.npz", dictionary("tg")).memory == "plain"
    assert official.convert("tg", GOLDEN / "tg-no-positions.npz", dictionary("tg")).model["relpos"] == "none"


@pytest.mark.parametrize("name", ["tg", "txl-terminals"])
def test_imported_run_scores_as_the_official_model(name):
    """``synbench import``'s part: a run config and vocabularies as training writes them, and a state_dict that
    our scorer loads and that reproduces the official log-probabilities through the scoring code."""
    from experiments.families.tg.scorers import TGModel

    family, gold = CONFIGS[name], golden(name)
    importing = get_family(family).importing()
    assert importing.needs_vocab and "transformer_grammars" in importing.official
    checkpoint = GOLDEN / ("tg.pkl" if name == "tg" else f"{name}.npz")
    imported = importing.convert(checkpoint, dictionary(name), None)
    assert {"family", "preset", "model", "data", "train", "runtime"} <= imported.config.keys()
    assert imported.config["family"] == family and imported.vocab["terminals"] == "words"
    vocab = ActionVocab.from_json(imported.vocab["actions"])
    module = build({**imported.config["model"], "vocab_size": len(vocab), "attention": "dense"})
    module.load_state_dict(imported.state_dict)
    model = TGModel(module, {"family": family, "vocab": imported.vocab, "config": imported.config}, vocab)
    sentence = gold["sentences"][0]
    tree = drop_pos_tags(parse_tree(sentence["tree"]))
    example = model.encode(terminal_actions([tree]) if family == "txl-terminals" else choe_charniak(tree))
    (logprobs,) = model.label_logprobs([example])
    np.testing.assert_allclose(logprobs[example.labels != 0], sentence["logprobs"], rtol=RTOL, atol=0)


# -- bad inputs ----------------------------------------------------------------------------------------------
def error_of(call) -> InputError:
    with pytest.raises(InputError) as info:
        call()
    return info.value


def test_checkpoint_of_another_family_or_format(tmp_path):
    torch_file = tmp_path / "model.pt"
    torch.save({"state_dict": {"w": torch.zeros(2)}}, torch_file)
    other_pickle = tmp_path / "other.pkl"
    other_pickle.write_bytes(pickle.dumps({"model": np.zeros(3), "args": {"lr": 1}}))
    text = tmp_path / "notes.txt"
    text.write_text("hello")
    for path in (torch_file, other_pickle, text):
        e = error_of(lambda p=path: official.convert("tg", p, dictionary("tg")))
        assert e.location == str(path) and "checkpoint" in e.message
    # a TXL checkpoint imported as TG, and the other way round
    e = error_of(lambda: official.convert("tg", GOLDEN / "txl-trees.npz", dictionary("tg")))
    assert e.location == str(GOLDEN / "txl-trees.npz") and "txl-trees" in e.message
    e = error_of(lambda: official.convert("txl-trees", GOLDEN / "tg.npz", dictionary("tg")))
    assert "import it as tg" in e.message
    # a words-only dictionary for a tree model
    e = error_of(lambda: official.convert("txl-trees", GOLDEN / "txl-terminals.npz", dictionary("txl-terminals")))
    assert e.location == str(dictionary("txl-terminals")) and "nonterminals" in e.message


@pytest.mark.parametrize("name", ["tg.pkl", "tg.npz"])
def test_truncated_checkpoint(tmp_path, name):
    path = tmp_path / name
    data = (GOLDEN / name).read_bytes()
    path.write_bytes(data[: len(data) // 2])
    e = error_of(lambda: official.convert("tg", path, dictionary("tg")))
    assert e.location == str(path) and "cannot read" in e.message


def test_vocabulary_that_does_not_match_the_embedding(tmp_path):
    words = dictionary("tg").read_text(encoding="utf-8").splitlines()
    meta = json.loads(dictionary("tg").with_suffix(".json").read_text())
    meta["num_terminals"] -= 1
    del words[4]  # one terminal fewer
    path = tmp_path / "dict.txt"
    path.write_text("".join(w + "\n" for w in words), encoding="utf-8")
    path.with_suffix(".json").write_text(json.dumps(meta))
    e = error_of(lambda: official.convert("tg", GOLDEN / "tg.npz", path))
    assert e.location == str(path) and "rows" in e.message
    # no metadata beside it, a metadata count that does not match, SentencePiece files, no vocabulary at all
    lone = tmp_path / "lone.txt"
    lone.write_text("<PAD>\n")
    assert "missing" in error_of(lambda: official.convert("tg", GOLDEN / "tg.npz", lone)).message
    meta["num_terminals"] += 5
    path.with_suffix(".json").write_text(json.dumps(meta))
    assert error_of(lambda: official.convert("tg", GOLDEN / "tg.npz", path)).location == str(path)
    assert "SentencePiece" in error_of(lambda: official.convert("tg", GOLDEN / "tg.npz", tmp_path / "sp.model")).message
    assert error_of(lambda: official.convert("tg", GOLDEN / "tg.npz", None)).location == "--vocab"


class Exploit:
    def __reduce__(self):
        return (os.system, ("touch pwned-by-checkpoint",))


def test_pickles_never_run_code(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "checkpoint.pkl"
    path.write_bytes(pickle.dumps({"params": Exploit(), "config": {}}))
    error_of(lambda: official.read_checkpoint(path))
    assert not (tmp_path / "pwned-by-checkpoint").exists()
