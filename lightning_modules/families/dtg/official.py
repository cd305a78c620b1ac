"""Checkpoints of the official DTG code (zhaoyd1/Dep_Transformer_Grammars) -> this family's config and weights.

The official training scripts (``train_dep_gen.py`` for DTG, ``train_dep.py`` for TXL (trans)) ``torch.save`` a
dict ``{'args': argparse.Namespace, 'model': the whole module, 'vocab': [piece, ...], 'optimizer', 'scheduler',
'warm_up_scheduler'}``: the model is a pickled ``model_dep_gen_first.TransformerGrammar`` (DTG) or
``model_bllip_dep.TransformerGrammar`` (TXL). It is read with ``torch.load(weights_only=True)``, every class the
pickle names (the official model classes, ``torch.nn`` modules, ``argparse.Namespace``) rebuilt as a plain
record of its attributes (``Record``): no code from the file runs, and any other global is refused.

Mapping (official -> ours, ``network.`` prefix): ``emb.weight`` -> ``embedding.weight`` (tied with
``projection.weight``), ``projection.bias`` -> ``output_bias``, rows permuted from the official vocabulary
(its SentencePiece ids) to ours (``ActionVocab``: reserved, pieces, transitions); a row of ours with no official
token (the reserved placeholder, a piece spelled like a transition) gets a zero embedding and an output bias of
-1e4 (probability 0). Per layer: ``dec_attn.qkv_net.0.weight`` split in three -> ``query``/``key``/``value``,
``dec_attn.r_net`` -> ``relative_keys``, ``dec_attn.o_net`` -> ``output`` (no bias: ``attention_output_bias``
false), ``dec_attn.layer_norm`` -> ``ln1``, ``pos_ff.CoreNet.0``/``.3`` -> ``ffn.inner``/``ffn.outer`` (ReLU),
``pos_ff.layer_norm`` -> ``ln2``; the model's ``r_w_bias``/``r_r_bias`` -> every layer's (shared); DTG's
``action_mlp.0``/``.3`` -> ``action_head.0``/``.3`` (``output_head: split``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import torch

from lightning_modules.errors import InputError
from lightning_modules.families.dtg.model import DTGConfig

SPECIALS = {"<pad>": "<PAD>", "<s>": "<s>", "</s>": "</s>", "<unk>": "<unk>"}  # official -> ours (choe_charniak)
TRANSITIONS = ("left_arc", "right_arc", "pop_root")
MODEL_CLASSES = {"model_dep_gen_first.TransformerGrammar": "dtg", "model_bllip_dep.TransformerGrammar": "txl-trans"}
MODULE_CLASSES = (
    "TransformerGrammarLayer", "RelPartialLearnableMultiHeadAttn", "PositionwiseFF", "PositionalEmbedding",
)
TORCH_CLASSES = (
    "torch.nn.modules.linear.Linear", "torch.nn.modules.sparse.Embedding", "torch.nn.modules.dropout.Dropout",
    "torch.nn.modules.container.ModuleList", "torch.nn.modules.container.Sequential",
    "torch.nn.modules.activation.ReLU", "torch.nn.modules.normalization.LayerNorm", "argparse.Namespace",
)
UNSEEN_BIAS = -1e4  # the output bias of a token the official vocabulary does not have: probability 0


class Record:
    """A pickled object of an allowed class, rebuilt as plain data: its attributes, nothing callable."""

    official_name = ""

    def __repr__(self) -> str:
        return f"<{self.official_name}>"


def _record_classes() -> list[tuple[type, str]]:
    """(a ``Record`` subclass, the official global it stands for) for every class an official checkpoint
    pickles."""
    names = [*MODEL_CLASSES, *(f"{m.split('.')[0]}.{c}" for m in MODEL_CLASSES for c in MODULE_CLASSES),
             *TORCH_CLASSES]
    return [(type(name.rsplit(".", 1)[-1], (Record,), {"official_name": name}), name) for name in names]


@dataclass(frozen=True)
class OfficialModel:
    """What an official checkpoint holds that a conversion needs."""

    family: str  # dtg | txl-trans
    config: DTGConfig  # ours, the official architecture's settings
    vocab: list[str]  # the official vocabulary (SentencePiece pieces by id)
    weights: dict[str, torch.Tensor]  # the official state_dict's names -> tensors
    args: dict[str, Any]  # the official training arguments (plain values)


def read(path: Path) -> OfficialModel:
    """Read an official DTG / TXL (trans) checkpoint safely; ``InputError`` naming ``path`` for anything else."""
    if not path.is_file():
        raise InputError("checkpoint not found", str(path))
    try:
        with torch.serialization.safe_globals([*_record_classes(), (set, "__builtin__.set"),
                                               (set, "builtins.set")]):
            ckpt = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as e:  # not a torch file, truncated, or a global outside the official format
        raise InputError("not an official Dep_Transformer_Grammars checkpoint "
                         f"({type(e).__name__}: {str(e).splitlines()[0][:160]})", str(path)) from None
    model = ckpt.get("model") if isinstance(ckpt, dict) else None
    name = getattr(model, "official_name", None)
    if name not in MODEL_CLASSES:
        what = "a synbench checkpoint" if isinstance(ckpt, dict) and "synbench" in ckpt else (
            f"its 'model' is {name or type(model).__name__}")
        raise InputError(f"not an official Dep_Transformer_Grammars checkpoint ({what}; expected 'model' to be "
                         f"{' or '.join(MODEL_CLASSES)}, as train_dep_gen.py / train_dep.py save it)", str(path))
    vocab = ckpt.get("vocab")
    if not isinstance(vocab, list) or not all(isinstance(t, str) for t in vocab):
        raise InputError("the checkpoint's 'vocab' is not a list of pieces", str(path))
    args = vars(ckpt["args"]) if isinstance(ckpt.get("args"), Record) else {}
    weights = state_dict(model, path)
    family = MODEL_CLASSES[name]
    return OfficialModel(family, official_config(family, model, weights, args, path), vocab, weights,
                         {k: v for k, v in args.items() if isinstance(v, (str, int, float, bool, type(None)))})


def state_dict(model: Record, path: Path) -> dict[str, torch.Tensor]:
    """The official module tree's parameters and persistent buffers by their state_dict names."""
    out: dict[str, torch.Tensor] = {}

    def walk(node: Any, prefix: str) -> None:
        for key in ("_parameters", "_buffers"):
            for name, value in (getattr(node, "__dict__", {}).get(key) or {}).items():
                if isinstance(value, torch.Tensor):
                    out[prefix + name] = value.detach()
        for name, child in (getattr(node, "__dict__", {}).get("_modules") or {}).items():
            if child is not None:
                walk(child, f"{prefix}{name}.")

    walk(model, "")
    if "emb.weight" not in out:
        raise InputError("the official model has no embedding (emb.weight)", str(path))
    return out


