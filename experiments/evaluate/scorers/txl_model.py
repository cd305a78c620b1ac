"""A loaded Transformer-XL core network with its vocabularies, scoring encoded sequences.

``TXLModel`` is what every family built on the shared TXL LightningModule (``lightning_modules/models/
txl_lm.py``: Transformer Grammars, their Transformer-XL baselines, the Dependency TG) has in common once a
checkpoint is loaded: the module in eval mode on a device, the checkpoint's config and action vocabulary, the
one loader of such checkpoints, and one forward pass over a batch of encoded sequences giving each example's
label log-probs or its distributions at chosen positions; for groups of sequences that share prefixes (a
sentence's proposal trees), one forward over their tries (``grouped_label_logprobs``, ``trie``), the shared
prefixes computed once. A family's subclass (in its own folder) names the
checkpoints it loads and their network builder (``network``), cuts its examples into the chunks the network
reads (``chunks``) and adds its words -> sequences view (the tree-marginal protocol,
``tree_marginal.TreeModel``, for joint models).

All numbers are natural logs; label log-probs are float64, computed from float32 logits.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from typing import Any, Self

import numpy as np
import torch

from experiments.evaluate.scorers import trie
from experiments.evaluate.scorers.label_logprobs import per_example, picked_logprobs
from lightning_modules.data.encodings.choe_charniak import EOS, ActionVocab, TokenType
from lightning_modules.data.sentencepiece import BOUNDARY


class TXLModel(ABC):
    """A Transformer-XL core network with its vocabularies, scoring encoded sequences (module docstring).

    Attributes every subclass has: ``module`` (eval mode, on ``device``), ``family`` (the checkpoint's), ``vocab``
    (its ``ActionVocab``), ``vocab_kind`` (its terminals: ``words`` or ``sentencepiece``), ``config`` (the
    checkpoint's whole config) and ``length`` (the segment length L).
    """

    def __init__(self, module: Any, meta: dict[str, Any], vocab: ActionVocab, device: str = "cpu"):
        self.module = module.to(device).eval()
        self.device = torch.device(device)
        self.family: str = meta["family"]
        self.vocab = vocab
        self.vocab_kind: str = meta["vocab"].get("terminals", "words")  # words | sentencepiece
        self.config: dict[str, Any] = meta["config"]
        self.length = int(self.config["model"]["segment_length"])
        self.seed_stack: tuple[Any, int] | None = None  # (StackedScorer, this seed's index): ``stacked``
        self.trie_stats: trie.TrieStats | None = None  # counts what ``grouped_label_logprobs`` shares
        self.trie_max_nodes = trie.DEFAULT_MAX_NODES  # its longest packed row
        self.trie_max_length = trie.DEFAULT_MAX_LENGTH  # a group with a longer sequence is scored alone

    @staticmethod
    @abstractmethod
    def network() -> tuple[tuple[str, ...], Callable[[dict[str, Any]], Any]]:
        """The families this class loads and the builder of their network (from a flat model config)."""

    @classmethod
    def load(cls, checkpoint: str, device: str = "cpu") -> Self:
        """The one loader of these checkpoints (module in eval mode, config, vocabularies): an instance of
        ``cls``; the checkpoint's family must be one of ``network()``'s. In an eval group with stacked scoring
        its label log-probs come from its seed stack (``stacked``)."""
        from experiments.evaluate.scorers import stacked

        model = cls.load_solo(checkpoint, device)
        stacked.attach(model, checkpoint, device)
        return model

    @classmethod
    def load_solo(cls, checkpoint: str, device: str = "cpu") -> Self:
        """``load`` without a seed stack."""
        from experiments.checkpoints import read_checkpoint

        families, build = cls.network()
        ckpt = read_checkpoint(checkpoint, families)
        meta = ckpt["synbench"]
        vocab = ActionVocab.from_json(meta["vocab"]["actions"])
        module = build({**meta["config"]["model"], "vocab_size": len(vocab)})
        module.load_state_dict(ckpt["state_dict"])
        return cls(module, meta, vocab, device)

    @property
    def name(self) -> str:
        return self.family

    @abstractmethod
    def chunks(self, examples: Sequence[Any]) -> list[Any]:
        """The chunks one forward pass reads for ``examples`` (batch row b = example b; chunks of L positions,
        each example's positions in order across them), on the model's device."""

    def _forward(self, examples: Sequence[Any]) -> tuple[list[torch.Tensor], list[Any]]:
        """One forward pass over ``examples``: logits per chunk, and the chunks."""
        chunks = self.chunks(examples)
        logits, _ = self.module(chunks)
        return logits, chunks

    @torch.no_grad()
    def label_logprobs(self, examples: Sequence[Any]) -> list[np.ndarray]:
        """Each example's label log-probs in one pass (float64; entry j = log p(token j+1 | tokens <= j),
        0 where nothing is predicted)."""
        if self.seed_stack is not None:
            stack, index = self.seed_stack
            return stack.label_logprobs(index, examples, lambda: self.chunks(examples))
        logits, chunks = self._forward(examples)
        return per_example(picked_logprobs(logits, chunks), examples)

    def segmentation(self, example: Any) -> Any:
        """How ``chunks`` segments ``example`` (a ``Segmentation``), or None when this model's chunks do not
        follow one: then ``grouped_label_logprobs`` scores every example alone."""
        return None

    @torch.no_grad()
    def grouped_label_logprobs(self, groups: Sequence[Sequence[Any]]) -> list[list[np.ndarray]]:
        """``label_logprobs`` of each group's examples (groups: the candidates of one sentence), their shared
        prefixes computed once: one forward over the groups' tries (``trie``, rows of at most ``trie_max_nodes``).
        A seed stack, or a model without a ``segmentation``, scores the examples as ``label_logprobs``; so does a
        group with a sequence longer than ``trie_max_length`` (a packed row is attended densely: its cost grows
        with its square)."""
        first = next((e for g in groups for e in g), None)
        tries = self.seed_stack is None and first is not None and self.segmentation(first) is not None
        shared = [tries and all(len(e) <= self.trie_max_length for e in g) for g in groups]
        alone = [e for g, s in zip(groups, shared) if not s for e in g]
        together = [g for g, s in zip(groups, shared) if s]
        alone_lps = iter(self.label_logprobs(alone) if alone else [])
        together_lps = iter(trie.trie_label_logprobs(
            together, self.segmentation, lambda chunk: self.module([chunk])[0][0], self.module.network.memory_length,
            self.device, self.trie_max_nodes, self.trie_stats) if together else [])
        return [next(together_lps) if s else [next(alone_lps) for _ in g] for g, s in zip(groups, shared)]

    def word_boundary_ids(self) -> list[int] | None:
        """B of corrected word probabilities (``tree_marginal``): every structure token (``ONT``/``CNT``), the
        pieces that begin a word (``▁``) and ``</s>``; None when the checkpoint reads words, not pieces."""
        if self.vocab_kind != "sentencepiece":
            return None
        types = self.vocab.token_types(np.arange(len(self.vocab)))
        return [i for i, (token, kind) in enumerate(zip(self.vocab.tokens, types))
                if kind in (TokenType.ONT, TokenType.CNT) or token.startswith(BOUNDARY) or token == EOS]

    @torch.no_grad()
    def distributions(self, examples: Sequence[Any], positions: Sequence[Sequence[int]]) -> list[torch.Tensor]:
        """Log-softmax over the vocabulary at ``positions[b]`` of example b ([len, V] each), in one pass."""
        logits, _ = self._forward(examples)
        length = self.length
        return [torch.stack([logits[p // length][b, p % length] for p in ps]).float().log_softmax(-1).cpu()
                for b, ps in enumerate(positions)]
