"""Parity with the official DTG code: its checkpoints convert (``lightning_modules/families/dtg/official.py``) and
our network gives its per-token log-probabilities and losses.

``tests/golden/dtg`` holds small official models (DTG and TXL (trans), random weights) in the official
checkpoint format and their values on 20 PTB-sample sentences, written by ``benchmarks/golden_dtg_network.py``
from the official code (the folder's README names the commit and the command). Our module, built from the
converted checkpoint, encodes the same sentences (forms, heads and the official pieces recorded there) with our
encoding and must give every predicted token's log-probability within 1e-5 relative (fp32, dropout off); the
loss of a token is minus it, and their sum is the loss the official forward returned.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from lightning_modules.data.encodings.choe_charniak import ActionVocab
from lightning_modules.data.encodings.segmentation import segment
from lightning_modules.errors import InputError
from lightning_modules.families.dtg import data as dtg_data
from lightning_modules.families.dtg import encoding as dtg
from lightning_modules.families.dtg import official
from lightning_modules.families.dtg.model import build

GOLDEN = Path(__file__).resolve().parents[3] / "golden" / "dtg"
FAMILIES = ("dtg", "txl-trans")
ARCS = {"left_arc", "right_arc", "pop_root"}


def golden(family: str) -> dict[str, Any]:
    return json.loads((GOLDEN / f"{family}.json").read_text(encoding="utf-8"))


def word_pieces(pieces: list[str]) -> list[list[str]]:
    """Each word's pieces in the official piece sequence (a word starts at a ``▁`` piece; arcs are not words)."""
    words: list[list[str]] = []
    for piece in pieces:
        if piece in ARCS:
            continue
        if piece.startswith("\u2581") or not words:
            words.append([])
        words[-1].append(dtg_data.escaped(piece))
    return words


def ours(family: str) -> tuple[Any, ActionVocab]:
    """Our module (eval, fp32) and vocabulary from the converted golden checkpoint."""
    converted, terminals, transitions, state = official.convert(GOLDEN / f"{family}.pt", GOLDEN / "spm.vocab")
    assert converted.family == family
    module = build(converted.config)
    module.load_state_dict(state, strict=True)
    return module.eval(), ActionVocab(terminals, (), transitions)


def our_token(piece: str) -> str:
    return official.SPECIALS.get(piece) or (piece if piece in ARCS else dtg_data.escaped(piece))


@pytest.mark.parametrize("family", FAMILIES)
def test_per_token_logprobs_match_the_official_network(family: str) -> None:
    module, vocab = ours(family)
    values = golden(family)
    assert len(values["sentences"]) == 20
    for sentence in values["sentences"]:
        pieces = word_pieces(sentence["pieces"])
        assert len(pieces) == len(sentence["forms"])
        transitions = dtg.oracle(tuple(sentence["heads"]), "standard")
        assert " ".join(dtg.items(sentence["forms"], transitions)) == sentence["actions"]
        if family == "txl-trans":
            example = dtg_data.causal_example(pieces, transitions, vocab, dtg_data.UNKNOWN_PIECE)
        else:
            example = dtg_data.dtg_example(dtg.encode_pieces(pieces, transitions, "standard"), vocab,
                                           module.config.arc_input, dtg_data.UNKNOWN_PIECE)
        chunks = dtg_data.collate_sentences([(example, segment(example, 512, 512, "plain"))])
        with torch.no_grad():
            logprobs = module.token_logprobs(chunks)[0].double().numpy()
            total, count = module.nll(chunks)
        labels = chunks[0].labels[0].numpy()
        predicted = np.flatnonzero(labels)
        assert [vocab.tokens[i] for i in labels[predicted]] == [our_token(t) for t in sentence["targets"]], \
            sentence["location"]
        assert [vocab.tokens[i] for i in example.tokens[predicted]] == [our_token(t) for t in sentence["inputs"]] \
            or family == "dtg"  # DTG's arc inputs are the arc token plus the head's (checked below)
        expected = np.asarray(sentence["logprob"])
        np.testing.assert_allclose(logprobs[predicted], expected, rtol=1e-5, atol=1e-6, err_msg=sentence["location"])
        # the loss: minus the log-probabilities, summed as the official forward returns it
        assert int(count) == len(expected)
        assert float(total) == pytest.approx(sentence["official_loss"], rel=1e-5)
        assert -logprobs[predicted].sum() == pytest.approx(sentence["official_loss"], rel=1e-5)


