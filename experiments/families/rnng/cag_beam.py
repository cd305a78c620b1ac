"""Word-synchronous beam search over a CAG, as osekilab/CAG's ``word_sync_beam_search`` runs it.

The official CAG's search is rnng-pytorch's (the same steps, valid actions and word-beam rules; only the stack
cell differs), so this is the RNNG family's ``RNNGBeamScorer`` over the CAG network, with the one bound the
stack decoder adds: its position embeddings number ``model.stack_size`` elements, so ``SHIFT`` and ``NT(X)``
need ``top < stack_size`` (the official search, whose stack is 100 rounded up to 104, would index past its
position table there instead), and a sentence of n words needs n + 1 <= stack_size (its flattest parse:
the root over every word).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor

from experiments.evaluate.scorer import SentenceScore
from experiments.families.rnng.beam import Hypotheses, RNNGBeamScorer
from experiments.families.rnng.cag_methods import BEAM
from experiments.families.rnng.cag_scorers import CAGModel
from lightning_modules.data.tree import Tree
from lightning_modules.errors import InputError
from lightning_modules.families.rnng.model import SHIFT_ID


class CAGBeamScorer(RNNGBeamScorer):
    """log p(x) bounded by the word-synchronous beam's finished parses (``RNNGBeamScorer``) over a CAG."""

    def __init__(self, model: CAGModel, beam: int = BEAM.options["beam"], word_beam: int = BEAM.options["word_beam"],
                 fast_track: int = BEAM.options["fast_track"], batch_size: int = 8):
        super().__init__(model, beam, word_beam, fast_track, batch_size)  # the CAG README's widths by default

    def batches(self, sentences: Sequence[Sequence[str]]) -> list[list[tuple[SentenceScore, list[Tree]]]]:
        """The RNNG's batches, after checking every sentence fits the fixed stack (located by its index)."""
        limit = self.model.module.config.stack_size
        for k, words in enumerate(sentences):
            if len(words) + 1 > limit:
                raise InputError(f"a sentence of {len(words)} words does not fit the CAG's fixed stack of {limit} "
                                 "elements (model.stack_size)", f"sentence {k}")
        return super().batches(sentences)

    def valid_actions(self, hyps: Hypotheses, n: Tensor, limit: Tensor, max_actions: Tensor, count: int) -> Tensor:
        """The official valid actions, pushes only below ``model.stack_size`` (module doc)."""
        valid = super().valid_actions(hyps, n, limit, max_actions, count)
        c = self.model.module.config
        kinds = torch.arange(count, device=valid.device)
        pushes = (kinds == SHIFT_ID) | (kinds >= c.nt_begin)
        return valid & ((hyps.stack.top < c.stack_size)[:, None] | ~pushes[None])
