"""Composition Attention Grammars (Yoshida & Oseki, Findings of EMNLP 2022; osekilab/CAG): the family adapter.

A joint model p(x, y) over top-down actions (``lightning_modules/families/rnng/cag_model.py``): the batched
fixed-stack RNNG with self-attention over the composed stack in place of the stack LSTM, so it lives in the RNNG
family's folders (as TXL (trees) in TG's). Training data, the final validation perplexities, the gold and
proposal scorers are the RNNG's; the default method is the official word-synchronous beam (``cag_beam.py``) at
the official README's widths.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from experiments.families import register
from experiments.families.adapter import Inspection, Method, ParseView, Scoring, ScoringRequest
from experiments.families.rnng.cag_methods import BEAM, GOLD, PROPOSALS
from experiments.families.rnng.family import RNNGFamily


@register
class CAGFamily(RNNGFamily):
    """The batched fixed-stack CAG (Yoshida & Oseki 2022)."""

    names = ("cag",)

    def methods(self, config: dict[str, Any] | None = None) -> tuple[Method, ...]:
        return BEAM, PROPOSALS, GOLD

    def build_data(self, cfg: dict[str, Any]) -> Any:
        from lightning_modules.families.rnng.cag_data import build

        return build(cfg)

    def load(self, checkpoint: str | Path, device: str = "cpu") -> Any:
        from experiments.families.rnng.cag_scorers import CAGModel

        return CAGModel.load(str(checkpoint), device)

    def scoring(self, checkpoint: str | Path, meta: dict[str, Any], request: ScoringRequest) -> Scoring:
        """The beam over the CAG (``beam.py``); gold trees and proposals as the RNNG family scores them."""
        if request.method != "beam":
            return super().scoring(checkpoint, meta, request)
        from experiments.families.rnng.cag_beam import CAGBeamScorer

        o = request.options
        return Scoring(CAGBeamScorer(self.load(checkpoint, request.device), o["beam"], o["word_beam"],
                                     o["fast_track"]),
                       {"beam": o["beam"], "word_beam": o["word_beam"], "fast_track": o["fast_track"]},
                       f"word-synchronous beam {o['beam']}/{o['word_beam']}, shift size {o['fast_track']} "
                       "(osekilab/CAG's beam_search.py)", 8)

    def parse_view(self, config: dict[str, Any] | None = None) -> ParseView:
        """``eval parse``: the beam's best parse against the gold tree, EVALB labelled (``parsing.py``)."""
        from experiments.families.rnng.cag_parsing import VIEW

        return VIEW

    def inspection(self) -> Inspection | None:
        return None  # the actions are the RNNG's top-down ones: ``synbench inspect rnng``

    def network(self) -> tuple[type, Any]:
        from lightning_modules.families.rnng.cag_model import CAG, config_from_dict

        return CAG, config_from_dict
