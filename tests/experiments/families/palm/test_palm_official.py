"""Network parity with the official code: the golden checkpoints of ``benchmarks/golden_palm_network.py``
(official Noahs-ARK/PaLM and salesforce/awd-lstm-lm models, ``tests/golden/palm/README.md``) converted by the
family's ``importing()`` give our modules the official per-token log-probabilities, losses and span attention
(fp32, eval mode), sentence by sentence and as one stream in windows; bad inputs are ``InputError`` naming
the file."""

from __future__ import annotations

import functools
import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from experiments.families import get_family
from lightning_modules.data.tree import parse_tree
from lightning_modules.errors import InputError
from lightning_modules.families.palm.data import stream_sentence
from lightning_modules.families.palm.encoding import span_targets
from lightning_modules.families.palm.model import PalmLM, build

GOLDEN = Path(__file__).resolve().parents[3] / "golden" / "palm"
FAMILIES = ("palm-u", "palm-s", "awd-lstm")
RTOL = 1e-5


@pytest.fixture(autouse=True, scope="module")
def one_thread() -> Iterator[None]:
    """Tiny models: one thread is fastest on shared cores."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def imported(family: str, checkpoint: Path | None = None, vocab: Path | None = None) -> Any:
    importing = get_family(family).importing()
    assert importing is not None and importing.needs_vocab
    return importing.convert(checkpoint or GOLDEN / family / "state_dict.pt", vocab or GOLDEN / "vocab.txt", None)


@functools.cache
def module(family: str) -> PalmLM:
    model = imported(family)
    out = build({**model.config["model"], "vocab_size": len(model.vocab["tokens"])}, family)
    out.load_state_dict(model.state_dict)
    return out.float().eval()


def golden(family: str) -> dict[str, Any]:
    return json.loads((GOLDEN / family / "golden.json").read_text())


def assert_relative(ours: torch.Tensor, official: list[float] | float) -> None:
    torch.testing.assert_close(ours.double(), torch.tensor(official, dtype=torch.float64), rtol=RTOL, atol=0.0)


@pytest.mark.parametrize("family", FAMILIES)
def test_each_sentence_has_the_official_log_probabilities_and_loss(family):
    model, gold = module(family), golden(family)
    assert len(gold["sentences"]) == 20
    for sentence in gold["sentences"]:
        ids = torch.tensor([sentence["ids"]])
        with torch.no_grad():
            logprobs = model.token_logprobs(ids[:, :-1], ids[:, 1:])[0]
            out = model(ids[:, :-1])
        assert_relative(logprobs, sentence["logprobs"])
        assert_relative(torch.nn.functional.cross_entropy(out.logits[0], ids[0, 1:]), sentence["loss"])


@pytest.mark.parametrize("family", FAMILIES)
def test_the_stream_read_in_windows_has_the_official_log_probabilities(family):
    """The official ``evaluate``: one stream, the LSTM states and the span memory carried window to window."""
    model, stream = module(family), golden(family)["stream"]
    ids, state, logprobs = torch.tensor([stream["ids"]]), None, []
    with torch.no_grad():
        for start in range(0, ids.shape[1] - 1, stream["bptt"]):
            window = ids[:, start : start + stream["bptt"] + 1]
            out = model(window[:, :-1], state)
            state = out.state
            logprobs.append(out.logits.log_softmax(-1).gather(-1, window[:, 1:, None])[0, :, 0])
    assert_relative(torch.cat(logprobs), stream["logprobs"])
    assert_relative(-torch.cat(logprobs).mean(), stream["loss"])


@pytest.mark.parametrize("family", ["palm-u", "palm-s"])
def test_the_span_attention_is_the_officials(family):
    """The official distribution over the max_span_length − 1 spans ending at the previous token, longest
    first (ours: shortest first), at every position, including the stream start's zero inputs."""
    model, gold = module(family), golden(family)
    for sentence in gold["sentences"]:
        ids = torch.tensor([sentence["ids"]])
        with torch.no_grad():
            weights = model(ids[:, :-1]).log_weights.exp()[0].flip(-1)
        torch.testing.assert_close(weights.double(), torch.tensor(sentence["span_attention"], dtype=torch.float64),
                                   rtol=RTOL, atol=1e-6)