def official_config(family: str, model: Record, weights: Mapping[str, torch.Tensor], args: Mapping[str, Any],
                    path: Path) -> DTGConfig:
    """Our config of the official architecture: sizes from the weights, the official port's conventions."""
    attrs = model.__dict__
    try:
        vocab_size, d_model = weights["emb.weight"].shape
        n_layers = sum(1 for k in weights if k.endswith(".dec_attn.qkv_net.0.weight"))
        n_heads, d_head = weights["r_w_bias"].shape
        d_ff = weights["layers.0.pos_ff.CoreNet.0.weight"].shape[0]
    except (KeyError, ValueError) as e:
        raise InputError(f"the official model lacks a tensor of its format ({e})", str(path)) from None
    if n_heads * d_head != d_model:
        raise InputError(f"n_head * d_head = {n_heads * d_head} differs from w_dim = {d_model} (synbench's heads "
                         "split the model width)", str(path))
    if attrs.get("layers") is not None and any(
            layer.__dict__.get("_modules", {}).get("dec_attn").__dict__.get("pre_lnorm")
            for layer in attrs["layers"].__dict__.get("_modules", {}).values()):
        raise InputError("a pre-LN official model (--pre_lnorm) has no synbench equivalent", str(path))
    mask = args.get("attn_mask")
    expected = {"dtg": ("sub+action",), "txl-trans": ("txl_arc",)}[family]
    if mask is not None and mask not in expected:
        raise InputError(f"trained with --attn_mask {mask}; synbench imports {family} models trained with "
                         f"--attn_mask {expected[0]} (the paper's)", str(path))
    max_rel = int(args.get("max_relative_length", 62))
    min_rel = int(args.get("min_relative_length", -1))
    common: dict[str, Any] = dict(
        vocab_size=vocab_size, d_model=d_model, n_layers=n_layers, n_heads=n_heads, d_ff=d_ff,
        embedding_dropout=0.0, core_dropout=0.0, core_output_dropout=0.0, attention_dropout=0.0,
        segment_length=512, memory_length=512, system="standard", shared_relative_bias=True,
        scale_embeddings=False, ffn_activation="relu", attention_output_bias=False,
        # the official optimisation arguments, where the checkpoint records them (for fine-tuning)
        emb_lr_multiplier=float(args.get("emb_lr_multiplier", 2.0)), peak_lr=float(args.get("max_lr", 1.5e-4)),
        start_lr=float(args.get("start_lr", 1e-7)), min_lr=float(args.get("eta_min", 3e-7)),
        warmup_steps=int(args.get("lr_warm_step", 8000)), grad_clip_norm=float(args.get("max_grad_norm", 3.0)))
    if family == "dtg":
        return DTGConfig(**common, relpos="delta_depth", min_rel=min_rel, max_rel=max_rel, arc_input="w+arc",
                         output_head="split").validate()
    return DTGConfig(**common, relpos="linear", min_rel=-511, max_rel=1024, arc_input="arc",
                     output_head="joint").validate()