def test_dtg_arc_inputs_are_the_official_ones() -> None:
    """At an arc token the official input is the head's token plus the arc's (``sub+action``): ours is the arc
    token with the head's id in ``added``."""
    module, vocab = ours("dtg")
    for sentence in golden("dtg")["sentences"]:
        pieces = word_pieces(sentence["pieces"])
        transitions = dtg.oracle(tuple(sentence["heads"]), "standard")
        example = dtg_data.dtg_example(dtg.encode_pieces(pieces, transitions, "standard"), vocab, "w+arc",
                                       dtg_data.UNKNOWN_PIECE)
        predicted = np.flatnonzero(example.labels)
        for position, head, arc in zip(predicted, sentence["inputs"], sentence["arc_inputs"]):
            if arc is None:
                assert vocab.tokens[example.tokens[position]] == our_token(head)
                assert example.added[position] == 0
            else:
                assert vocab.tokens[example.tokens[position]] == arc
                assert vocab.tokens[example.added[position]] == our_token(head)


def test_split_head_is_a_distribution() -> None:
    """The split head's log-probabilities sum to 1 over the vocabulary (the official lost mass sits on the
    placeholder), so log_softmax and cross-entropy of every caller leave them as they are."""
    module, vocab = ours("dtg")
    sentence = golden("dtg")["sentences"][0]
    transitions = dtg.oracle(tuple(sentence["heads"]), "standard")
    example = dtg_data.dtg_example(dtg.encode_pieces(word_pieces(sentence["pieces"]), transitions, "standard"),
                                   vocab, "w+arc", dtg_data.UNKNOWN_PIECE)
    chunks = dtg_data.collate_sentences([(example, segment(example, 512, 512, "plain"))])
    with torch.no_grad():
        (out,), _ = module(chunks)
    assert torch.allclose(out.logsumexp(-1), torch.zeros(()), atol=1e-5)
    assert torch.allclose(out.log_softmax(-1), out, atol=1e-5)


def test_imported_model_matches_a_trained_runs_records(tmp_path: Path) -> None:
    """The adapter's importing part: config and vocabularies as a trained run's checkpoint records them, the
    state_dict loading into the module the config builds."""
    from experiments.families import get_family

    for family in FAMILIES:
        importing = get_family(family).importing()
        assert importing is not None and importing.takes_tokenizer
        imported = importing.convert(GOLDEN / f"{family}.pt", GOLDEN / "spm.vocab", GOLDEN / "spm.model")
        assert imported.config["family"] == family
        model = imported.config["model"]
        vocab = ActionVocab.from_json(imported.vocab["actions"])
        assert imported.vocab["terminals"] == "sentencepiece" and imported.vocab["system"] == "standard"
        module = build({**model, "vocab_size": len(vocab)})
        module.load_state_dict(imported.state_dict, strict=True)
        assert imported.source["official_class"].endswith("TransformerGrammar")


# ---- bad inputs --------------------------------------------------------------------------------------------
def test_a_synbench_checkpoint_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "best.ckpt"
    torch.save({"state_dict": {"w": torch.zeros(2)}, "synbench": {"family": "tg"}}, path)
    with pytest.raises(InputError, match="synbench checkpoint") as info:
        official.read(path)
    assert info.value.location == str(path)


def test_another_pickled_class_is_refused_without_running_it(tmp_path: Path) -> None:
    path = tmp_path / "model.pt"
    torch.save({"model": torch.nn.GRU(2, 2), "vocab": ["<pad>"]}, path)
    with pytest.raises(InputError, match="not an official") as info:
        official.read(path)
    assert info.value.location == str(path)


def test_a_truncated_checkpoint_is_refused(tmp_path: Path) -> None:
    data = (GOLDEN / "dtg.pt").read_bytes()
    path = tmp_path / "dtg.pt"
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(InputError, match="not an official") as info:
        official.read(path)
    assert info.value.location == str(path)
    with pytest.raises(InputError, match="not found"):
        official.read(tmp_path / "missing.pt")


def test_a_vocabulary_that_does_not_match_the_embedding_is_refused(tmp_path: Path) -> None:
    path = GOLDEN / "dtg.pt"
    read = official.read(path)
    short = replace(read, vocab=read.vocab[:-5])
    terminals, transitions = official.our_tokens(short.vocab)
    with pytest.raises(InputError, match="embedding has 160 rows but the vocabulary 155 pieces") as info:
        official.convert_weights(short, ActionVocab(terminals, (), transitions).tokens, path)
    assert info.value.location == str(path)
    listed = tmp_path / "spm.vocab"
    listed.write_text("".join(f"{p}\t0\n" for p in golden_vocab()[:-1]), encoding="utf-8")
    with pytest.raises(InputError, match="differ") as info:
        official.convert(GOLDEN / "dtg.pt", listed)
    assert info.value.location == str(listed)