def test_palm_s_targets_mark_the_spans_of_the_official_target_rows():
    """The official rows (``data.Corpus``) of 20 real trees: row r (input token r of ``w_1 … w_n <eos>``) marks
    span [k, r − 1] at column k − max(0, r − L + 1) with value L − 1 − column (L = max_span_length); ours marks it
    at column length − 1, normalised. Same spans at every row. (For r < L − 1 the official columns are
    shifted against the attention's, which is longest first at every row; ours are by length everywhere.)"""
    gold = golden("palm-s")
    length = gold["official"]["args"]["max_span_length"]
    for sentence in gold["sentences"]:
        ours_sentence = stream_sentence(parse_tree(sentence["tree"]))
        assert ours_sentence is not None
        n = len(ours_sentence.words)
        assert n == len(sentence["text"].split())
        ours = span_targets(ours_sentence.spans, n, length - 1)
        official = np.array(sentence["span_targets"])
        assert official.shape == ours.shape == (n + 1, length - 1)
        for r in range(n + 1):
            start = max(0, r - length + 1)
            columns = [v for v in range(length - 1) if official[r, v] > 0]
            assert all(official[r, v] == length - 1 - v for v in columns)
            assert {start + v for v in columns} == {r - 1 - i for i in range(length - 1) if ours[r, i] > 0}
            assert ours[r].sum() == pytest.approx(1.0 if columns else 0.0)


@pytest.mark.parametrize("family", FAMILIES)
def test_the_imported_config_and_vocab_are_those_of_a_trained_run(family):
    model = imported(family)
    gold = golden(family)
    args = gold["official"]["args"]
    tokens = (GOLDEN / "vocab.txt").read_text().splitlines()
    assert model.vocab == {"tokens": tokens, "eos": "<eos>"}
    assert model.config["family"] == family and {"data", "train", "runtime", "model"} <= set(model.config)
    config = model.config["model"]
    assert (config["vocab_size"], config["d_embedding"], config["d_hidden"], config["n_layers"]) == \
        (len(tokens), args["emsize"], args["nhid"], args["nlayers"])
    assert (config["dropout_hidden"], config["weight_drop"]) == (args["dropouth"], args["wdrop"])
    if family != "awd-lstm":
        assert config["max_span"] == args["max_span_length"] - 1
        assert config["d_rrnn"] * 2 == args["rrnn_size"] and config["d_span_mlp"] == args["parser_size"]
    assert get_family("palm-rb").importing() is None  # the official code has no PaLM-RB network


def test_the_corpus_folder_gives_the_official_dictionary():
    assert imported("palm-u", vocab=GOLDEN / "corpus").vocab["tokens"] == \
        (GOLDEN / "vocab.txt").read_text().splitlines()


def copy(tmp_path: Path, family: str, name: str = "state_dict.pt") -> Path:
    out = tmp_path / family
    out.mkdir(exist_ok=True)
    for part in ("state_dict.pt", "args.json"):
        shutil.copy(GOLDEN / family / part, out / part)
    return out / name


def test_bad_checkpoints_are_input_errors_naming_the_file(tmp_path):
    pickled = GOLDEN / "palm-u" / "model.pt"
    with pytest.raises(InputError, match="whole pickled model") as e:
        imported("palm-u", pickled)
    assert e.value.location == str(pickled)
    for wrong, right in (("palm-u", "awd-lstm"), ("awd-lstm", "palm-u")):
        with pytest.raises(InputError) as e:
            imported(wrong, GOLDEN / right / "state_dict.pt")
        assert e.value.location == str(GOLDEN / right / "state_dict.pt")
    truncated = copy(tmp_path, "palm-u")
    truncated.write_bytes(truncated.read_bytes()[:5000])
    with pytest.raises(InputError, match="cannot read checkpoint") as e:
        imported("palm-u", truncated)
    assert e.value.location == str(truncated)
    other = tmp_path / "other.pt"  # another family's format: a Lightning checkpoint, and a foreign state_dict
    torch.save({"state_dict": {"w": torch.zeros(1)}, "synbench": {"family": "tg"}}, other)
    with pytest.raises(InputError, match="synbench/Lightning") as e:
        imported("awd-lstm", other)
    assert e.value.location == str(other)
    torch.save({"embed.weight": torch.zeros(3, 2), "layers.0.weight": torch.zeros(2, 2)}, other)
    with pytest.raises(InputError, match="not an official") as e:
        imported("palm-s", other)
    assert e.value.location == str(other)
    with pytest.raises(InputError, match="not found"):
        imported("palm-u", tmp_path / "missing.pt")


