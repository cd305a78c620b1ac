"""Dependency Transformer Grammars (Zhao et al. 2024) and their Transformer-XL (trans) baseline: the adapter.

``dtg`` generates a sentence with its projective dependency tree as a generative arc-standard, arc-eager or
arc-swift transition sequence (``model.system``), with STACK/COMPOSE attention; ``txl-trans`` is a
Transformer-XL over the same (undoubled) transitions with causal attention and linear relative positions.
Both are joint models p(x, y). Training reads dependency corpora (UD, or ``NAME-dep`` for a constituency
corpus converted by head rules). A loaded checkpoint scores given dependency trees and their marginal
(``scorers.DTGModel`` with ``TreeScorer``): ``eval ppl --method gold`` gives the gold-tree bound on a
dependency corpus; ``--method proposals --parser CKPT`` marginalises over N distinct trees per sentence drawn
without replacement from a ``dep-parser`` checkpoint (``DepParserFamily`` below, ``proposals.py``).
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


def dependency_presets(presets: dict[str, Any]) -> dict[str, Any]:
    """The shared loop and runtime presets (``configs/train.yaml``) with the dependency data of DATA_PRESETS."""
    return {name: ({**value, "data": dict(DATA_PRESETS[name])} if name in DATA_PRESETS else value)
            for name, value in presets.items() if name in DATA_PRESETS or name == "runtime"}


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
        return frozenset({"perplexity", "score", "surprisal", "dependency_parse"})

    def methods(self, config: dict[str, Any] | None = None) -> tuple[str, ...]:
        return ("beam", "proposals", "gold")

    def method_options(self, method: str) -> tuple[str, ...]:
        return {"beam": ("beam", "word_beam", "max_actions", "fast_track"), "proposals": ("n",)}.get(method, ())

    # -- training ------------------------------------------------------------------------------------------
    def train_presets(self) -> dict[str, Any]:
        return dependency_presets(super().train_presets())

    def build_data(self, cfg: dict[str, Any]) -> Any:
        from lightning_modules.families.dtg import data as dtg_data

        return dtg_data.build(self.name, cfg)

    def build_module(self, cfg: dict[str, Any], data: Any) -> Any:
        from lightning_modules.families.dtg.model import build

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
        """``beam``: the word-synchronous beam over the system's transitions (``beam.py``; SG, BLiMP);
        ``proposals``: log of the summed p(x, y) over N distinct proposal trees (``--parser`` a dep-parser
        checkpoint, DTG §4), a lower bound on log p(x); ``gold``: log p(x, y_gold) of the corpus's dependency
        trees (non-projective ones lifted), a bound."""
        from experiments.evaluate.scorers.tree_marginal import TreeScorer

        if request.method == "beam":
            from experiments.families.dtg.beam import DTGBeamScorer

            scorer = DTGBeamScorer(self.load(checkpoint, request.device), request.beam, request.word_beam,
                                   request.max_actions, request.fast_track)
            identity: dict[str, Any] = {"beam": request.beam, "word_beam": request.word_beam,
                                        "max_actions": request.max_actions}
            track = ""
            if request.fast_track is not None:
                identity["fast_track"] = request.fast_track
                track = f", fast-track {request.fast_track}"
            return Scoring(scorer, identity, f"beam {request.beam}/{request.word_beam}{track}, <= "
                           f"{request.max_actions} actions per word (paper: 100/10, fast-track 0, <= 15)", 8)
        if request.method == "proposals":
            if request.proposals is None:
                raise InputError("--method proposals needs --parser CKPT (a dep-parser checkpoint)", "--method")
            model = self.load(checkpoint, request.device)
            scorer = TreeScorer(model, model.known_trees(request.proposals), method="proposals",
                                n=request.n, batch_size=request.batch_size, source_name=request.source_name)
            return Scoring(scorer, {"n_proposals": request.n},
                           f"N = {request.n} proposals from {request.source_name} (paper: 300 from a biaffine parser)")
        if request.gold is None:
            raise InputError("--method gold needs the gold trees of a corpus (eval ppl)", "--method")
        scorer = TreeScorer(self.load(checkpoint, request.device), request.gold, method="gold",
                            batch_size=request.batch_size,
                            source_name=request.source_name or "gold dependency trees of the corpus")
        return Scoring(scorer, {}, "gold dependency trees (non-projective ones lifted), log p(x, y_gold)")

    def evaluate(self, task: str, args: argparse.Namespace) -> tuple[dict[str, Any], int, int]:
        """``dependency_parse``: UAS by reranking dependency proposals (``rerank.py``, DTG Table 3)."""
        if task != "dependency_parse":
            return super().evaluate(task, args)
        from experiments.families.dtg.rerank import evaluate

        return evaluate(self.load(args.checkpoint, args.device), args)

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

        from lightning_modules.families.dtg import model as dtg
        from lightning_modules.models import txl_lm as tg

        cfg = dtg.config_from_dict(config, prefix=prefix)
        with torch.device("meta"):
            module = dtg.build(cfg)
        return {"parameters": tg.parameter_count(module), "parts": tg.parameter_breakdown(module),
                "config": asdict(cfg)}


@register
class DepParserFamily(Family):
    """The dependency proposal parser q(y | x): the seq2seq parser network writing canonical arc-standard
    actions (``families/parser/dep_encoding.py``); a tool that draws DTG's proposal trees (``proposals.py``)."""

    names = ("dep-parser",)

    def kind(self, config: dict[str, Any] | None = None) -> str:
        return "tool"

    def capabilities(self, config: dict[str, Any] | None = None) -> frozenset[str]:
        return frozenset({"propose"})

    def train_presets(self) -> dict[str, Any]:
        return dependency_presets(super().train_presets())

    def build_data(self, cfg: dict[str, Any]) -> Any:
        from lightning_modules.families.parser import dep_data as dep_parser_data

        return dep_parser_data.build(cfg)

    def build_module(self, cfg: dict[str, Any], data: Any) -> Any:
        from lightning_modules.families.parser.model import build

        return build({**cfg["model"], "source_vocab_size": data.stats["source_vocab_size"],
                      "action_vocab_size": data.vocab_size})

    def final_metrics(self, module: Any, data: Any, best_path: str) -> dict[str, Any]:
        """Validation action NLL and accuracy (teacher forcing) and the UAS of greedy parses (gold PUNCT
        words not scored, ``experiments.evaluate.uas``)."""
        from experiments.evaluate.uas import attachment_counts
        from experiments.families.parser import action_metrics
        from experiments.families.parser.dep_proposals import propose

        out = action_metrics(module, data, best_path)
        parses = propose(module, data.vocab, [list(t.forms) for t in data.valid_trees], n=1, method="beam",
                         max_rows=64)
        words, heads = attachment_counts(data.valid_trees, [p.heads[0] for p in parses])
        out.update(val_greedy_uas=100.0 * heads / max(words, 1),
                   val_greedy_uas_convention="greedy parses, words whose gold UPOS is not PUNCT")
        out.update(data.stats)
        return out

    def load(self, checkpoint: str | Path, device: str = "cpu") -> Any:
        """(parser network in eval mode, vocabulary payload)."""
        from experiments.families.parser.dep_proposals import load_parser

        return load_parser(checkpoint)

    def proposer(self, checkpoint: str | Path) -> Any:
        from experiments.families.parser.dep_proposals import propose

        model, payload = self.load(checkpoint)
        return lambda sentences, n, seed: [p.trees() for p in propose(model, payload, sentences, n, "sample", seed)]

    def write_proposals(self, args: argparse.Namespace) -> str:
        from experiments.families.parser.dep_proposals import write_from_args

        return write_from_args(args)
