"""Checkpoints of the official Transformer Grammars code (google-deepmind/transformer_grammars) -> ours.

The official ``train.py`` pickles ``Checkpoint(step, params, opt_state, config)`` (a chex dataclass; params a
Haiku tree ``{"lm/~/core/h0_attn/query": {"w": array}, ...}`` of NumPy arrays; config the model section of
its ``ml_collections`` config as a dict) to ``checkpoint.pkl``; ``score.py`` loads it with ``pickle.load``.
We never run code from a checkpoint: the pickle is read by a restricted unpickler that builds NumPy arrays
and plain containers only (every other class the file names, the checkpoint dataclass, optax states, becomes
an inert record of its arguments and state), and the same tree may come as ``.npz`` (``params/MODULE/PARAM``
arrays plus ``config``, the official model config as JSON text, read with ``allow_pickle=False``; what
``benchmarks/golden_tg_network.py`` writes beside the pickle).

The vocabulary is the official word-level dictionary (``tools/build_dictionary.py``: ``PREFIX.txt``, one token
a line, ``<PAD> <s> </s> <XXX>`` then terminals, opening and closing nonterminals, and ``PREFIX.json`` with
their counts), the layout of our ``ActionVocab``: ids are kept as they are.

Parameter mapping (Haiku ``Linear`` computes ``x @ w``, ``nn.Linear`` ``x @ weight.T``; heads are the
``H * d_head`` axis in head-major order in both): ``embedding_layer/input_embedding`` -> ``embedding``,
``embedding_layer/bias`` -> ``output_bias``; per layer i and attention function a (suffix ``0``/``1`` only
with two attention functions) ``h{i}_attn{a}/{query,key,value,relative_keys}/w`` -> the bias-free
projections, ``r_w_bias``/``r_r_bias`` [H*d] -> [H, d], ``h{i}_attn{a}/linear`` -> ``output``,
``h{i}_mlp/linear`` and ``linear_1`` -> ``ffn.inner``/``ffn.outer``, ``h{i}_ln1``/``h{i}_ln2``
``scale``/``offset`` -> the layer norms.

Configuration mapping: TG (``extra_attention_mask_name = stack_compose_double_closing_nt``,
``relative_pos = delta_depth``): relpos ``delta_depth``, the table covers [min_relative_position,
max_relative_position]; memory smart if ``gather_into_new_memory`` else plain. Transformer-XL (no mask name):
relpos ``linear``; the official model then shifts the relative logits over positions L+M down to 1-L, so
``min_rel = 1 - L``, ``max_rel = L + M``; plain memory. Official options our network does not have
(hybrid layers or heads, tied layer weights, attention biases, untied output embeddings, transparency,
key/value sizes other than d_model / heads) are refused with ``InputError``.
"""

from __future__ import annotations

import io
import json
import pickle
import re
import zipfile
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from lightning_modules.data.encodings.choe_charniak import RESERVED, ActionVocab
from lightning_modules.errors import InputError

OFFICIAL = ("google-deepmind/transformer_grammars checkpoint.pkl (pickled Checkpoint with a Haiku params tree; "
            "or its .npz form) + the word-level dictionary of tools/build_dictionary.py (PREFIX.txt, PREFIX.json)")
TG_MASK = "stack_compose_double_closing_nt"
OPENING = re.compile(r"^\([^ ]+$")  # the official dictionary's patterns (data/constants.py)
CLOSING = re.compile(r"^[^ ]+\)$")
PREFIX = "lm/~/"
UNSUPPORTED = {  # official model option -> the value our network implements
    "tied_layer_weights": (0, False, None),
    "num_unrestricted_layers": (0, None),
    "num_unrestricted_heads": (None,),
    "use_attn_bias": (False, 0, None),
    "tied_input_output_embeddings": (True, 1),
    "key_size": (None,),
    "value_size": (None,),
}


# -- reading the checkpoint without running code from it --------------------------------------------------
class Opaque:
    """What a class named in the pickle, other than NumPy's array machinery, becomes: its arguments and state
    are recorded, nothing of it is imported or run."""

    def __new__(cls, *args: Any, **kwargs: Any) -> Opaque:
        obj = object.__new__(cls)
        obj.args, obj.state = args, None
        return obj

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        pass

    def __setstate__(self, state: Any) -> None:
        self.state = state


