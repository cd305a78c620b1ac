"""A trained RNNG as the shared tree-marginal scorer reads a joint model (``TreeModel``).

A tree's sequence is ``<start>`` and its actions; label j is log p(action j) (+ log p(word) when the action
is a ``SHIFT``), all given the actions before, so the labels sum to log p(x, y) and the structure actions
after a word's ``SHIFT`` belong to the next word (or the end). Scores are the official training ones: the
action distribution is over every action (the official ``eval_action_ppl``; the official beam search masks
invalid actions, which gold trees never take, so gold-tree values are slightly lower than the beam's).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from lightning_modules.data.tree import Tree, clean, drop_pos_tags, to_bracketed
from lightning_modules.errors import InputError
from lightning_modules.families.rnng.encoding import ActionDict, Example, WordDict, encode
from lightning_modules.families.rnng.model import RNNG, collate


@dataclass(frozen=True, eq=False)
class TreeExample:
    """An encoded tree with the views the tree-marginal scorer reads (``tokens``, ``word_index``)."""

    example: Example
    tokens: np.ndarray  # 0 (the start), then the action ids
    word_index: np.ndarray  # the word (0-based) a SHIFT generates, -1 for the start and other actions

    def __len__(self) -> int:
        return len(self.tokens)


class RNNGModel:
    """The RNNG network with its vocabularies: trees -> actions -> per-action log-probs."""

    joint = True

    def __init__(self, module: RNNG, words: WordDict, actions: ActionDict, name: str = "rnng",
                 device: str = "cpu"):
        self.module = module.to(device).eval()
        self.words, self.actions, self.name, self.device = words, actions, name, device

    family = "rnng"  # the checkpoint family this class loads
    label = "an RNNG"  # how an error names the network

    @staticmethod
    def build(config: dict[str, Any]) -> RNNG:
        """The network of a flat model config."""
        from lightning_modules.families.rnng.model import build

        return build(config)

    @classmethod
    def load(cls, checkpoint: str, device: str = "cpu") -> RNNGModel:
        from experiments.checkpoints import read_checkpoint

        ckpt = read_checkpoint(checkpoint, cls.family)
        meta = ckpt["synbench"]
        words, actions = WordDict.from_json(meta["vocab"]["words"]), ActionDict.from_json(meta["vocab"]["actions"])
        module = cls.build({**meta["config"]["model"], "vocab_size": len(words),
                            "num_nts": len(actions.nonterminals)})
        ours, theirs = set(module.state_dict()), set(ckpt["state_dict"])
        if ours != theirs:  # weights of another network under this label
            raise InputError(f"not {cls.label} of its recorded config: {len(ours - theirs)} of its parameters "
                             f"missing, {len(theirs - ours)} unknown ({', '.join(sorted(theirs - ours)[:3])})",
                             checkpoint)
        try:
            module.load_state_dict(ckpt["state_dict"])
        except RuntimeError as e:  # shapes of another config
            raise InputError(f"not {cls.label} of its recorded config ({' '.join(str(e).split())[:200]})",
                             checkpoint) from None
        return cls(module, words, actions, meta["family"], device)

    # -- TreeModel ---------------------------------------------------------------------------------------------
    def model_tree(self, tree: Any, pos_tags: bool, location: str) -> Tree:
        """The tree cleaned and POS-free; a nonterminal the model does not know, or a tree deeper than the
        network can hold (``stack_bound``), is an ``InputError`` at ``location``."""
        if not isinstance(tree, Tree):
            raise InputError(f"{self.name} scores constituency trees", location)
        try:
            view = clean(tree)
        except InputError as e:
            raise InputError(e.message, location) from None
        view = drop_pos_tags(view) if pos_tags else view
        example = encode(view, self.words, self.actions, location)
        bound = self.stack_bound()
        if bound is not None and example.stack_size > bound:
            raise InputError(f"the tree needs a stack of {example.stack_size} elements; the model's fixed stack "
                             f"holds {bound} (model.stack_size)", location)
        return view

    def stack_bound(self) -> int | None:
        """The most stack elements a scored tree may need: none for the RNNG, whose stack is sized per batch
        to its deepest tree (``collate``, as the official ``forward`` is given the batch's ``max_stack_size``:
        ``model.stack_size`` bounds only the beam)."""
        return None

    def tree_words(self, tree: Tree) -> list[str]:
        return tree.leaves()

    def tree_text(self, tree: Tree) -> str:
        return to_bracketed(tree)

    def encode_tree(self, tree: Tree) -> TreeExample:
        example = encode(tree, self.words, self.actions)
        shift = np.array(example.action_ids) == self.actions.shift_id
        word_index = np.full(len(example.action_ids) + 1, -1, dtype=np.int64)
        word_index[1:][shift] = np.arange(int(shift.sum()))
        return TreeExample(example, np.array((0, *example.action_ids), dtype=np.int64), word_index)

    @torch.no_grad()
    def label_logprobs(self, examples: Sequence[TreeExample]) -> list[np.ndarray]:
        batch = collate([e.example for e in examples]).to(self.device)
        logprobs = self.module.action_logprobs(batch).double().cpu()
        return [logprobs[b, : len(e.example)].numpy() for b, e in enumerate(examples)]

    def is_unknown(self, word: str) -> bool:
        return self.words.is_unknown(word)

    def word_boundary_ids(self) -> list[int] | None:
        return None

    def distributions(self, examples: Sequence[Any], positions: Sequence[Sequence[int]]) -> list[Any]:
        raise InputError(f"{self.name} reads one token per word: no corrected word probabilities", "--word-prob")
