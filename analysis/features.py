"""Per-layer representations of TG-family checkpoints at the nodes of gold trees (TG §4.3), cached.

A tree is cleaned, its POS tags dropped and linearised exactly as the evaluation does (``TGModel``: the
checkpoint's terminals, family encoding and segmentation), and the network runs in eval mode without
gradients. Forward hooks read the embedding output (layer 0; dropout is off in eval mode) and the output of
``network.layers[k - 1]`` (layer k = 1..n_layers); the model is not modified. Chunks of long sequences run
in order with the model's memory, as in training; positions are absolute in the encoded sequence.

Representations, one row per node (``analysis.probing_tasks``: words in order, constituents in post-order =
the order of the closing nonterminals):

- ``word`` (all families): the word's terminal token. A word split into several SentencePiece pieces is
  represented by its **last** piece, the first position whose stack/context has seen the whole word.
- ``tg``: per constituent, ``compose`` = its CNT1 (COMPOSE) position and ``stack`` = its CNT2 (STACK)
  position, the two copies of its closing nonterminal (TG §2.1), kept separate as in the paper;
- ``txl-trees``: ``closing`` = the constituent's closing nonterminal;
- ``txl-terminals``: ``first+last`` = the concatenation of its first and last word's ``word`` vectors (2·d).

Features are computed once per (checkpoint sha256, trees sha256, layers) and cached under ``cache_dir`` as an
uncompressed float16 ``.npz`` (written atomically). A cache file that cannot be read or does not match its key
and shapes is recomputed and replaced, never trusted.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from analysis.probing_tasks import tree_nodes
from lightning_modules.data.tree import Tree, clean, drop_pos_tags, to_bracketed
from lightning_modules.errors import InputError

CACHE_VERSION = 1
WORD = "word"
CONSTITUENT_REPRESENTATIONS = {"tg": ("compose", "stack"), "txl-trees": ("closing",),
                               "txl-terminals": ("first+last",)}


@dataclass
class Features:
    """Node representations of one checkpoint on one list of trees, at the selected ``layers``.

    ``word`` is [words, layers, d], rows of tree s at ``word_offsets[s]:word_offsets[s + 1]``;
    ``constituent[name]`` is [constituents, layers, d or 2d] with ``constituent_offsets``. All float16.
    """

    family: str
    layers: tuple[int, ...]
    word: np.ndarray
    word_offsets: np.ndarray
    constituent: dict[str, np.ndarray]
    constituent_offsets: np.ndarray

    def representations(self, kind: str) -> tuple[str, ...]:
        """Representation names for nodes of ``kind`` (``word`` or ``constituent``)."""
        return (WORD,) if kind == "word" else tuple(self.constituent)

    def matrix(self, representation: str, layer: int, sentence: np.ndarray, node: np.ndarray) -> np.ndarray:
        """float32 [n, dim]: the representation at ``layer`` of node ``node[i]`` of tree ``sentence[i]``."""
        if layer not in self.layers:
            raise InputError(f"layer {layer} was not extracted (layers: {list(self.layers)})", "layers")
        if representation == WORD:
            array, offsets = self.word, self.word_offsets
        elif representation in self.constituent:
            array, offsets = self.constituent[representation], self.constituent_offsets
        else:
            raise InputError(f"{self.family} has no representation {representation!r}", "representation")
        rows = offsets[np.asarray(sentence, dtype=np.int64)] + np.asarray(node, dtype=np.int64)
        return array[rows, self.layers.index(layer)].astype(np.float32)


def file_sha256(path: str | Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def trees_sha256(trees: Sequence[Tree]) -> str:
    """Identity of a tree list: sha256 of the bracketed trees, one per line."""
    digest = hashlib.sha256()
    for tree in trees:
        digest.update(to_bracketed(tree).encode("utf-8") + b"\n")
    return digest.hexdigest()


def extract_features(checkpoint: str | Path, trees: Sequence[Tree], layers: Sequence[int] | None = None,
                     cache_dir: str | Path | None = None, batch_size: int = 32, device: str = "cpu"
                     ) -> Features:
    """Representations of every node of ``trees`` (see the module docstring); cached when ``cache_dir``."""
    from experiments.evaluate.scorers.tg import TGModel
    from experiments.sample import load_model

    checkpoint = Path(checkpoint)
    if batch_size < 1:
        raise InputError("must be at least 1", "batch_size")
    if not trees:
        raise InputError("no trees to extract features for", "trees")
    module, meta, vocab = load_model(str(checkpoint))
    model = TGModel(module, meta, vocab, device)
    level = meta["config"]["data"].get("level", "sentence")
    n_layers = model.module.network.n_layers
    layers = tuple(range(n_layers + 1)) if layers is None else tuple(sorted(set(int(k) for k in layers)))
    if not layers or layers[0] < 0 or layers[-1] > n_layers:
        raise InputError(f"layers must be in 0..{n_layers} (0 = embeddings), got {list(layers)}", "layers")
    cleaned = [clean(t) for t in trees]
    key = {"version": CACHE_VERSION, "checkpoint": file_sha256(checkpoint), "trees": trees_sha256(cleaned),
           "layers": list(layers), "family": model.family}
    path = None
    if cache_dir is not None:
        name = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:32]
        path = Path(cache_dir) / f"features-{name}.npz"
        cached = _read_cache(path, key)
        if cached is not None:
            return cached
    features = _compute(model, level, cleaned, layers, batch_size)
    if path is not None:
        _write_cache(path, key, features)
    return features


# -- computation --------------------------------------------------------------------------------------------
def node_positions(model: Any, level: str, tree: Tree, location: str = "tree"
                   ) -> tuple[Any, np.ndarray, dict[str, np.ndarray]]:
    """(encoded ``Example``, position of each word, positions of the constituents per representation).

    ``model`` is a ``TGModel``, ``level`` the checkpoint's ``data.level``. For ``first+last`` the entries are
    the (first, last) *word indices* of each constituent's span.
    """
    from lightning_modules.data.encodings.choe_charniak import TokenType
    from lightning_modules.data.tg_data import actions_function

    nodes = tree_nodes(tree, location)
    family = model.family
    if family != "txl-terminals" and model.tree_transform != "none":
        raise InputError(f"the checkpoint was trained on {model.tree_transform!r}-transformed trees: its "
                         "closing nonterminals are not the gold constituents", "checkpoint")
    # a document-level checkpoint reads the sentence as a one-sentence document: (DOC ...) closes last
    example = model.encode(actions_function(family, level, model.terminals)([drop_pos_tags(tree)]))
    is_word = example.word_index >= 0
    words = np.zeros(len(nodes.words), dtype=np.int64)
    np.maximum.at(words, example.word_index[is_word], np.flatnonzero(is_word))  # each word's last piece
    n = len(nodes.constituents)
    if family == "tg":
        reps = {"compose": np.flatnonzero(example.types == TokenType.CNT)[:n],
                "stack": np.flatnonzero(example.types == TokenType.CNT2)[:n]}
    elif family == "txl-trees":
        reps = {"closing": np.flatnonzero(example.types == TokenType.CNT)[:n]}
    else:  # first and last word of every span
        spans = np.asarray([(c.start, c.end - 1) for c in nodes.constituents], dtype=np.int64).reshape(-1, 2)
        reps = {"first+last": spans}
    if any(len(p) != n for name, p in reps.items() if name != "first+last"):
        raise InputError("the encoded tree has fewer closing nonterminals than constituents", location)
    return example, words, reps


def _compute(model: Any, level: str, trees: Sequence[Tree], layers: tuple[int, ...], batch_size: int
             ) -> Features:
    import torch

    from lightning_modules.data.encodings.batch import collate_chunk
    from lightning_modules.data.encodings.segmentation import segment

    encoded = [node_positions(model, level, t, f"tree {i}") for i, t in enumerate(trees)]
    network = model.module.network
    captured: dict[int, list] = {k: [] for k in layers}

    def keep(k: int):
        return lambda module, inputs, output: captured[k].append(output.detach().float().cpu())

    hooks = [(network.embedding if k == 0 else network.layers[k - 1]).register_forward_hook(keep(k))
             for k in layers]
    word_rows: list[np.ndarray | None] = [None] * len(trees)
    cons_rows: list[dict[str, np.ndarray] | None] = [None] * len(trees)
    order = sorted(range(len(trees)), key=lambda i: -len(encoded[i][0]))  # similar lengths together
    try:
        with torch.no_grad():
            for b in range(0, len(order), batch_size):
                batch = order[b : b + batch_size]
                examples = [encoded[i][0] for i in batch]
                segs = [segment(e, model.length, model.length, model.memory) for e in examples]
                chunks = [collate_chunk(examples, segs, c, trim=True).to(model.device)
                          for c in range(max(len(s) for s in segs))]
                for k in layers:
                    captured[k].clear()
                model.module(chunks)
                # [B, T, len(layers), d]: chunks before the last have the full segment length
                hidden = torch.stack([torch.cat(captured[k], dim=1) for k in layers], dim=2).numpy()
                for row, i in enumerate(batch):
                    _, words, reps = encoded[i]
                    word_rows[i] = hidden[row, words]
                    cons_rows[i] = {name: _constituent_rows(name, hidden[row], words, p)
                                    for name, p in reps.items()}
    finally:
        for hook in hooks:
            hook.remove()
    names = CONSTITUENT_REPRESENTATIONS[model.family]
    d = network.d_model
    word = np.concatenate(word_rows).astype(np.float16)
    constituent = {name: np.concatenate([r[name] for r in cons_rows]).astype(np.float16).reshape(
        -1, len(layers), 2 * d if name == "first+last" else d) for name in names}
    return Features(model.family, layers, word, _offsets(len(e[1]) for e in encoded), constituent,
                    _offsets(len(e[2][names[0]]) for e in encoded))


def _constituent_rows(name: str, hidden: np.ndarray, words: np.ndarray, positions: np.ndarray) -> np.ndarray:
    if name == "first+last":  # positions are (first word, last word) pairs
        return np.concatenate([hidden[words[positions[:, 0]]], hidden[words[positions[:, 1]]]], axis=-1)
    return hidden[positions]


def _offsets(counts) -> np.ndarray:
    counts = np.fromiter(counts, dtype=np.int64)
    out = np.zeros(len(counts) + 1, dtype=np.int64)
    np.cumsum(counts, out=out[1:])
    return out


# -- cache --------------------------------------------------------------------------------------------------
def _read_cache(path: Path, key: dict[str, Any]) -> Features | None:
    """The cached features if ``path`` holds exactly them (key and shapes consistent), else None."""
    if not path.is_file():
        return None
    try:
        with np.load(path, allow_pickle=False) as data:
            meta = json.loads(str(data["meta"]))
            if meta["key"] != key:
                return None
            arrays = {name: data[name] for name in data.files if name != "meta"}
        layers = tuple(key["layers"])
        word, word_offsets = arrays.pop("word"), arrays.pop("word_offsets")
        cons_offsets = arrays.pop("constituent_offsets")
        constituent = {name[len("constituent:"):]: a for name, a in arrays.items()}
        names = CONSTITUENT_REPRESENTATIONS[key["family"]]
        ok = (set(constituent) == set(names) and word.ndim == 3
              and word.shape[:2] == (word_offsets[-1], len(layers))
              and word_offsets[0] == 0 and np.all(np.diff(word_offsets) >= 0) and cons_offsets[0] == 0
              and np.all(np.diff(cons_offsets) >= 0) and len(word_offsets) == len(cons_offsets)
              and len(word_offsets) == meta["n_trees"] + 1 and word.dtype == np.float16
              and all(a.ndim == 3 and a.shape[:2] == (cons_offsets[-1], len(layers)) and a.dtype == np.float16
                      for a in constituent.values()))
    except Exception:  # unreadable, truncated or foreign: recompute
        return None
    if not ok:
        return None
    constituent = {n: constituent[n] for n in names}
    return Features(key["family"], layers, word, word_offsets, constituent, cons_offsets)


def _write_cache(path: Path, key: dict[str, Any], features: Features) -> None:
    from lightning_modules.data.atomic import atomic_write_with

    meta = json.dumps({"key": key, "n_trees": len(features.word_offsets) - 1})
    arrays = {"meta": np.array(meta), "word": features.word, "word_offsets": features.word_offsets,
              "constituent_offsets": features.constituent_offsets,
              **{f"constituent:{name}": a for name, a in features.constituent.items()}}
    atomic_write_with(path, lambda f: np.savez(f, **arrays))