def _numpy_globals() -> dict[tuple[str, str], Any]:
    """The NumPy callables an array pickle needs (the allow-list ``torch.load(weights_only=True)`` also has)."""
    multiarray = np._core.multiarray if hasattr(np, "_core") else np.core.multiarray  # NumPy 2, else 1
    allowed = {("numpy", "ndarray"): np.ndarray, ("numpy", "dtype"): np.dtype,
               ("collections", "OrderedDict"): OrderedDict}
    for module in ("numpy.core.multiarray", "numpy._core.multiarray"):
        allowed[(module, "_reconstruct")] = multiarray._reconstruct
        allowed[(module, "scalar")] = multiarray.scalar
    for module in ("numpy.dtypes", "numpy"):
        for name in ("Float32DType", "Float64DType", "Int32DType", "Int64DType", "BoolDType", "Float16DType"):
            if hasattr(np, "dtypes") and hasattr(np.dtypes, name):
                allowed[(module, name)] = getattr(np.dtypes, name)
    return allowed


class RestrictedUnpickler(pickle.Unpickler):
    """NumPy arrays and plain containers; any other named class becomes an ``Opaque`` record."""

    allowed = _numpy_globals()
    opaque: dict[tuple[str, str], type] = {}

    def find_class(self, module: str, name: str) -> Any:
        key = (module, name)
        if key in self.allowed:
            return self.allowed[key]
        if key not in self.opaque:
            self.opaque[key] = type(name, (Opaque,), {"official_name": f"{module}.{name}"})
        return self.opaque[key]


def _plain(obj: Any) -> Any:
    """A mapping out of a record (a dataclass's state, a mapping class's first argument), else ``obj``."""
    if isinstance(obj, Opaque):
        if isinstance(obj.state, Mapping):
            return obj.state
        if obj.args and isinstance(obj.args[0], Mapping):
            return obj.args[0]
    return obj


@dataclass(frozen=True)
class OfficialCheckpoint:
    """What we read of an official checkpoint: the Haiku parameter tree and the official model config."""

    params: dict[str, dict[str, np.ndarray]]
    config: dict[str, Any]
    format: str  # "pickle" | "npz"


def read_checkpoint(path: Path) -> OfficialCheckpoint:
    """The parameters and model config of an official ``checkpoint.pkl`` or its ``.npz`` form."""
    path = Path(path)
    if not path.is_file():
        raise InputError("checkpoint not found", str(path))
    data = path.read_bytes()
    if data[:2] == b"PK":
        params, config, kind = _read_npz(data, path), None, "npz"
        config = params.pop("__config__")
    elif data[:1] == b"\x80":
        params, config, kind = _read_pickle(data, path)
    else:
        raise InputError("not an official Transformer Grammars checkpoint (neither a pickle nor an .npz file)",
                         str(path))
    return OfficialCheckpoint(_checked_params(params, path), _checked_config(config, path), kind)


def _read_pickle(data: bytes, path: Path) -> tuple[Any, Any, str]:
    try:
        obj = RestrictedUnpickler(io.BytesIO(data)).load()
    except Exception as e:  # truncated, corrupted, or an object our unpickler cannot build
        raise InputError(f"cannot read the pickled checkpoint ({type(e).__name__}: {str(e)[:120]})",
                         str(path)) from None
    content = _plain(obj)
    if not isinstance(content, Mapping) or "params" not in content or "config" not in content:
        raise InputError("not an official Transformer Grammars checkpoint (no Checkpoint with params and "
                         "config)", str(path))
    return _plain(content["params"]), _plain(content["config"]), "pickle"


def _read_npz(data: bytes, path: Path) -> dict[str, Any]:
    try:
        with np.load(io.BytesIO(data), allow_pickle=False) as npz:
            arrays = {key: npz[key] for key in npz.files}
    except (zipfile.BadZipFile, ValueError, OSError, EOFError) as e:
        raise InputError(f"cannot read the .npz checkpoint ({type(e).__name__}: {str(e)[:120]})",
                         str(path)) from None
    if "config" not in arrays or not any(k.startswith("params/") for k in arrays):
        raise InputError("not an official Transformer Grammars checkpoint in .npz form (needs params/... arrays "
                         "and config)", str(path))
    try:
        config = json.loads(str(arrays.pop("config")))
    except ValueError:
        raise InputError("its config is not JSON text", str(path)) from None
    params: dict[str, Any] = {}
    for key, value in arrays.items():
        module, _, name = key.removeprefix("params/").rpartition("/")
        params.setdefault(module, {})[name] = value
    params["__config__"] = config
    return params


