"""Dependency Transformer Grammars (Zhao et al. 2024) and their Transformer-XL (trans) baseline: the adapter.

``dtg`` generates a sentence with its projective dependency tree as a generative arc-standard, arc-eager or
arc-swift transition sequence (``model.system``), with STACK/COMPOSE attention; ``txl-trans`` is a
Transformer-XL over the same (undoubled) transitions with causal attention and linear relative positions.
Both are joint models p(x, y). Training reads dependency corpora (UD, or ``NAME-dep`` for a constituency
corpus converted by head rules). A loaded checkpoint scores given dependency trees and their marginal
(``scorers.DTGModel`` with ``TreeScorer``): ``eval ppl --method gold`` gives the gold-tree bound on a
dependency corpus. Dependency proposals (the paper's 300 trees per sentence), the word-synchronous beam (SG,
BLiMP) and UAS reranking are not built yet.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from experiments.families import register
from experiments.families.adapter import Family, InspectOption, Scoring, ScoringRequest
from lightning_modules.errors import InputError

# data presets (the model and loop come from configs/model/FAMILY.yaml and configs/train.yaml)
DATA_PRESETS = {
    "cpu-small": {"corpus": "ud-ewt", "train_split": "train", "valid_split": "dev", "min_count": 2},
    # the paper has no PTB setting; the PTB sample converted with the Collins head table, for comparisons with
    # the constituency families on the same sentences
    "ptb": {"corpus": "ptb-sample-dep", "train_split": "train", "valid_split": "valid", "min_count": 2},
    # BLLIP-LG (register it: synbench prepare --treebank bllip-lg=PATH) converted by the Collins head table; the
    # paper parsed it with a biaffine parser, the official scripts with Stanford basic dependencies
    "bllip": {"corpus": "bllip-lg-dep", "train_split": "train", "valid_split": "valid", "min_count": 2},
}


@register
class DTGFamily(Family):
    """Dependency Transformer Grammars (Zhao et al. 2024): generative transition sequences over CoNLL-U trees."""

    names = ("dtg", "txl-trans")
    inspect_names = ("dtg",)
    inspect_options = (
        InspectOption("--system", {"choices": ("standard", "eager", "swift"),
                                   "help": "dtg: transition system (default: standard, the official code's)"}),
    )
    inspect_one_input_per_file = True

    def kind(self, config: dict[str, Any] | None = None) -> str:
        return "joint"

    def capabilities(self, config: dict[str, Any] | None = None) -> frozenset[str]:
        return frozenset({"perplexity"})

    def methods(self, config: dict[str, Any] | None = None) -> tuple[str, ...]:
        return ("gold",)

    # -- training ------------------------------------------------------------------------------------------
    def train_presets(self) -> dict[str, Any]:
        """The shared loop and runtime presets (``configs/train.yaml``) with DTG's dependency data."""
        presets = super().train_presets()
        return {name: ({**value, "data": dict(DATA_PRESETS[name])} if name in DATA_PRESETS else value)
                for name, value in presets.items() if name in DATA_PRESETS or name == "runtime"}

    def build_data(self, cfg: dict[str, Any]) -> Any:
        from lightning_modules.data import dtg_data

        return dtg_data.build(self.name, cfg)

    def build_module(self, cfg: dict[str, Any], data: Any) -> Any:
        from lightning_modules.models.dtg import build

        return build({**cfg["model"], "vocab_size": data.vocab_size})

    def final_metrics(self, module: Any, data: Any, best_path: str) -> dict[str, Any]:
        from experiments.families.tg import validation_metrics

        return validation_metrics(self.kind(), module, data, best_path)

    # -- checkpoints and scoring ---------------------------------------------------------------------------
    def load(self, checkpoint: str | Path, device: str = "cpu") -> Any:
        """A ``DTGModel``: the network with its vocabularies, scoring given dependency trees (TreeModel)."""
        from experiments.families.dtg.scorers import DTGModel

        return DTGModel.load(str(checkpoint), device)

    def scoring(self, checkpoint: str | Path, meta: dict[str, Any], request: ScoringRequest) -> Scoring:
        """``gold``: log p(x, y_gold) of the corpus's dependency trees (non-projective ones lifted), a bound."""
        from experiments.evaluate.scorers.tree_marginal import TreeScorer

        if request.gold is None:
            raise InputError("--method gold needs the gold trees of a corpus (eval ppl)", "--method")
        scorer = TreeScorer(self.load(checkpoint, request.device), request.gold, method="gold",
                            batch_size=request.batch_size,
                            source_name=request.source_name or "gold dependency trees of the corpus")
        return Scoring(scorer, {}, "gold dependency trees (non-projective ones lifted), log p(x, y_gold)")

    # -- inspect, model size -------------------------------------------------------------------------------
    def inspect_sources(self, args: argparse.Namespace) -> list[tuple[str, Any]]:
        from experiments.families.dtg.inspect import read_sources

        return read_sources(args)

    def inspect(self, name: str, item: Any, args: argparse.Namespace) -> dict[str, Any]:
        from experiments.families.dtg.inspect import inspect_sentence

        return inspect_sentence(item, args.system or "standard")

    def model_info(self, config: dict[str, Any], prefix: str) -> dict[str, Any]:
        from dataclasses import asdict

        import torch

        from lightning_modules.models import dtg, tg

        cfg = dtg.config_from_dict(config, prefix=prefix)
        with torch.device("meta"):
            module = dtg.build(cfg)
        return {"parameters": tg.parameter_count(module), "parts": tg.parameter_breakdown(module),
                "config": asdict(cfg)}