def our_tokens(pieces: Sequence[str]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """Our vocabulary of the official pieces, as ``data.build`` makes it from a SentencePiece model: terminals
    (the pieces from id 4, escaped, then ``<unk>``) and transitions (sorted)."""
    from lightning_modules.families.dtg.data import UNKNOWN_PIECE, escaped

    return (*(escaped(p) for p in pieces[4:]), UNKNOWN_PIECE), tuple(sorted(TRANSITIONS))


def check_vocab(pieces: Sequence[str], path: Path) -> None:
    """The official layout: ``<pad> <s> </s> <unk>`` at ids 0-3, the three transitions present (``pop_root`` right
    after ``right_arc``, as the official masking's token types need)."""
    if list(pieces[:4]) != list(SPECIALS):
        raise InputError(f"the vocabulary does not start with {' '.join(SPECIALS)} (got {' '.join(pieces[:4])})",
                         str(path))
    missing = [t for t in TRANSITIONS if t not in pieces]
    if missing:
        raise InputError(f"the vocabulary lacks {', '.join(missing)}", str(path))
    if pieces.index("pop_root") != pieces.index("right_arc") + 1:
        raise InputError("pop_root does not follow right_arc (the official token types need it)", str(path))


def convert_weights(official: OfficialModel, tokens: Sequence[str], path: Path) -> dict[str, torch.Tensor]:
    """Our LightningModule state_dict (``network.`` names) from the official weights; ``tokens``: our vocabulary
    in id order."""
    w, c = official.weights, official.config
    if w["emb.weight"].shape[0] != len(official.vocab):
        raise InputError(f"the embedding has {w['emb.weight'].shape[0]} rows but the vocabulary "
                         f"{len(official.vocab)} pieces", str(path))
    from lightning_modules.families.dtg.data import escaped

    ours_of = {t: i for i, t in enumerate(tokens)}
    rows = []
    for i, piece in enumerate(official.vocab):
        ours = SPECIALS.get(piece) or (piece if piece in TRANSITIONS else escaped(piece))
        rows.append((ours_of[ours], i))
    target = torch.tensor([r for r, _ in rows])
    source = torch.tensor([s for _, s in rows])
    d = c.d_model
    embedding = torch.zeros(len(tokens), d)
    embedding[target] = w["emb.weight"][source].float()
    bias = torch.full((len(tokens),), UNSEEN_BIAS)
    bias[target] = w["projection.bias"][source].float()
    out = {"network.embedding.weight": embedding, "network.output_bias": bias}
    for k in range(c.n_layers):
        o, n = f"layers.{k}.", f"network.layers.{k}."
        q, key, v = w[o + "dec_attn.qkv_net.0.weight"].float().chunk(3, dim=0)
        attn = n + "attentions.0."
        out.update({attn + "query.weight": q, attn + "key.weight": key, attn + "value.weight": v,
                    attn + "relative_keys.weight": w[o + "dec_attn.r_net.weight"].float(),
                    attn + "r_w_bias": w["r_w_bias"].float(), attn + "r_r_bias": w["r_r_bias"].float(),
                    attn + "output.weight": w[o + "dec_attn.o_net.weight"].float()})
        for ours, theirs in (("ln1", "dec_attn.layer_norm"), ("ffn.inner", "pos_ff.CoreNet.0"),
                             ("ffn.outer", "pos_ff.CoreNet.3"), ("ln2", "pos_ff.layer_norm")):
            out[f"{n}{ours}.weight"] = w[f"{o}{theirs}.weight"].float()
            out[f"{n}{ours}.bias"] = w[f"{o}{theirs}.bias"].float()
    if c.output_head == "split":
        for i in (0, 3):
            out[f"network.action_head.{i}.weight"] = w[f"action_mlp.{i}.weight"].float()
            out[f"network.action_head.{i}.bias"] = w[f"action_mlp.{i}.bias"].float()
    return out


def convert(path: Path, vocab_file: Path | None = None) -> tuple[OfficialModel, tuple[str, ...], tuple[str, ...],
                                                                  dict[str, torch.Tensor]]:
    """Read and convert: (the official model, our terminal tokens, our transitions, our state_dict). The
    optional ``vocab_file`` (the official ``spm.vocab``) must list the checkpoint's pieces."""
    from lightning_modules.data.encodings.choe_charniak import ActionVocab

    official = read(path)
    check_vocab(official.vocab, path)
    if vocab_file is not None:
        try:
            listed = [line.split()[0] for line in vocab_file.read_text(encoding="utf-8").splitlines() if line.strip()]
        except (OSError, UnicodeDecodeError, IndexError) as e:
            raise InputError(f"cannot read the vocabulary file ({type(e).__name__})", str(vocab_file)) from None
        if listed != official.vocab:
            raise InputError(f"lists {len(listed)} pieces that differ from the checkpoint's {len(official.vocab)}",
                             str(vocab_file))
    terminals, transitions = our_tokens(official.vocab)
    vocab = ActionVocab(terminals, (), transitions)
    state = convert_weights(official, vocab.tokens, path)
    # ours has more rows: the reserved placeholder and the transitions' escaped spellings as pieces
    official = replace(official, config=replace(official.config, vocab_size=len(vocab)))
    return official, terminals, transitions, state
