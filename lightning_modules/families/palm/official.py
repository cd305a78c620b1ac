"""Checkpoints of the official AWD-LSTM (salesforce/awd-lstm-lm) and PaLM (Noahs-ARK/PaLM) code as ours.

What is read, safely (``torch.load(weights_only=True)``, no code from the file):
- the official ``RNNModel.state_dict()`` (``torch.save(model.state_dict(), F)``). The official ``main.py`` saves
  whole pickled modules (``torch.save([model, criterion, optimizer])``), which only the official code can
  load: such a file is refused with the one-line command that extracts its state_dict;
- the vocabulary: a text file with the official ``Dictionary.idx2word``, one token a line in id order, or the
  official corpus folder (``train.txt`` or PaLM's ``train_ptb``, then ``valid.txt`` and ``test.txt``: the ids
  are given in order of first appearance, each line read as ``line.split() + ['<eos>']``);
- ``args.json`` next to the checkpoint, when there: the official command-line values the weights do not
  carry (``max_span_length``, ``dropout``, ``dropouth``, ``dropouti``, ``dropoute``, ``wdrop``). Without it,
  PaLM's ``max_span_length`` is the released ``train.sh``'s 10 and the dropouts are the preset's.

The mapping (official -> ours): ``encoder.weight`` -> ``embedding.weight`` (the decoder must be tied to it),
``decoder.bias`` -> ``output_bias``; ``rnns.k.module.weight_hh_l0_raw`` (weight-dropped) or
``rnns.k.weight_hh_l0`` -> ``lstms.k.lstm.weight_hh_l0``, the other LSTM tensors by name. PaLM's
``_att_`` (``SpanScorer``): each ``RRNNCell.weight`` [d_in, 2d] interleaves the input and forget columns
(``view(..., d, 2)``) -> ``proj.weight`` [2d, d_in] forget rows first; ``RRNNCell.bias`` [2d] is read as
``view(2, d)``, whose row 0 (input) the official code never uses -> ``forget_bias`` = row 1; ``_w_gate_``,
``_b_gate_`` -> ``gate``; ``_w1_token_``, ``_b1_`` -> ``token``; ``_w1_span_`` -> ``span``; ``_w2_`` -> ``score``;
``_hidden_layer_`` -> ``mix``; ``_hidden_gate_`` -> ``mix_gate`` negated (the official gate multiplies h, ours
the MLP: σ(−z) = 1 − σ(z)). The official ``max_span_length`` L gives L − 1 spans (lengths 1 … L − 1):
``max_span`` = L − 1. The settings of ``PalmConfig.CHOICES`` are set to the official network (and to the
official AWD-LSTM ``initialisation`` for awd-lstm).

Not reproduced: the official backward ``RRNNCell`` stacks its states as [batch, time, d] and then views them as
[time, batch, d] (``rrnn.py``), which mixes the rows of a batch of more than one stream (its training batch
20, evaluation 10); with one stream it is exact, and that is what ours computes for every batch size.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from lightning_modules.errors import InputError

OFFICIAL_SETTINGS = {"rrnn_input": "linear", "span_repr": "gated", "span_start": "zeros", "mix_input": "context",
                     "span_dropouts": "official", "initialisation": "palm"}
TRAIN_SH_MAX_SPAN_LENGTH = 10  # Noahs-ARK/PaLM train.sh --max_span_length
ARGS = {"dropout": "dropout", "dropouth": "dropout_hidden", "dropouti": "dropout_input",
        "dropoute": "dropout_embedding", "wdrop": "weight_drop"}
EXTRACT = ("python -c \"import torch; torch.save(torch.load('{path}', weights_only=False)[0].state_dict(), "
           "'state_dict.pt')\" (run in the official code's folder, which defines the pickled classes)")
_LSTM_KEY = re.compile(r"rnns\.(\d+)\.(?:module\.)?(weight_ih_l0|weight_hh_l0(?:_raw)?|bias_ih_l0|bias_hh_l0)$")
_SPAN_KEYS = ("_att_._w_gate_", "_att_._b_gate_", "_att_._w1_span_", "_att_._w1_token_", "_att_._b1_",
              "_att_._w2_", "_att_.rrnn_fw.weight", "_att_.rrnn_fw.bias", "_att_.rrnn_bw.weight",
              "_att_.rrnn_bw.bias", "_hidden_layer_.weight", "_hidden_layer_.bias", "_hidden_gate_.weight",
              "_hidden_gate_.bias")


@dataclass
class Converted:
    """An official checkpoint as ours: the model config keys it fixes, the vocabulary, our state_dict."""

    model: dict[str, Any]  # PalmConfig keys read from the weights and args.json, and the official settings
    tokens: list[str]
    state_dict: dict[str, Tensor]
    source: dict[str, Any] = field(default_factory=dict)


def read_state_dict(path: Path) -> dict[str, Tensor]:
    """The official ``state_dict`` in ``path``; ``InputError`` naming the file for anything else."""
    if not path.is_file():
        raise InputError("checkpoint not found", str(path))
    try:
        loaded = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as e:  # noqa: BLE001 - truncated, not a torch file, or pickled code
        message = str(e)
        if "Weights only load failed" in message or "weights_only" in message:
            raise InputError("a whole pickled model (the official main.py's model_save: [model, criterion, "
                             "optimizer]) cannot be read without running code from it; save its state_dict "
                             "with the official code: " + EXTRACT.format(path=path), str(path)) from None
        raise InputError(f"cannot read checkpoint ({type(e).__name__}: {message.splitlines()[0][:120]})",
                         str(path)) from None
    if isinstance(loaded, Mapping) and ("state_dict" in loaded or "synbench" in loaded):
        raise InputError("a synbench/Lightning checkpoint, not an official AWD-LSTM or PaLM state_dict",
                         str(path))
    if not isinstance(loaded, Mapping) or not loaded or not all(
            isinstance(k, str) and isinstance(v, Tensor) for k, v in loaded.items()):
        raise InputError("not a state_dict (a mapping of parameter names to tensors)", str(path))
    return dict(loaded)


def read_vocab(path: Path | None) -> list[str]:
    """The official ids' tokens from a token-per-line file or the official corpus folder."""
    if path is None:
        raise InputError("the official checkpoint has no vocabulary: give --vocab FILE (one token a line, in id "
                         "order) or the official corpus folder", "--vocab")
    if path.is_dir():
        train = next((path / n for n in ("train.txt", "train_ptb") if (path / n).is_file()), None)
        if train is None or not (path / "valid.txt").is_file() or not (path / "test.txt").is_file():
            raise InputError("an official corpus folder has train.txt (or train_ptb), valid.txt and test.txt",
                             str(path))
        index: dict[str, int] = {}
        for part in (train, path / "valid.txt", path / "test.txt"):
            for line in part.read_text(encoding="utf-8").splitlines():
                for word in line.split() + ["<eos>"]:
                    index.setdefault(word, len(index))
        return list(index)
    if not path.is_file():
        raise InputError("vocabulary not found", str(path))
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except UnicodeDecodeError:
        raise InputError("not a text file of tokens (one a line)", str(path)) from None
    seen: set[str] = set()
    for number, token in enumerate(lines, 1):
        if not token or token != token.strip() or " " in token:
            raise InputError(f"line {number}: a token is one word without spaces (got {token!r})", str(path))
        if token in seen:
            raise InputError(f"line {number}: {token!r} appears twice", str(path))
        seen.add(token)
    return lines


