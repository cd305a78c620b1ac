"""Transformer Grammars and their Transformer-XL baselines (TG §2–§3): the family adapter.

``tg`` and ``txl-trees`` are joint models p(x, y) over Choe–Charniak action sequences (TG with the
STACK/COMPOSE mask and duplicated closing nonterminals), ``txl-terminals`` a string model over the words.
Joint models are scored by a word-synchronous beam (``beam``; given proposals too, over the union of the
beam's final trees and the proposals), over proposal trees (``proposals``) or on the gold trees (``gold``);
document-level checkpoints by ``eval ppl`` only, with TG §3.1's greedy prefix.
"""

from __future__ import annotations

import argparse
import math
from dataclasses import replace
from pathlib import Path
from typing import Any

from experiments.families import register
from experiments.families.adapter import Family, InspectOption, Scoring, ScoringRequest
from lightning_modules.errors import InputError

PAPER_NOTE = "paper: 300 proposals"


@register
class TGFamily(Family):
    """Transformer Grammars and their Transformer-XL baselines (TG §2–§3)."""

    names = ("tg", "txl-trees", "txl-terminals")
    paper = "tg"
    inspect_names = ("tg", "txl")
    inspect_options = (
        InspectOption("--segment-length", {"type": int, "metavar": "L",
                                           "help": "tg/txl: chunk length L (default: one chunk)"}),
        InspectOption("--memory-length", {"type": int, "metavar": "M",
                                          "help": "tg/txl: memory length; must equal L (default: L)"}),
        InspectOption("--memory", {"choices": ("smart", "plain"),
                                   "help": "tg/txl: memory between chunks (tg default: smart, the paper's; "
                                           "txl: plain only)"}),
        InspectOption("--relpos", {"choices": ("depth", "linear", "none"),
                                   "help": "tg/txl: relative positions (tg default: depth; txl default and only "
                                           "other choice: linear)"}),
        InspectOption("--tree-transform", {"choices": ("none", "left", "right", "reversed"),
                                           "help": "tg: transform the tree before encoding (default: none)"}),
    )

    # -- identity ------------------------------------------------------------------------------------------
    def kind(self, config: dict[str, Any] | None = None) -> str:
        return "string" if self.name == "txl-terminals" else "joint"

    def capabilities(self, config: dict[str, Any] | None = None) -> frozenset[str]:
        if config is not None and self.level(config) == "document":
            return frozenset({"perplexity", "terminals", "probe"})
        sentence = {"perplexity", "score", "surprisal", "terminals", "probe", "sample"}
        return frozenset(sentence | ({"rerank"} if self.kind() == "joint" else set()))

    def methods(self, config: dict[str, Any] | None = None) -> tuple[str, ...]:
        if self.kind() == "string":
            return ("exact",)
        if config is not None and self.level(config) == "document":
            return ("proposals", "gold")
        return ("beam", "proposals", "gold")

    def method_options(self, method: str) -> tuple[str, ...]:
        return {"beam": ("beam", "word_beam", "n"), "proposals": ("n",)}.get(method, ())

    # -- training ------------------------------------------------------------------------------------------
    def build_data(self, cfg: dict[str, Any]) -> Any:
        from lightning_modules.families.tg import data as tg_data

        return tg_data.build(self.name, cfg)

    def build_module(self, cfg: dict[str, Any], data: Any) -> Any:
        from lightning_modules.models.txl_lm import build

        return build({**cfg["model"], "vocab_size": data.vocab_size})

    def final_metrics(self, module: Any, data: Any, best_path: str) -> dict[str, Any]:
        return validation_metrics(self.kind(), module, data, best_path)

    # -- checkpoints and scoring ---------------------------------------------------------------------------
    def load(self, checkpoint: str | Path, device: str = "cpu") -> Any:
        from experiments.families.tg.scorers import TGModel

        return TGModel.load(str(checkpoint), device)

    def scoring(self, checkpoint: str | Path, meta: dict[str, Any], request: ScoringRequest) -> Scoring:
        """Exact (``txl-terminals``), beam, proposals or gold; document-level checkpoints wrapped for ``eval
        ppl`` (TG §3.1's greedy single-path prefix)."""
        from experiments.evaluate.scorers.tree_marginal import TreeScorer, UnionScorer
        from experiments.families.tg import scorers
        from experiments.families.tg.beam import BeamScorer

        method, level = request.method, self.level(meta["config"])
        if level == "document" and not request.documents:
            raise InputError("this evaluation is sentence-level; a document-level checkpoint is evaluated "
                             "with eval ppl only (TG §3.1's greedy single-path prefix)", str(checkpoint))
        if level == "document" and (method == "beam" or (method == "proposals" and request.proposals is None)):
            raise InputError("document-level joint checkpoints are scored with --method gold or --method "
                             "proposals with --proposals FILE or --parser CKPT (the greedy single-path prefix of "
                             "TG §3.1), not beam", "--method")
        model = self.load(checkpoint, request.device)
        identity: dict[str, Any] = {}
        if method == "exact":
            scorer: Any = scorers.ExactScorer(model, request.batch_size)
            description = "exact"
        elif method == "beam":
            scorer = BeamScorer(model, request.beam, request.word_beam, request.max_actions,
                                fast_track=request.fast_track)
            identity = {"beam": request.beam, "word_beam": request.word_beam, "max_actions": request.max_actions}
            track = ""
            if request.fast_track is not None:
                identity["fast_track"] = request.fast_track
                track = f", fast-track {request.fast_track}"
            description = (f"beam {request.beam}/{request.word_beam}{track}, <= {request.max_actions} actions per "
                           f"word ({PAPER_NOTE})")
            if request.proposals is not None:  # the union of the beam's final trees and the proposals
                proposals = TreeScorer(model, request.proposals, method="proposals", n=request.n,
                                       pos_tags=request.pos_tags, batch_size=request.batch_size,
                                       source_name=request.source_name)
                convention = replace(scorer.convention, n_proposals=request.n, proposal_source=proposals.convention
                                     .proposal_source, incremental="union-prefixes")
                scorer = UnionScorer(proposals, scorer.final_trees, convention)
                identity["n_proposals"] = request.n
                description = (f"union of the beam's trees (beam {request.beam}/{request.word_beam}{track}, <= "
                               f"{request.max_actions} actions per word) and N = {request.n} proposals from "
                               f"{request.source_name}")
        elif method == "gold":
            if request.gold is None:
                raise InputError("--method gold needs gold trees: evaluate a treebank corpus (eval ppl)", "--method")
            scorer = TreeScorer(model, request.gold, method="gold", pos_tags=request.pos_tags,
                                batch_size=request.batch_size,
                                source_name=request.source_name or "gold trees of the corpus")
            description = "gold trees, log p(x, y_gold)"
        else:
            if request.proposals is None:
                raise InputError("--method proposals needs --proposals FILE or --parser CKPT", "--method")
            scorer = TreeScorer(model, request.proposals, method="proposals", n=request.n,
                                pos_tags=request.pos_tags, batch_size=request.batch_size,
                                source_name=request.source_name)
            identity = {"n_proposals": request.n}
            description = f"N = {request.n} proposals from {request.source_name} ({PAPER_NOTE})"
        if level == "document":
            from experiments.families.tg.document import INCREMENTAL, DocumentScorer

            scorer = DocumentScorer(scorer)
            identity["level"] = "document"
            description = f"{description}, {INCREMENTAL}"
        return Scoring(scorer, identity, description, 8 if method == "beam" else 32, level)

    # -- inspect, model-info, probing, terminals -----------------------------------------------------------
    def inspect(self, name: str, item: Any, args: argparse.Namespace) -> dict[str, Any]:
        from experiments.families.tg.inspect import inspect_options, inspect_tree

        return inspect_tree(item, name, **inspect_options(name, args))

    def model_info(self, config: dict[str, Any], prefix: str) -> dict[str, Any]:
        import torch

        from lightning_modules.models import txl_lm as tg

        cfg = tg.config_from_dict(config, prefix=prefix)
        with torch.device("meta"):
            module = tg.build(cfg)
        return {"parameters": tg.parameter_count(module), "parts": tg.parameter_breakdown(module),
                "config": tg.asdict(cfg)}

    def prober(self, checkpoint: str | Path, device: str = "cpu") -> Any:
        from experiments.families.tg.probing import TGProber

        return TGProber(self.load(checkpoint, device))

    def evaluate(self, task: str, args: argparse.Namespace) -> tuple[dict[str, Any], int, int]:
        if task != "terminals":
            return super().evaluate(task, args)
        from experiments.evaluate import ppl
        from experiments.families.tg import terminals

        sentences = ppl.read_sentences(args.corpus, args.split, args.limit, args.data_dir, trees=True)
        result, computed = terminals.evaluate(args.checkpoint, sentences, args.out, args.data_dir,
                                              getattr(args, "device", "cpu"))
        return result, computed, result["metrics"]["items"]