def test_bad_vocabularies_are_input_errors_naming_the_file(tmp_path):
    tokens = (GOLDEN / "vocab.txt").read_text().splitlines()
    short = tmp_path / "short.txt"
    short.write_text("".join(t + "\n" for t in tokens[:-1]))
    with pytest.raises(InputError, match=f"{len(tokens) - 1} tokens, but the checkpoint's embedding has "
                                          f"{len(tokens)} rows") as e:
        imported("palm-s", vocab=short)
    assert e.value.location == str(short)
    twice = tmp_path / "twice.txt"
    twice.write_text("".join(t + "\n" for t in [*tokens[:-1], tokens[0]]))
    with pytest.raises(InputError, match="appears twice") as e:
        imported("awd-lstm", vocab=twice)
    assert e.value.location == str(twice)
    with pytest.raises(InputError, match="--vocab"):
        get_family("palm-u").importing().convert(GOLDEN / "palm-u" / "state_dict.pt", None, None)


def test_the_weights_settings_of_a_checkpoint_without_args_json_are_the_released_recipes(tmp_path):
    """Without ``args.json`` the span length is train.sh's (10: 9 spans), which these weights do not fix."""
    checkpoint = copy(tmp_path, "palm-u")
    (tmp_path / "palm-u" / "args.json").unlink()
    model = imported("palm-u", checkpoint)
    assert model.config["model"]["max_span"] == 9 and model.source["args_json"] is False


@pytest.mark.parametrize("family", ["palm-u", "palm-s", "palm-rb", "awd-lstm"])
def test_the_paper_presets_build_the_official_network(family):
    """The settings of the official network's differences are config keys (recorded in every run's config),
    set to the official values by the presets; the class defaults stay the paper's (older runs load)."""
    from experiments.config import resolve_train_config
    from lightning_modules.families.palm.official import OFFICIAL_SETTINGS

    for preset in ("ptb", "wikitext-2"):
        model = resolve_train_config(family, preset)["model"]
        if family == "awd-lstm":
            assert model["initialisation"] == "awd-lstm"
        else:
            assert {key: model[key] for key in OFFICIAL_SETTINGS} == OFFICIAL_SETTINGS


def test_bad_settings_name_the_key_and_awd_lstm_initialisation_is_the_officials():
    from lightning_modules.families.palm.model import config_from_dict

    with pytest.raises(InputError) as e:
        config_from_dict({"span_repr": "tanh"})
    assert e.value.location == "model.span_repr" and "'gated' or 'raw'" in e.value.message
    torch.manual_seed(0)
    model = build({"vocab_size": 50, "d_embedding": 8, "d_hidden": 16, "initialisation": "awd-lstm"}, "awd-lstm")
    assert model.embedding.weight.abs().max() <= 0.1
    assert all(lstm.lstm.bias_ih_l0.abs().max() > 0 for lstm in model.lstms)  # nn.LSTM's own uniform init


def test_an_imported_run_scores_sentences_as_the_official_model(tmp_path):
    """``synbench import`` then the exact scorer: each sentence's total (``<eos>`` included) is the official
    one (the scorer reads evaluator words: a number, not Mikolov's ``N``)."""
    from experiments.families.palm.scorers import ExactScorer, PalmModel
    from experiments.imports import import_run

    out = import_run("palm-s", GOLDEN / "palm-s" / "state_dict.pt", GOLDEN / "vocab.txt", None, tmp_path / "run")
    model = PalmModel.load(str(out / "checkpoints" / "best.ckpt"))
    sentences = golden("palm-s")["sentences"]
    words = [["61" if w == "N" else w for w in s["text"].split()] for s in sentences]
    for score, sentence in zip(ExactScorer(model, batch_size=8).score(words), sentences):
        assert score.total == pytest.approx(sum(sentence["logprobs"]), rel=RTOL)


@pytest.mark.parametrize("family", ["palm-u", "palm-rb"])
def test_the_official_network_is_causal_and_carries_windows_exactly(family):
    """With the official settings (zero inputs before a stream, gated span representations, ...) windows that
    carry the state still equal one long window, and a position's logits never see later tokens."""
    from lightning_modules.families.palm.official import OFFICIAL_SETTINGS

    torch.manual_seed(3)
    model = build({"vocab_size": 30, "d_embedding": 8, "d_hidden": 12, "max_span": 4, "d_rrnn": 3,
                   "d_span_mlp": 5, **OFFICIAL_SETTINGS}, family).double().eval()
    x = torch.randint(0, 30, (3, 13))
    whole = model(x)
    first = model(x[:, :4])
    second = model(x[:, 4:9], first.state)
    third = model(x[:, 9:], second.state)
    torch.testing.assert_close(torch.cat([first.logits, second.logits, third.logits], dim=1), whole.logits)
    y = x.clone()
    y[:, 6:] = (y[:, 6:] + 1) % 30
    assert torch.equal(model(y).logits[:, :6], whole.logits[:, :6])
    assert torch.isfinite(whole.log_weights).all()  # every query has m spans (the zeros count as tokens)
