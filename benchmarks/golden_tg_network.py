"""Golden forward values of the official Transformer Grammars network (TG, TXL (trees), TXL (terminals)).

Run by hand, outside CI, in an environment with the official code's dependencies (CPU ``jax``, ``dm-haiku``,
``optax``, ``chex``, ``einshape``, ``dm-tree``, ``absl-py``, ``nltk``; the masking library is compiled as
``benchmarks/parity_tg_masking.py`` does; on a JAX without ``lax.tie_in``, a no-op since JAX 0.2.0, it is
defined as the identity it was):

    python -m benchmarks.golden_tg_network --official DIR --out tests/golden/tg [--data-dir DIR]

``DIR`` is a checkout of google-deepmind/transformer_grammars. For each configuration (``CONFIGS``: small
official models, 2 layers, d = 16, 4 heads, segment = memory = 16 tokens, so sentences span several segments) it
builds the official ``GeneralizedTXLLanguageModel`` with random weights from a fixed PRNG seed (the
parameters the official initialisers leave constant, biases and layer-norm scales/offsets, are perturbed so
that they are tested too) and writes

* ``NAME.npz``: the Haiku parameters as ``params/MODULE/PARAM`` arrays plus ``config`` (the official model
  config as JSON text), readable with ``allow_pickle=False``: the form synbench's converter prefers;
* ``tg.pkl`` (TG only, to keep the folder small): the official checkpoint format itself, what its
  ``train.py`` pickles and ``score.py`` loads (``Checkpoint(step, params, opt_state, config)``, Adam state);
* ``NAME.json``: for 20 PTB-sample sentences the official per-token log-probabilities (score.py's, dropout
  off, batch 1, chunk by chunk with the memory) and per-chunk losses (train.py's ``total_loss, total_count``);
* ``dictionary.txt/.json`` (trees) and ``terminals.txt/.json`` (words): the official word-level
  dictionary files, as ``tools/build_dictionary.py`` writes them, built over the 20 sentences.
"""

from __future__ import annotations

import argparse
import importlib
import json
import pickle
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.parity_common import fail, ptb_sample_trees
from benchmarks.parity_tg_masking import build_library
from lightning_modules.data.tree import clean, to_bracketed

SEED = 1234
N_SENTENCES = 20
LENGTH = 16  # segment length = memory length
BASE = dict(d_model=16, num_layers=2, num_heads=4, ffw_hidden_size=32, embedding_dropout=0.1, core_dropout=0.1,
            core_output_dropout=0.1, sequence_length=LENGTH, memory_length=LENGTH,
            tied_input_output_embeddings=True, relative_position_embeddings=1, tied_layer_weights=0)


def tg_config(use_different_attn_fns: int, gather_into_new_memory: int = 1) -> dict[str, Any]:
    """``configs/config_tg.py``'s model section, small."""
    return dict(BASE, extra_attention_mask_name="stack_compose_double_closing_nt",
                extra_attention_mask_kwargs=dict(relative_pos="delta_depth",
                                                 use_different_attn_fns=use_different_attn_fns,
                                                 transparency_prob=0.0, gather_into_new_memory=gather_into_new_memory,
                                                 transparency_depth_threshold=-1),
                min_relative_position=-1, max_relative_position=62, num_unrestricted_layers=0,
                num_unrestricted_heads=None)


# name -> (official model config, sequences: "trees" (Choe–Charniak, no </s>) or "terminals" (words, </s>))
CONFIGS: dict[str, tuple[dict[str, Any], str]] = {
    "tg": (tg_config(0), "trees"),
    "tg-compose-attn": (tg_config(1), "trees"),  # use_different_attn_fns=1: a second attention at COMPOSE
    "tg-plain-memory": (tg_config(0, gather_into_new_memory=0), "trees"),  # Transformer-XL memory
    "tg-no-positions": (dict(tg_config(0), relative_position_embeddings=0), "trees"),  # TG Table 2's ablation
    "txl-trees": (dict(BASE), "trees"),  # configs/config_txl.py: no TG mask, linear relative positions
    "txl-terminals": (dict(BASE), "terminals"),
}


