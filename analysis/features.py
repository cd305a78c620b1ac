"""Per-layer representations of a checkpoint at the nodes of gold trees (TG §4.3), cached.

The checkpoint's family adapter gives a *prober* (``Family.prober``) that says where each node's
representation sits in the encoded tree and runs the network in eval mode without gradients, reading the
embedding output (layer 0) and each layer's output; the model is not modified. Which representations a
family has is its own (e.g. TG: ``compose`` and ``stack`` per constituent; see the family's probing
module); every family has ``word``.

Representations, one row per node (``analysis.probing_tasks``: words in order, constituents in post-order =
the order of the closing nonterminals). A representation whose positions are (first, last) word pairs is the
concatenation of those words' vectors (2·d).

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
from lightning_modules.data.checksums import file_sha256
from lightning_modules.data.tree import Tree, clean, to_bracketed
from lightning_modules.errors import InputError

CACHE_VERSION = 1
WORD = "word"


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
    from experiments.families import checkpoint_family

    checkpoint = Path(checkpoint)
    if batch_size < 1:
        raise InputError("must be at least 1", "batch_size")
    if not trees:
        raise InputError("no trees to extract features for", "trees")
    adapter, meta = checkpoint_family(checkpoint)
    if "probe" not in adapter.capabilities(meta["config"]):
        raise InputError(f"{adapter.name} checkpoints cannot be probed", str(checkpoint))
    prober = adapter.prober(checkpoint, device)
    n_layers = prober.n_layers
    layers = tuple(range(n_layers + 1)) if layers is None else tuple(sorted(set(int(k) for k in layers)))
    if not layers or layers[0] < 0 or layers[-1] > n_layers:
        raise InputError(f"layers must be in 0..{n_layers} (0 = embeddings), got {list(layers)}", "layers")
    cleaned = [clean(t) for t in trees]
    key = {"version": CACHE_VERSION, "checkpoint": file_sha256(checkpoint), "trees": trees_sha256(cleaned),
           "layers": list(layers), "family": prober.family, "representations": list(prober.representations)}
    path = None
    if cache_dir is not None:
        name = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:32]
        path = Path(cache_dir) / f"features-{name}.npz"
        cached = _read_cache(path, key)
        if cached is not None:
            return cached
    features = _compute(prober, cleaned, layers, batch_size)
    if path is not None:
        _write_cache(path, key, features)
    return features


# -- computation --------------------------------------------------------------------------------------------
def node_positions(prober: Any, tree: Tree, location: str = "tree") -> tuple[Any, np.ndarray, dict[str, np.ndarray]]:
    """(encoded sequence, position of each word, positions of the constituents per representation)."""
    nodes = tree_nodes(tree, location)
    spans = np.asarray([(c.start, c.end - 1) for c in nodes.constituents], dtype=np.int64).reshape(-1, 2)
    return prober.positions(tree, spans, location)


def _compute(prober: Any, trees: Sequence[Tree], layers: tuple[int, ...], batch_size: int) -> Features:
    encoded = [node_positions(prober, t, f"tree {i}") for i, t in enumerate(trees)]
    word_rows: list[np.ndarray | None] = [None] * len(trees)
    cons_rows: list[dict[str, np.ndarray] | None] = [None] * len(trees)
    order = sorted(range(len(trees)), key=lambda i: -len(encoded[i][0]))  # similar lengths together
    for b in range(0, len(order), batch_size):
        batch = order[b : b + batch_size]
        hidden = prober.hidden([encoded[i][0] for i in batch], layers)  # [B, T, len(layers), d]
        for row, i in enumerate(batch):
            _, words, reps = encoded[i]
            word_rows[i] = hidden[row, words]
            cons_rows[i] = {name: _constituent_rows(hidden[row], words, p) for name, p in reps.items()}
    names = prober.representations
    d = prober.d_model
    word = np.concatenate(word_rows).astype(np.float16)
    constituent = {name: np.concatenate([r[name] for r in cons_rows]).astype(np.float16).reshape(
        -1, len(layers), 2 * d if encoded[0][2][name].ndim == 2 else d) for name in names}
    return Features(prober.family, layers, word, _offsets(len(e[1]) for e in encoded), constituent,
                    _offsets(len(e[2][names[0]]) for e in encoded))


def _constituent_rows(hidden: np.ndarray, words: np.ndarray, positions: np.ndarray) -> np.ndarray:
    if positions.ndim == 2:  # (first word, last word) pairs
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
        names = tuple(key["representations"])
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