def validation_metrics(kind: str, module: Any, data: Any, best_path: str) -> dict[str, Any]:
    """Validation NLL of the best checkpoint per token and per word, beside a unigram baseline (a
    ``TransformerGrammarLM`` or a subclass, on ``TrainData`` whose batches are lists of chunks)."""
    import torch

    from lightning_modules.data.train_data import unigram_nll

    if best_path:
        module.load_state_dict(torch.load(best_path, map_location="cpu", weights_only=True)["state_dict"])
    module.eval()
    total, count = 0.0, 0
    with torch.no_grad():
        for batch in data.valid_batches(32):
            nll, n = module.nll([chunk.to(module.device) for chunk in batch])
            total += float(nll)
            count += int(n)
    unigram = unigram_nll(data.train, data.valid, data.vocab_size)
    words = max(data.valid_words, 1)
    out = {
        "val_tokens": count,
        "val_words": data.valid_words,
        "val_token_nll": total / max(count, 1),
        "val_token_ppl": math.exp(total / max(count, 1)),
        "unigram_val_token_ppl": math.exp(unigram / max(count, 1)),
        # joint models: -log p(x, y_gold) >= -log p(x), so this is an upper bound on word perplexity
        "val_word_ppl": math.exp(total / words),
        "val_word_ppl_convention": (
            "exact, </s> predicted, denominator = words" if kind == "string"
            else "gold-tree bound exp(-log p(x, y_gold) / words)"),
        "unigram_val_word_ppl": math.exp(unigram / words),
    }
    out.update(data.stats)
    return out