class Official:
    """The official modules, imported from a checkout with the masking extension compiled."""

    def __init__(self, official: Path, build_dir: Path):
        import jax

        if not hasattr(jax.lax, "tie_in"):  # removed from JAX; a documented no-op since JAX 0.2.0
            jax.lax.tie_in = lambda x, y: y
        sys.path[:0] = [str(build_library(official, build_dir)), str(official)]
        cpp = importlib.import_module("cpp_masking")
        sys.modules["transformer_grammars.models.masking.cpp_masking"] = cpp
        try:
            self.common = importlib.import_module("transformer_grammars.common")
            self.preprocessing = importlib.import_module("transformer_grammars.data.preprocessing")
            self.masking_utils = importlib.import_module("transformer_grammars.models.masking.utils")
            self.text_processing = importlib.import_module("transformer_grammars.data.text_processing")
            self.constants = importlib.import_module("transformer_grammars.data.constants")
            self.checkpoint = importlib.import_module("transformer_grammars.training.checkpoint")
        except ImportError as e:
            fail(f"the official code needs {e.name}: pip install jax dm-haiku optax chex einshape dm-tree "
                 "absl-py nltk")


def commit_of(official: Path) -> str:
    """The checkout's commit (``git rev-parse HEAD``), or what ``COMMIT`` in it says for an extracted tree."""
    done = subprocess.run(["git", "-C", str(official), "rev-parse", "HEAD"], capture_output=True, text=True)
    if done.returncode == 0:
        return done.stdout.strip()
    marker = official / "COMMIT"
    return marker.read_text().strip() if marker.is_file() else "unknown"


def write_dictionary(prefix: Path, sequences: list[list[str]], official: Official) -> tuple[list[str], Any]:
    """``tools/build_dictionary.py``'s two files for ``sequences``; returns (id -> word, token type ranges)."""
    c = official.constants
    terminals, opening, closing = set(), set(), set()
    for seq in sequences:
        for w in seq:
            if c.OPENING_NON_TERMINAL_REGEXP.match(w):
                opening.add(w)
            elif c.CLOSING_NON_TERMINAL_REGEXP.match(w):
                closing.add(w)
            else:
                terminals.add(w)
    words = [*c.RESERVED_WORDS, *sorted(terminals), *sorted(opening), *sorted(closing)]
    meta = dict(num_reserved=len(c.RESERVED_WORDS), num_terminals=len(terminals),
                num_opening_non_terminals=len(opening), num_closing_non_terminals=len(closing),
                extra_untyped_closing_non_terminal=False)
    prefix.with_suffix(".txt").write_text("".join(w + "\n" for w in words), encoding="utf-8")
    prefix.with_suffix(".json").write_text(json.dumps(meta) + "\n", encoding="utf-8")
    return words, official.masking_utils.TokenTypeRanges.from_dictionary_metadata(**meta)


def perturb(params: dict, rng: np.random.RandomState) -> dict:
    """Biases, layer-norm scales and offsets away from their constant initial values (so they are tested)."""
    out = {}
    for module, leaves in params.items():
        out[module] = {}
        for name, value in leaves.items():
            value = np.asarray(value)
            if name in ("b", "bias", "offset", "scale"):
                value = value + rng.normal(0.0, 0.1, value.shape).astype(value.dtype)
            out[module][name] = value
    return out