def _checked_params(params: Any, path: Path) -> dict[str, dict[str, np.ndarray]]:
    if not isinstance(params, Mapping) or f"{PREFIX}embedding_layer" not in params:
        raise InputError(f"not a Transformer Grammars parameter tree (no {PREFIX}embedding_layer)", str(path))
    out: dict[str, dict[str, np.ndarray]] = {}
    for module, leaves in params.items():
        leaves = _plain(leaves)
        if not isinstance(module, str) or not isinstance(leaves, Mapping):
            raise InputError(f"malformed parameter tree at {module!r}", str(path))
        out[module] = {}
        for name, value in leaves.items():
            if not isinstance(value, np.ndarray) or value.dtype.kind != "f":
                raise InputError(f"parameter {module}/{name} is not a float array", str(path))
            out[module][name] = value
    return out


def _checked_config(config: Any, path: Path) -> dict[str, Any]:
    if not isinstance(config, Mapping):
        raise InputError("the checkpoint has no model config", str(path))
    config = {k: _plain(v) for k, v in config.items()}
    missing = [k for k in ("d_model", "num_layers", "num_heads", "ffw_hidden_size", "sequence_length",
                           "memory_length") if k not in config]
    if missing:
        raise InputError(f"the model config lacks {', '.join(missing)}", str(path))
    return config