def read_args(checkpoint: Path) -> dict[str, Any]:
    """The official command-line values in ``args.json`` next to the checkpoint ({} when there is none)."""
    path = checkpoint.with_name("args.json")
    if not path.is_file():
        return {}
    try:
        args = json.loads(path.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError) as e:
        raise InputError(f"not JSON ({e})", str(path)) from None
    if not isinstance(args, dict):
        raise InputError("must hold an object of the official command-line values", str(path))
    return args


def _lstm_layers(sd: Mapping[str, Tensor]) -> dict[int, dict[str, Tensor]]:
    layers: dict[int, dict[str, Tensor]] = {}
    for key, value in sd.items():
        found = _LSTM_KEY.match(key)
        if found:
            layers.setdefault(int(found[1]), {})[found[2].removesuffix("_raw")] = value
    return layers


def convert(checkpoint: Path, vocab: Path | None, family: str) -> Converted:
    """Our model config keys, vocabulary and state_dict for an official checkpoint of ``family``."""
    from lightning_modules.families.palm.model import build

    sd = read_state_dict(checkpoint)
    where = str(checkpoint)
    palm = family != "awd-lstm"
    has_span = any(k.startswith("_att_.") for k in sd)
    if palm and not has_span:
        raise InputError(f"no span attention (_att_.*): not an official PaLM state_dict (an AWD-LSTM one is "
                         f"imported as awd-lstm), cannot be a {family} model", where)
    if not palm and has_span:
        raise InputError("a PaLM state_dict (it has a span attention, _att_.*): import it as palm-u or palm-s",
                         where)
    layers = _lstm_layers(sd)
    known = {"encoder.weight", "decoder.weight", "decoder.bias", *(_SPAN_KEYS if palm else ())}
    unknown = sorted(k for k in sd if k not in known and not _LSTM_KEY.match(k))
    missing = sorted(k for k in known if k not in sd)
    if unknown or missing or not layers or sorted(layers) != list(range(len(layers))):
        raise InputError(f"not an official {'PaLM' if palm else 'AWD-LSTM'} RNNModel state_dict (missing: "
                         f"{', '.join(missing[:4]) or '-'}; unexpected: {', '.join(unknown[:4]) or '-'})", where)
    embedding = sd["encoder.weight"]
    if not torch.equal(sd["decoder.weight"], embedding):
        raise InputError("the decoder is not tied to the embedding (official --tied): not supported", where)
    args = read_args(checkpoint)
    model: dict[str, Any] = {"vocab_size": embedding.shape[0], "d_embedding": embedding.shape[1],
                             "n_layers": len(layers), "d_hidden": layers[0]["weight_ih_l0"].shape[0] // 4}
    model.update({ours: float(args[name]) for name, ours in ARGS.items() if name in args})
    out = {"embedding.weight": embedding, "output_bias": sd["decoder.bias"]}
    for k, layer in layers.items():
        out.update({f"lstms.{k}.lstm.{name}": value for name, value in layer.items()})
    span_length = None
    if not palm:
        model["initialisation"] = "awd-lstm"
    else:
        span_length = int(args.get("max_span_length", TRAIN_SH_MAX_SPAN_LENGTH))
        d_rrnn = sd["_att_.rrnn_fw.weight"].shape[1] // 2
        model.update({"d_rrnn": d_rrnn, "d_span_mlp": sd["_att_._w1_token_"].shape[0],
                      "max_span": span_length - 1, **OFFICIAL_SETTINGS})
        for theirs, ours in (("rrnn_fw", "forward_rrnn"), ("rrnn_bw", "backward_rrnn")):
            weight, bias = sd[f"_att_.{theirs}.weight"], sd[f"_att_.{theirs}.bias"]
            out[f"span_attention.{ours}.proj.weight"] = torch.cat([weight[:, 1::2].T, weight[:, 0::2].T])
            out[f"span_attention.{ours}.forget_bias"] = bias.view(2, -1)[1]
        renamed = {"gate.weight": "_w_gate_", "gate.bias": "_b_gate_", "token.weight": "_w1_token_",
                   "token.bias": "_b1_", "span.weight": "_w1_span_", "score.weight": "_w2_"}
        out.update({f"span_attention.{ours}": sd[f"_att_.{theirs}"] for ours, theirs in renamed.items()})
        out.update({"mix.weight": sd["_hidden_layer_.weight"], "mix.bias": sd["_hidden_layer_.bias"],
                    "mix_gate.weight": -sd["_hidden_gate_.weight"], "mix_gate.bias": -sd["_hidden_gate_.bias"]})
    try:
        with torch.device("meta"):
            expected = build(model, family).state_dict()
    except InputError as e:
        raise InputError(f"its sizes make no {family} model: {e.message} ({e.location})", where) from None
    wrong = [k for k, v in out.items() if k not in expected or tuple(expected[k].shape) != tuple(v.shape)]
    wrong += [k for k in expected if k not in out]
    if wrong:
        raise InputError(f"tensor sizes that fit no {family} model of these sizes: {', '.join(sorted(wrong)[:4])}",
                         where)
    tokens = read_vocab(vocab)
    assert vocab is not None
    if len(tokens) != model["vocab_size"]:
        raise InputError(f"{len(tokens)} tokens, but the checkpoint's embedding has {model['vocab_size']} rows",
                         str(vocab))
    for needed in ("<eos>", "<unk>"):
        if needed not in tokens:
            raise InputError(f"no {needed} token (the Mikolov-style text the models read has one)", str(vocab))
    source = {"format": "official RNNModel.state_dict()", "args_json": bool(args),
              "official_max_span_length": span_length,
              "conventions": "tied decoder; mix_gate = −_hidden_gate_ (gate on h officially, on the MLP ours)"}
    return Converted(model, tokens, {k: v.detach().clone().contiguous() for k, v in out.items()}, source)
