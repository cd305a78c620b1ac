"""Where TG-family checkpoints hold the representations TG §4.3 probes (``analysis.features`` reads them).

- ``word`` (all three): the word's terminal token; a word split into several SentencePiece pieces is
  represented by its **last** piece, the first position whose context has seen the whole word.
- ``tg``: per constituent, ``compose`` = its CNT1 (COMPOSE) position and ``stack`` = its CNT2 (STACK)
  position, the two copies of its closing nonterminal (TG §2.1), kept separate as in the paper;
- ``txl-trees``: ``closing`` = the constituent's closing nonterminal;
- ``txl-terminals``: ``first+last`` = its first and last word's ``word`` vectors, concatenated (2·d).

A tree is linearised exactly as the evaluation does (the checkpoint's terminals, family encoding and
segmentation); forward hooks read the embedding output (layer 0; dropout is off in eval mode) and the output
of ``network.layers[k - 1]`` (layer k); chunks of long sequences run in order with the model's memory.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from lightning_modules.data.tree import Tree, drop_pos_tags
from lightning_modules.errors import InputError

REPRESENTATIONS = {"tg": ("compose", "stack"), "txl-trees": ("closing",), "txl-terminals": ("first+last",)}


class TGProber:
    """The probing view of a loaded ``TGModel``: node positions and per-layer hidden states."""

    def __init__(self, model: Any):
        self.model = model
        self.family: str = model.family
        self.representations: tuple[str, ...] = REPRESENTATIONS[model.family]
        self.n_layers: int = model.module.network.n_layers
        self.d_model: int = model.module.network.d_model

    def positions(self, tree: Tree, spans: np.ndarray, location: str = "tree"
                  ) -> tuple[Any, np.ndarray, dict[str, np.ndarray]]:
        """(encoded sequence, each word's position, each representation's positions per constituent).

        ``spans`` [n, 2] are the (first, last) word indices of the constituents in post-order (the order of the
        closing nonterminals). A representation given as such an [n, 2] array of word indices is the
        concatenation of the two words' vectors (``first+last``).
        """
        from lightning_modules.data.encodings.choe_charniak import TokenType
        from lightning_modules.families.tg.data import actions_function

        model = self.model
        if self.family != "txl-terminals" and model.tree_transform != "none":
            raise InputError(f"the checkpoint was trained on {model.tree_transform!r}-transformed trees: its "
                             "closing nonterminals are not the gold constituents", "checkpoint")
        # a document-level checkpoint reads the sentence as a one-sentence document: (DOC ...) closes last
        example = model.encode(actions_function(self.family, model.level, model.terminals)([drop_pos_tags(tree)]))
        is_word = example.word_index >= 0
        words = np.zeros(len(tree.leaves()), dtype=np.int64)
        np.maximum.at(words, example.word_index[is_word], np.flatnonzero(is_word))  # each word's last piece
        n = len(spans)
        if self.family == "tg":
            reps = {"compose": np.flatnonzero(example.types == TokenType.CNT)[:n],
                    "stack": np.flatnonzero(example.types == TokenType.CNT2)[:n]}
        elif self.family == "txl-trees":
            reps = {"closing": np.flatnonzero(example.types == TokenType.CNT)[:n]}
        else:
            reps = {"first+last": np.asarray(spans, dtype=np.int64).reshape(-1, 2)}
        if any(len(p) != n for p in reps.values()):
            raise InputError("the encoded tree has fewer closing nonterminals than constituents", location)
        return example, words, reps

    def hidden(self, examples: Sequence[Any], layers: Sequence[int]) -> np.ndarray:
        """[B, T, len(layers), d] float32: the outputs of the selected layers for a batch of sequences."""
        import torch

        from lightning_modules.data.encodings.batch import collate_chunk
        from lightning_modules.data.encodings.segmentation import segment

        model = self.model
        network = model.module.network
        captured: dict[int, list] = {k: [] for k in layers}

        def keep(k: int):
            return lambda module, inputs, output: captured[k].append(output.detach().float().cpu())

        hooks = [(network.embedding if k == 0 else network.layers[k - 1]).register_forward_hook(keep(k))
                 for k in layers]
        try:
            with torch.no_grad():
                segs = [segment(e, model.length, model.length, model.memory) for e in examples]
                chunks = [collate_chunk(list(examples), segs, c, trim=True).to(model.device)
                          for c in range(max(len(s) for s in segs))]
                model.module(chunks)
        finally:
            for hook in hooks:
                hook.remove()
        # chunks before the last have the full segment length
        return torch.stack([torch.cat(captured[k], dim=1) for k in layers], dim=2).numpy()