def golden_vocab() -> list[str]:
    return [line.split("\t")[0] for line in (GOLDEN / "spm.vocab").read_text(encoding="utf-8").splitlines()]


@pytest.mark.parametrize("family", FAMILIES)
def test_an_imported_run_scores_as_the_official_network(tmp_path: Path, family: str) -> None:
    """``synbench import`` end to end: the run folder's checkpoint loads as any trained run's (``DTGModel``), its
    embedded SentencePiece model cuts the words into the official pieces, and its label log-probabilities are
    the official ones."""
    from experiments.families import get_family
    from experiments.imports import import_run
    from lightning_modules.data.dependency import DepTree

    run = import_run(family, GOLDEN / f"{family}.pt", None, GOLDEN, tmp_path / "run")
    model = get_family(family).load(run / "checkpoints" / "best.ckpt")
    for sentence in golden(family)["sentences"][:5]:
        tree = DepTree(tuple(sentence["forms"]), tuple(sentence["heads"]), ("_",) * len(sentence["forms"]))
        example = model.encode_tree(tree)
        (logprobs,) = model.label_logprobs([example])
        predicted = np.flatnonzero(example.labels)
        np.testing.assert_allclose(logprobs[predicted], sentence["logprob"], rtol=1e-5, atol=1e-6,
                                   err_msg=sentence["location"])


def test_a_tokenizer_that_is_not_the_checkpoints_is_refused(tmp_path: Path) -> None:
    from experiments.families import get_family

    importing = get_family("dtg").importing()
    with pytest.raises(InputError, match="needs its SentencePiece model") as info:
        importing.convert(GOLDEN / "dtg.pt", None, None)
    assert info.value.location == str(GOLDEN / "dtg.pt")
    bad = tmp_path / "spm.model"
    bad.write_bytes(b"not a model")
    with pytest.raises(InputError, match="not a SentencePiece model") as info:
        importing.convert(GOLDEN / "dtg.pt", None, bad)
    assert info.value.location == str(bad)
    with pytest.raises(InputError, match="import it as txl-trans"):
        importing.convert(GOLDEN / "txl-trans.pt", None, GOLDEN)


def test_the_official_settings_are_named_config_values() -> None:
    """``output_head: official`` is the split head on arc-standard only (the official system); ``split`` on
    another system is an error; the dtg presets use the official network, txl-trans one softmax."""
    from experiments.config import resolve_train_config
    from lightning_modules.families.dtg.model import config_from_dict

    small = {"vocab_size": 20, "d_model": 16, "n_layers": 1, "n_heads": 2, "d_ff": 32, "attention": "dense"}
    with pytest.raises(InputError) as info:
        config_from_dict({**small, "output_head": "split", "system": "eager"})
    assert info.value.location == "model.output_head"
    with pytest.raises(InputError) as info:
        config_from_dict({**small, "ffn_activation": "swish"})
    assert info.value.location == "model.ffn_activation"
    assert hasattr(build({**small, "output_head": "official"}).network, "action_head")
    assert not hasattr(build({**small, "output_head": "official", "system": "eager"}).network, "action_head")
    net = build({**small, "attention_output_bias": False, "ffn_activation": "relu"}).network
    assert net.layers[0].attentions[0].output.bias is None
    for preset in ("bllip", "ptb", "cpu-small"):
        model = resolve_train_config("dtg", preset)["model"]
        assert (model["output_head"], model["ffn_activation"], model["attention_output_bias"],
                model["scale_embeddings"], model["shared_relative_bias"]) == ("official", "relu", False, False, True)
        assert resolve_train_config("txl-trans", preset)["model"]["output_head"] == "joint"


@pytest.mark.parametrize("family", FAMILIES)
def test_the_beam_over_an_imported_model_is_the_official_loops(tmp_path: Path, family: str) -> None:
    """The word-synchronous beam (``beam.py``, incremental ``step``) over the converted official weights (the
    split head for DTG) gives the totals of the port of the official loop (``reference_beam.py``)."""
    from experiments.families import get_family
    from experiments.families.dtg.beam import DTGBeamScorer
    from experiments.families.dtg.reference_beam import OfficialBeamPort
    from experiments.imports import import_run
    from tests.tolerances import close32

    run = import_run(family, GOLDEN / f"{family}.pt", None, GOLDEN, tmp_path / "run")
    model = get_family(family).load(run / "checkpoints" / "best.ckpt")
    sentence = [golden(family)["sentences"][0]["forms"]]
    ours = DTGBeamScorer(model, 12, 4, 15, 0).score(sentence)[0].total
    port = OfficialBeamPort(model, 12, 4, 15, 0).score(sentence)[0].total
    assert np.isfinite(ours) and ours == close32(port)