# -- the dictionary ---------------------------------------------------------------------------------------
def read_dictionary(path: Path) -> ActionVocab:
    """The official word-level dictionary (``PREFIX.txt`` and its ``PREFIX.json``) as an ``ActionVocab``."""
    path = Path(path)
    if path.suffix in (".model", ".vocab"):
        raise InputError("SentencePiece vocabularies of the official code are not supported yet; give the "
                         "word-level dictionary (tools/build_dictionary.py's PREFIX.txt)", str(path))
    if not path.is_file():
        raise InputError("dictionary not found", str(path))
    meta_path = path.with_suffix(".json")
    try:
        words = path.read_text(encoding="utf-8").splitlines()
        meta = json.loads(meta_path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InputError(f"the dictionary's metadata {meta_path.name} (written beside it by "
                         "tools/build_dictionary.py) is missing", str(path)) from None
    except (UnicodeDecodeError, ValueError) as e:
        raise InputError(f"cannot read the dictionary ({type(e).__name__})", str(path)) from None
    keys = ("num_reserved", "num_terminals", "num_opening_non_terminals", "num_closing_non_terminals")
    if not isinstance(meta, dict) or not all(isinstance(meta.get(k), int) for k in keys):
        raise InputError(f"malformed dictionary metadata (needs {', '.join(keys)})", str(meta_path))
    if meta.get("extra_untyped_closing_non_terminal"):
        raise InputError("dictionaries with the extra untyped closing nonterminal ')' are not supported",
                         str(meta_path))
    n_res, n_t, n_o, n_c = (meta[k] for k in keys)
    if n_res != len(RESERVED) or tuple(words[:n_res]) != RESERVED:
        raise InputError(f"the dictionary does not start with the reserved tokens {' '.join(RESERVED)}", str(path))
    if len(words) != n_res + n_t + n_o + n_c:
        raise InputError(f"{len(words)} tokens, but its metadata counts {n_res + n_t + n_o + n_c}", str(path))
    terminals = tuple(words[n_res : n_res + n_t])
    opening = tuple(words[n_res + n_t : n_res + n_t + n_o])
    closing = tuple(words[n_res + n_t + n_o :])
    if not all(OPENING.match(w) for w in opening) or not all(CLOSING.match(w) for w in closing):
        raise InputError("its nonterminal ranges do not hold '(X' and 'X)' tokens", str(path))
    try:
        return ActionVocab(terminals, opening, closing)
    except InputError as e:
        raise InputError(e.message, str(path)) from None


# -- conversion -------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Converted:
    """Our model config (``TGConfig`` fields), the state_dict of ``txl_lm.build(config)``, the vocabulary, the
    memory kind (``data.memory``), and what was read and applied (recorded in the run)."""

    model: dict[str, Any]
    state_dict: dict[str, Any]
    vocab: ActionVocab
    memory: str
    source: dict[str, Any]


def model_config(family: str, config: Mapping[str, Any], vocab_size: int, path: Path) -> tuple[dict[str, Any], str]:
    """Our flat model config (``TGConfig``) and memory kind for an official model config of ``family``."""
    where = str(path)
    mask = config.get("extra_attention_mask_name") or "txl"
    kwargs = dict(config.get("extra_attention_mask_kwargs") or {})
    if family == "tg" and mask != TG_MASK:
        raise InputError(f"this is a Transformer-XL checkpoint (attention mask {mask!r}); import it as txl-trees "
                         "or txl-terminals", where)
    if family != "tg" and mask != "txl":
        raise InputError(f"this is a Transformer Grammar checkpoint (attention mask {mask!r}); import it as tg",
                         where)
    for key, allowed in UNSUPPORTED.items():
        if config.get(key, allowed[0]) not in allowed:
            raise InputError(f"official option {key}={config[key]!r} is not supported by our network", where)
    if kwargs.get("transparency_prob", 0.0) or kwargs.get("transparency_depth_threshold", -1) != -1:
        raise InputError("transparent nonterminals (transparency_prob, transparency_depth_threshold) are not "
                         "supported", where)
    length, memory_length = int(config["sequence_length"]), int(config["memory_length"])
    d_ff = int(config["ffw_hidden_size"])
    d_ff = d_ff if d_ff > 0 else -d_ff * int(config["d_model"])  # negative: a ratio to d_model (official)
    relative = bool(config.get("relative_position_embeddings", True))
    core_dropout = float(config.get("core_dropout", 0.1))
    model: dict[str, Any] = {
        "vocab_size": vocab_size, "d_model": int(config["d_model"]), "n_layers": int(config["num_layers"]),
        "n_heads": int(config["num_heads"]), "d_ff": d_ff,
        "embedding_dropout": float(config.get("embedding_dropout", 0.1)), "core_dropout": core_dropout,
        "core_output_dropout": float(config.get("core_output_dropout", 0.1)),
        "attention_dropout": core_dropout,  # the official attention and sinusoid-table dropout is the core's
        "segment_length": length, "memory_length": memory_length,
    }
    if family == "tg":
        if kwargs.get("relative_pos", "delta_depth") != "delta_depth":
            raise InputError(f"relative_pos={kwargs['relative_pos']!r} is not supported (only delta_depth)", where)
        model.update(relpos="delta_depth" if relative else "none",
                     min_rel=int(config.get("min_relative_position", -1)),
                     max_rel=int(config.get("max_relative_position", 62)),
                     use_different_attn_fns=bool(kwargs.get("use_different_attn_fns", False)))
        memory = "smart" if kwargs.get("gather_into_new_memory", False) else "plain"
    else:  # the official relative shift covers positions L + M down to 1 - L
        model.update(relpos="linear" if relative else "none", min_rel=1 - length, max_rel=length + memory_length,
                     use_different_attn_fns=False)
        memory = "plain"
    return model, memory


def _param(params: Mapping[str, Mapping[str, np.ndarray]], module: str, name: str, shape: tuple[int, ...],
           path: Path) -> np.ndarray:
    leaves = params.get(PREFIX + module)
    if leaves is None or name not in leaves:
        raise InputError(f"parameter {PREFIX}{module}/{name} is missing", str(path))
    value = leaves[name]
    if tuple(value.shape) != shape:
        raise InputError(f"parameter {PREFIX}{module}/{name} has shape {tuple(value.shape)}, expected {shape}",
                         str(path))
    return value.astype(np.float32)


def state_dict_of(params: Mapping[str, Mapping[str, np.ndarray]], model: Mapping[str, Any],
                  path: Path) -> dict[str, np.ndarray]:
    """Our ``TransformerGrammarLM`` parameters (NumPy, our names) from the official Haiku tree."""
    d, heads, d_ff, vocab = model["d_model"], model["n_heads"], model["d_ff"], model["vocab_size"]
    d_head = d // heads
    n_fns = 2 if model["use_different_attn_fns"] else 1
    relative = model["relpos"] != "none"
    out: dict[str, np.ndarray] = {
        "network.embedding.weight": _param(params, "embedding_layer", "input_embedding", (vocab, d), path)}
    embedding = params[PREFIX + "embedding_layer"]
    out["network.output_bias"] = (_param(params, "embedding_layer", "bias", (vocab,), path) if "bias" in embedding
                                  else np.zeros(vocab, dtype=np.float32))  # use_output_bias=False: a zero bias
    used = {f"{PREFIX}embedding_layer"}
    for i in range(model["n_layers"]):
        ours = f"network.layers.{i}"
        for a in range(n_fns):
            module = f"core/h{i}_attn{a if n_fns == 2 else ''}"
            attn = f"{ours}.attentions.{a}"
            names = ["query", "key", "value"] + (["relative_keys"] if relative else [])
            for name in names:
                out[f"{attn}.{name}.weight"] = _param(params, f"{module}/{name}", "w", (d, d), path).T
                used.add(f"{PREFIX}{module}/{name}")
            if relative:
                for bias in ("r_w_bias", "r_r_bias"):
                    out[f"{attn}.{bias}"] = _param(params, module, bias, (d,), path).reshape(heads, d_head)
                used.add(PREFIX + module)
            out[f"{attn}.output.weight"] = _param(params, f"{module}/linear", "w", (d, d), path).T
            out[f"{attn}.output.bias"] = _param(params, f"{module}/linear", "b", (d,), path)
            used.add(f"{PREFIX}{module}/linear")
        for norm in ("ln1", "ln2"):
            out[f"{ours}.{norm}.weight"] = _param(params, f"core/h{i}_{norm}", "scale", (d,), path)
            out[f"{ours}.{norm}.bias"] = _param(params, f"core/h{i}_{norm}", "offset", (d,), path)
            used.add(f"{PREFIX}core/h{i}_{norm}")
        out[f"{ours}.ffn.inner.weight"] = _param(params, f"core/h{i}_mlp/linear", "w", (d, d_ff), path).T
        out[f"{ours}.ffn.inner.bias"] = _param(params, f"core/h{i}_mlp/linear", "b", (d_ff,), path)
        out[f"{ours}.ffn.outer.weight"] = _param(params, f"core/h{i}_mlp/linear_1", "w", (d_ff, d), path).T
        out[f"{ours}.ffn.outer.bias"] = _param(params, f"core/h{i}_mlp/linear_1", "b", (d,), path)
        used.update({f"{PREFIX}core/h{i}_mlp/linear", f"{PREFIX}core/h{i}_mlp/linear_1"})
    extra = sorted(set(params) - used)
    if extra:
        raise InputError(f"parameters our network does not have: {', '.join(extra[:5])}", str(path))
    return {k: np.ascontiguousarray(v) for k, v in out.items()}


def convert(family: str, checkpoint: Path, vocab: Path | None) -> Converted:
    """An official checkpoint and dictionary of ``family`` (tg, txl-trees, txl-terminals) in our form."""
    if vocab is None:
        raise InputError("the official dictionary is needed: --vocab PREFIX.txt (tools/build_dictionary.py)",
                         "--vocab")
    official = read_checkpoint(Path(checkpoint))
    actions = read_dictionary(Path(vocab))
    rows = official.params[PREFIX + "embedding_layer"].get("input_embedding")
    if rows is None or rows.ndim != 2:
        raise InputError(f"parameter {PREFIX}embedding_layer/input_embedding is missing", str(checkpoint))
    if rows.shape[0] != len(actions):
        raise InputError(f"the dictionary has {len(actions)} tokens but the checkpoint's embedding has "
                         f"{rows.shape[0]} rows", str(vocab))
    has_nts = bool(actions.opening)
    if family == "txl-terminals" and has_nts:
        raise InputError("this dictionary has nonterminals: a tree model (import it as txl-trees or tg)", str(vocab))
    if family != "txl-terminals" and not has_nts:
        raise InputError(f"this dictionary has no nonterminals: {family} reads trees (a words-only model is "
                         "txl-terminals)", str(vocab))
    model, memory = model_config(family, official.config, len(actions), Path(checkpoint))
    state = state_dict_of(official.params, model, Path(checkpoint))
    source = {"official": OFFICIAL, "format": official.format, "official_config": dict(official.config),
              "dictionary": {"terminals": len(actions.terminals), "opening": len(actions.opening),
                             "closing": len(actions.closing)},
              "conventions": ["ids kept (the official dictionary layout is ours)",
                              "attention_dropout = the official core_dropout",
                              "relative positions: depth differences clipped to [min_rel - 1, max_rel]" if
                              family == "tg" else
                              "relative positions: i - j over memory + chunk, table [1 - L, L + M] (the official "
                              "relative shift)"],
              "settings": {"memory": memory, "relpos": model["relpos"], "min_rel": model["min_rel"],
                           "max_rel": model["max_rel"]}}
    return Converted(model, state, actions, memory, source)
