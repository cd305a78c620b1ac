"""Transformer Grammars and their Transformer-XL baselines (TG §2–§3): the family adapter.

``tg`` and ``txl-trees`` are joint models p(x, y) over Choe–Charniak action sequences (TG with the
STACK/COMPOSE mask and duplicated closing nonterminals), ``txl-terminals`` a string model over the words.
Joint models are scored by a word-synchronous beam (``beam``; given proposals too, over the union of the
beam's final trees and the proposals), over proposal trees (``proposals``) or on the gold trees (``gold``);
document-level checkpoints by ``eval ppl`` only, with TG §3.1's greedy prefix.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from experiments.evaluate.word_prob import WORD_PROBS, describe, method_options
from experiments.families import register
from experiments.families.adapter import (
    Family,
    ImportedModel,
    Importing,
    Inspection,
    InspectOption,
    Method,
    Scoring,
    ScoringRequest,
)
from experiments.families.tg.methods import BEAM, GOLD, PAPER_NOTE, PROPOSALS
from lightning_modules.errors import InputError

INSPECT_OPTIONS = (
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


@register
class TGFamily(Family):
    """Transformer Grammars and their Transformer-XL baselines (TG §2–§3)."""

    names = ("tg", "txl-trees", "txl-terminals")
    stacks_seeds = True

    # -- identity ------------------------------------------------------------------------------------------
    def kind(self, config: dict[str, Any] | None = None) -> str:
        return "string" if self.name == "txl-terminals" else "joint"

    def methods(self, config: dict[str, Any] | None = None) -> tuple[Method, ...]:
        word_prob = method_options(config)  # pieces: beam and proposal marginals take --word-prob too
        if self.kind() == "string":
            return (Method("exact", word_prob),)
        if self.level(config) == "document":
            return PROPOSALS, GOLD
        return (*(Method(m.name, {**m.options, **word_prob}, m.trees) for m in (BEAM, PROPOSALS)), GOLD)

    # -- training ------------------------------------------------------------------------------------------
    def build_data(self, cfg: dict[str, Any]) -> Any:
        from lightning_modules.families.tg import data as tg_data

        return tg_data.build(self.name, cfg)

    def build_module(self, cfg: dict[str, Any], data: Any) -> Any:
        from lightning_modules.models.txl_lm import build

        return build({**cfg["model"], "vocab_size": data.vocab_size})

    def final_metrics(self, module: Any, data: Any, best_path: str) -> dict[str, Any]:
        from lightning_modules.models.txl_lm import validation_metrics

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
        o = request.options
        word_prob = o.get("word_prob", WORD_PROBS[0])
        identity: dict[str, Any] = {}
        if method == "exact":
            scorer: Any = scorers.ExactScorer(model, request.batch_size, word_prob)
            description = "exact"
        elif method == "beam":
            scorer = BeamScorer(model, o["beam"], o["word_beam"], o["max_actions"], fast_track=o["fast_track"],
                                word_prob=word_prob)
            identity = {"beam": o["beam"], "word_beam": o["word_beam"], "max_actions": o["max_actions"]}
            track = ""
            if o["fast_track"] is not None:
                identity["fast_track"] = o["fast_track"]
                track = f", fast-track {o['fast_track']}"
            description = (f"beam {o['beam']}/{o['word_beam']}{track}, <= {o['max_actions']} actions per "
                           f"word ({PAPER_NOTE})")
            if request.proposals is not None:  # the union of the beam's final trees and the proposals
                proposals = TreeScorer(model, request.proposals, method="proposals", n=o["n"],
                                       pos_tags=request.pos_tags, batch_size=request.batch_size,
                                       source_name=request.source_name, word_prob=word_prob)
                convention = replace(scorer.convention, n_proposals=o["n"], proposal_source=proposals.convention
                                     .proposal_source, incremental="union-prefixes")
                scorer = UnionScorer(proposals, scorer.final_trees, convention)
                identity["n_proposals"] = o["n"]
                description = (f"union of the beam's trees (beam {o['beam']}/{o['word_beam']}{track}, <= "
                               f"{o['max_actions']} actions per word) and N = {o['n']} proposals from "
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
            scorer = TreeScorer(model, request.proposals, method="proposals", n=o["n"],
                                pos_tags=request.pos_tags, batch_size=request.batch_size,
                                source_name=request.source_name, word_prob=word_prob)
            identity = {"n_proposals": o["n"]}
            description = f"N = {o['n']} proposals from {request.source_name} ({PAPER_NOTE})"
        if word_prob != WORD_PROBS[0]:
            identity["word_prob"] = word_prob
            description += f", {describe(word_prob)}"
        if level == "document":
            from experiments.families.tg.document import INCREMENTAL, DocumentScorer

            scorer = DocumentScorer(scorer)
            identity["level"] = "document"
            description = f"{description}, {INCREMENTAL}"
        return Scoring(scorer, identity, description, 8 if method == "beam" else 32, level)

    # -- inspect, model-info, probing, sampling, terminals -------------------------------------------------
    def inspection(self) -> Inspection:
        return Inspection(("tg", "txl"), _inspect, INSPECT_OPTIONS)

    def importing(self) -> Importing:
        """Checkpoints of google-deepmind/transformer_grammars (``lightning_modules/families/tg/official.py``)."""
        from lightning_modules.families.tg.official import OFFICIAL

        family = self.name
        return Importing(OFFICIAL, lambda checkpoint, vocab, tokenizer: import_official(family, checkpoint, vocab),
                         needs_vocab=True)

    def model_info(self, config: dict[str, Any], prefix: str) -> dict[str, Any]:
        import torch

        from lightning_modules.models import txl_lm

        cfg = txl_lm.config_from_dict(config, prefix=prefix)
        with torch.device("meta"):
            module = txl_lm.build(cfg)
        return {"parameters": txl_lm.parameter_count(module), "parts": txl_lm.parameter_breakdown(module),
                "config": txl_lm.asdict(cfg)}

    def probing(self, config: dict[str, Any] | None = None) -> Any:
        def prober(checkpoint: str | Path, device: str = "cpu") -> Any:
            from experiments.families.tg.probing import TGProber

            return TGProber(self.load(checkpoint, device))

        return prober

    def sampling(self, config: dict[str, Any] | None = None) -> Any:
        """Ancestral sampling of well-formed trees (``tg/sample.py``; sentence-level checkpoints)."""
        return None if self.level(config) == "document" else _sample

    def evaluations(self, config: dict[str, Any] | None = None) -> Mapping[str, Any]:
        return {"terminals": _terminals}


def import_official(family: str, checkpoint: Path, vocab: Path | None) -> ImportedModel:
    """An official checkpoint and word-level dictionary as a run of ``family``: the ``ptb`` preset's config
    (word terminals, sentence level) with the converted model section and memory, the vocabularies as a trained
    run records them, and the state_dict of our module (loaded strictly, so every parameter is accounted for).

    The official dictionary is closed (its terminals are the words or the unknown-word classes the data was
    preprocessed with): every terminal is a known word except ``UNK...`` classes, and an ``UNK`` entry is added
    to the word vocabulary (not to the model's) when the dictionary has none.
    """
    import numpy as np
    import torch

    from experiments.config import resolve_train_config
    from lightning_modules.data.vocab import UNK, WordVocab
    from lightning_modules.families.tg.official import convert
    from lightning_modules.models.txl_lm import build

    converted = convert(family, Path(checkpoint), None if vocab is None else Path(vocab))
    config = resolve_train_config(family, "ptb")
    config["model"] = {**config["model"], **converted.model}
    config["data"] = {**config["data"], "terminals": "words", "level": "sentence", "tree_transform": "none",
                      "memory": converted.memory, "min_count": 1}
    module = build(config["model"])
    module.load_state_dict({k: torch.from_numpy(np.asarray(v)) for k, v in converted.state_dict.items()})
    terminals = list(converted.vocab.terminals)
    words = WordVocab([(t, 1) for t in terminals] + ([] if UNK in terminals else [(UNK, 0)]),
                      [t for t in terminals if not t.startswith(UNK) and t != "</s>"], 1)
    payload = {"terminals": "words", "words": words.to_dict(), "actions": converted.vocab.to_json()}
    source = {**converted.source, "file": str(checkpoint), "vocab_file": str(vocab),
              "closed_vocabulary": UNK not in terminals}
    return ImportedModel(config=config, vocab=payload, state_dict=module.state_dict(), source=source)


def _inspect(name: str, tree: Any, options: Mapping[str, Any]) -> dict[str, Any]:
    """``synbench inspect tg|txl``: the encoding of ``tree`` as DESIGN.md's contract states it."""
    from experiments.families.tg.inspect import inspect_options, inspect_tree

    return inspect_tree(tree, name, **inspect_options(name, options))


def _sample(checkpoint: str | Path, n: int, seed: int = 0, temperature: float = 1.0,
            max_length: int = 200) -> list[Any]:
    from experiments.families.tg.sample import sample

    return sample(str(checkpoint), n, seed, temperature, max_length)


def _terminals(options: Mapping[str, Any]) -> tuple[dict[str, Any], int, int]:
    """``eval terminals``: teacher-forced log-probabilities of every terminal (TG §4.2)."""
    from experiments.evaluate import ppl
    from experiments.families.tg import terminals

    sentences = ppl.read_sentences(options["corpus"], options["split"], options.get("limit"),
                                   options.get("data_dir"), trees=True)
    result, computed = terminals.evaluate(options["checkpoint"], sentences, options.get("out"),
                                          options.get("data_dir"), options.get("device", "cpu"))
    return result, computed, result["metrics"]["items"]