def run_model(official: Official, name: str, model_cfg: dict[str, Any], ids: list[np.ndarray], ranges: Any,
              out: Path, commit: str) -> dict[str, Any]:
    """Initialise, save the weights, and score ``ids`` (one array per sentence) as ``score.py`` does."""
    import haiku as hk
    import jax
    import jax.numpy as jnp
    import optax

    maskrules = official.common.build_maskrules(model_cfg)
    forward = official.common.build_forward(model_cfg, maskrules, ranges, is_training=False)
    chunks = list(official.preprocessing.get_chunks_from_dataset(iter(ids), maskrules, ranges, shape_prefix=(1,),
                                                                  multithread=False))
    first = official.common.model_input_from_chunk(chunks[0], maskrules)
    params, _ = forward.init(jax.random.PRNGKey(SEED), **first)
    params = perturb(hk.data_structures.to_mutable_dict(params), np.random.RandomState(SEED))

    # the weights: npz (safe) always, the official pickle for TG
    flat = {f"params/{m}/{p}": np.asarray(v, dtype=np.float32) for m, leaves in params.items()
            for p, v in leaves.items()}
    np.savez(out / f"{name}.npz", config=np.array(json.dumps(model_cfg, sort_keys=True)), **flat)
    if name == "tg":
        opt_state = jax.tree_util.tree_map(np.asarray, optax.adam(1e-4).init(params))
        ckpt = official.checkpoint.Checkpoint(step=0, params=params, opt_state=opt_state, config=dict(model_cfg))
        with open(out / f"{name}.pkl", "wb") as f:
            pickle.dump(ckpt, f)

    @jax.jit
    def call(params: Any, state: Any, chunk: Any) -> Any:
        inputs = official.common.model_input_from_chunk(chunk, maskrules)
        logits, state = forward.apply(params, state, None, **inputs)
        log_probs = jax.nn.log_softmax(logits, axis=-1)
        mask = jnp.logical_and(jnp.greater(chunk.labels, 0), jnp.greater(chunk.seq_idx, -1)[:, None])
        label_lp = jnp.take_along_axis(log_probs, chunk.labels[..., None], axis=-1)[..., 0]
        ce = optax.softmax_cross_entropy(logits, jax.nn.one_hot(chunk.labels, logits.shape[-1]))
        return label_lp, mask, jnp.sum(mask * ce), jnp.sum(mask), state

    state = None
    sentences: list[dict[str, Any]] = [{"logprobs": [], "chunk_losses": []} for _ in ids]
    total, count = 0.0, 0
    for chunk in chunks:
        if state is None:
            _, state = forward.init(jax.random.PRNGKey(SEED), **official.common.model_input_from_chunk(chunk,
                                                                                                    maskrules))
        label_lp, mask, chunk_loss, chunk_count, state = call(params, state, chunk)
        record = sentences[int(chunk.seq_idx[0])]
        record["logprobs"] += [float(v) for v, m in zip(np.asarray(label_lp[0]), np.asarray(mask[0])) if m]
        record["chunk_losses"].append([float(chunk_loss), int(chunk_count)])
        total, count = total + float(chunk_loss), count + int(chunk_count)
    return {"official_commit": commit, "name": name, "config": model_cfg, "seed": SEED, "sentences": sentences,
            "total_loss": total, "total_count": count, "loss": total / count}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--official", required=True, type=Path, metavar="DIR",
                   help="a checkout of google-deepmind/transformer_grammars")
    p.add_argument("--out", required=True, type=Path, metavar="DIR", help="where the golden files go")
    p.add_argument("--data-dir", metavar="DIR", help="where ptb-sample is (as the parity scripts)")
    p.add_argument("--build-dir", type=Path, default=Path(tempfile.gettempdir()) / "synbench-parity-tg")
    args = p.parse_args(argv)
    official = Official(args.official, args.build_dir)
    commit = commit_of(args.official)
    args.out.mkdir(parents=True, exist_ok=True)

    trees = [to_bracketed(clean(t)) for _, t in ptb_sample_trees(args.data_dir)]
    chosen = [t for t in trees if 4 <= len(clean_words(t)) <= 20][:N_SENTENCES]
    cc = [official.text_processing.choe_charniak_from_tree(t, has_preterms=True).split(" ") for t in chosen]
    words = [clean_words(t) for t in chosen]
    seqs = {"trees": cc, "terminals": words}
    dictionaries = {"trees": write_dictionary(args.out / "dictionary", cc, official),
                    "terminals": write_dictionary(args.out / "terminals", words, official)}
    for name, (model_cfg, kind) in CONFIGS.items():
        vocab, ranges = dictionaries[kind]
        index = {w: i for i, w in enumerate(vocab)}
        eos = [index["</s>"]] if kind == "terminals" else []  # add_eos: False for Choe–Charniak, True for words
        ids = [np.array([index["<s>"], *(index[w] for w in seq), *eos], dtype=np.int32) for seq in seqs[kind]]
        golden = run_model(official, name, dict(model_cfg, vocab_size=len(vocab)), ids, ranges, args.out, commit)
        for record, tree, seq in zip(golden["sentences"], chosen, seqs[kind]):
            record["tree"], record["tokens"] = tree, ["<s>", *seq, *(["</s>"] if kind == "terminals" else [])]
        golden["dictionary"] = "dictionary" if kind == "trees" else "terminals"
        (args.out / f"{name}.json").write_text(json.dumps(golden, indent=None) + "\n", encoding="utf-8")
        print(f"{name}: {golden['total_count']} tokens, loss {golden['loss']:.6f}")
    return 0


def clean_words(tree_text: str) -> list[str]:
    """The words of a bracketed tree (its leaves)."""
    from lightning_modules.data.tree import parse_tree

    return parse_tree(tree_text).leaves()


if __name__ == "__main__":
    raise SystemExit(main())
