"""Pushdown-LM and its Base-LM (Murty et al. 2023, §3–§4): the family adapter.

``pushdown`` is a joint model (attachment decisions) scored by its word-synchronous beam over attachments,
``base-lm`` the same network with plain attention, a string model scored exactly. Runs on the Dyck corpus
(§4.1) are evaluated by closing-bracket accuracy (``eval dyck``); runs on text by perplexity, SyntaxGym and
BLiMP, and Pushdown-LM runs also by parsing (§5).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from experiments.evaluate.word_prob import WORD_PROBS, describe, method_options
from experiments.families import register
from experiments.families.adapter import Family, Importing, Inspection, Method, ParseView, Scoring, ScoringRequest
from experiments.families.pushdown.methods import BEAM, GOLD
from lightning_modules.errors import InputError


def on_dyck(config: dict[str, Any] | None) -> bool:
    """A run on the Dyck corpus (§4.1): evaluated by closing-bracket accuracy only."""
    return config is not None and config.get("data", {}).get("corpus") == "dyck"


@register
class PushdownFamily(Family):
    """Pushdown-LM and its Base-LM (Murty et al. 2023): sentences with attachment labels and stack tapes."""

    names = ("pushdown", "base-lm")
    stacks_seeds = True

    def kind(self, config: dict[str, Any] | None = None) -> str:
        return "joint" if self.name == "pushdown" else "string"

    def methods(self, config: dict[str, Any] | None = None) -> tuple[Method, ...]:
        if on_dyck(config):
            return ()
        if self.name == "pushdown":
            return Method(BEAM.name, {**BEAM.options, **method_options(config)}), GOLD
        return (Method("exact", method_options(config)),)

    # -- training ------------------------------------------------------------------------------------------
    def build_data(self, cfg: dict[str, Any]) -> Any:
        from lightning_modules.families.pushdown import data as pushdown_data

        return pushdown_data.build(self.name, cfg)

    def build_module(self, cfg: dict[str, Any], data: Any) -> Any:
        from lightning_modules.families.pushdown.model import build

        if cfg["model"].get("sentence_end", "eos") != "eos":
            raise InputError("the official sentence end is a scoring convention of imported checkpoints (synbench "
                             "import); training reads sentences ending with <eos>", "model.sentence_end")
        return build({**cfg["model"], "vocab_size": data.vocab_size}, family=self.name)

    def final_metrics(self, module: Any, data: Any, best_path: str) -> dict[str, Any]:
        """Validation NLL of the best checkpoint: LM per token and word, attachments, and for ``pushdown``
        the gold-tree joint bound; beside a unigram baseline. (Beam-marginal perplexity is an evaluator's.)"""
        import torch

        from lightning_modules.data.train_data import unigram_nll

        if best_path:
            module.load_state_dict(torch.load(best_path, map_location="cpu", weights_only=True)["state_dict"])
        module.eval()
        sums = {"lm_nll": 0.0, "lm_count": 0, "attachment_nll": 0.0, "attachment_count": 0,
                "attachment_correct": 0}
        with torch.no_grad():
            for batch in data.valid_batches(32):
                terms = module.loss_terms(batch.to(module.device))
                for key in sums:
                    sums[key] += type(sums[key])(terms[key])
        tokens, words = max(sums["lm_count"], 1), max(data.valid_words, 1)
        attachments = max(sums["attachment_count"], 1)
        unigram = unigram_nll([(s, None) for s in data.train], [(s, None) for s in data.valid], data.vocab_size)
        out = {
            "val_tokens": sums["lm_count"],
            "val_words": data.valid_words,
            "val_token_nll": sums["lm_nll"] / tokens,
            "val_token_ppl": math.exp(sums["lm_nll"] / tokens),
            "unigram_val_token_ppl": math.exp(unigram / tokens),
            "unigram_val_word_ppl": math.exp(unigram / words),
        }
        if self.name == "pushdown":
            joint = sums["lm_nll"] + sums["attachment_nll"]
            # -log p(x, y_gold) >= -log p(x): an upper bound on word perplexity
            out["val_word_ppl"] = math.exp(joint / words)
            out["val_word_ppl_convention"] = "gold-tree bound exp(-log p(x, y_gold) / words), <eos> predicted"
        else:
            out["val_word_ppl"] = math.exp(sums["lm_nll"] / words)
            out["val_word_ppl_convention"] = "exact, <eos> predicted, denominator = words"
        if sums["attachment_count"]:
            out["val_attachment_nll"] = sums["attachment_nll"] / attachments
            out["val_attachment_accuracy"] = sums["attachment_correct"] / attachments
        out.update(data.stats)
        return out

    # -- checkpoints and scoring ---------------------------------------------------------------------------
    def load(self, checkpoint: str | Path, device: str = "cpu") -> Any:
        from experiments.families.pushdown.scorers import PushdownModel

        return PushdownModel.load(str(checkpoint), device)

    def scoring(self, checkpoint: str | Path, meta: dict[str, Any], request: ScoringRequest) -> Scoring:
        """Pushdown-LM: beam search over attachments (its only marginalisation), or its gold trees; Base-LM:
        exact."""
        from experiments.families.pushdown import scorers

        if request.proposals is not None:
            raise InputError("Pushdown-family models are marginalised by beam search: --proposals/--parser do "
                             "not apply", str(checkpoint))
        model = self.load(checkpoint, request.device)
        if self.name == "pushdown" and request.method == "gold":
            if request.gold is None:
                raise InputError("--method gold needs gold trees: evaluate a treebank corpus (eval ppl)", "--method")
            gold = scorers.GoldScorer(model, request.gold, request.batch_size)
            official = gold.sentence_end != "eos"
            return Scoring(gold, {"sentence_end": gold.sentence_end} if official else {},
                           "gold trees, log p(x, y_gold)" + (", official sentence end" if official else ""), 4)
        word_prob = request.options.get("word_prob", WORD_PROBS[0])
        corrected = {} if word_prob == WORD_PROBS[0] else {"word_prob": word_prob}
        if self.name == "pushdown":
            beam = request.options["beam"]
            # imported checkpoints (model.sentence_end: official): the official eval_beam's sentence end
            end = (", official sentence end" if model.config.get("model", {}).get("sentence_end", "eos") != "eos"
                   else "")
            return Scoring(scorers.BeamScorer(model, beam, word_prob), {"beam": beam, **corrected},
                           f"beam {beam} over attachment decisions (paper: {BEAM.options['beam']})"
                           + (f", {describe(word_prob)}" if corrected else "") + end, 4)
        if not corrected:
            return Scoring(scorers.ExactScorer(model), {}, "exact", 4)
        return Scoring(scorers.ExactScorer(model, word_prob), corrected, f"exact, {describe(word_prob)}", 4)

    def parse_view(self, config: dict[str, Any] | None = None) -> ParseView | None:
        if self.name != "pushdown" or on_dyck(config):
            return None
        from experiments.families.pushdown.parsing import VIEW

        return VIEW

    def importing(self) -> Importing:
        """``synbench import``: ``model.pt`` + ``vocab.pkl`` of the official code (``official``)."""
        from functools import partial

        from experiments.families.pushdown import official

        return Importing(official.OFFICIAL, partial(official.convert, self.name), needs_vocab=True,
                         takes_tokenizer=True)

    # -- inspect, model-info, dyck -------------------------------------------------------------------------
    def inspection(self) -> Inspection:
        return Inspection(("pushdown",), _inspect)

    def model_info(self, config: dict[str, Any], prefix: str) -> dict[str, Any]:
        import torch

        from lightning_modules.families.pushdown import model as pushdown

        cfg = pushdown.config_from_dict(config, prefix=prefix, family=self.name)
        with torch.device("meta"):
            module = pushdown.build(cfg, self.name)
        return {"parameters": pushdown.parameter_count(module), "parts": pushdown.parameter_breakdown(module),
                "config": pushdown.asdict(cfg)}

    def evaluations(self, config: dict[str, Any] | None = None) -> Mapping[str, Any]:
        """``dyck``: closing-bracket accuracy (§4.1), for runs on the Dyck corpus (and the family in general)."""
        return {"dyck": _dyck} if config is None or on_dyck(config) else {}


def _inspect(name: str, item: Any, options: Mapping[str, Any]) -> dict[str, Any]:
    """``{"tokens", "attachment", "stack_tape"}`` as the official code computes them (DESIGN.md)."""
    from lightning_modules.data.tree import clean
    from lightning_modules.families.pushdown import encoding as pushdown

    example = pushdown.encode(clean(item))
    return {"tokens": example.tokens, "attachment": example.attachment.tolist(),
            "stack_tape": example.stack_tape().tolist()}


def _dyck(options: Mapping[str, Any]) -> tuple[dict[str, Any], int, int]:
    from experiments.families.pushdown import dyck

    o = options
    result, computed = dyck.evaluate(o["checkpoint"], o["sets"], o["size"], o["beam"], o["seed"], o.get("out"),
                                     o["tape"], o.get("device", "cpu"))
    return result, computed, result["settings"]["prefixes"]
