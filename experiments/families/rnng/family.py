"""Recurrent neural network grammars (Dyer et al. 2016) as the batched fixed-stack RNNG of Noji & Oseki
(2021, aistairc/rnng-pytorch): the family adapter.

A joint model p(x, y) over top-down or in-order actions (``model.strategy``;
``lightning_modules/families/rnng``). Scored by the official word-synchronous beam search (``beam``, the
default: ``beam.py``), on the gold trees (``gold``: log p(x, y_gold)) or marginalised over proposal trees
(``proposals``), the last two by the shared tree-marginal scorer (``scorers.py``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from experiments.families import register
from experiments.families.adapter import Family, Inspection, Method, Scoring, ScoringRequest
from experiments.families.rnng.methods import BEAM, GOLD, PROPOSALS
from lightning_modules.errors import InputError


@register
class RNNGFamily(Family):
    """The batched fixed-stack RNNG (Noji & Oseki 2021)."""

    names = ("rnng",)
    # No seed groups (``--seeds``): the stacked form runs a module under ``torch.func.vmap`` over the seeds, and
    # (1) vmap has no batching rule for the stack LSTM's and composition's LSTM cells (``aten::lstm_cell``:
    # "Batching rule not implemented ... could not generate a fallback", tested), (2) the batched fixed-stack
    # step, as the official code's, picks the rows each action applies to (SHIFT, NT, REDUCE) by value, with
    # shapes that depend on each seed's own batch (``nonzero``, the composition's packed lengths), where vmap
    # needs one shape for all seeds. A stacked form would be another algorithm: every operation on every row,
    # masked. Seeds train one per process.
    seed_stack_refusal = ("its LSTM cells have no vmap rule and its fixed-stack step selects rows by action, "
                          "shapes that differ between seeds")

    def kind(self, config: dict[str, Any] | None = None) -> str:
        return "joint"

    def methods(self, config: dict[str, Any] | None = None) -> tuple[Method, ...]:
        return BEAM, PROPOSALS, GOLD

    # -- training ------------------------------------------------------------------------------------------
    def build_data(self, cfg: dict[str, Any]) -> Any:
        from lightning_modules.families.rnng.data import build

        return build(cfg)

    def build_module(self, cfg: dict[str, Any], data: Any) -> Any:
        network, config_from_dict = self.network()
        return network(config_from_dict({**cfg["model"], "vocab_size": data.vocab_size,
                                         "num_nts": len(data.vocab["actions"]["nonterminals"])}))

    def final_metrics(self, module: Any, data: Any, best_path: str) -> dict[str, Any]:
        """The best checkpoint's validation perplexities as the official ``eval_action_ppl`` reports them:
        per action and word together, per action, per word (teacher forcing on the gold trees)."""
        import math

        import torch

        if best_path:
            module.load_state_dict(torch.load(best_path, map_location="cpu", weights_only=True)["state_dict"])
        module.eval()
        sums = {"action_nll": 0.0, "word_nll": 0.0, "actions": 0, "words": 0}
        with torch.no_grad():
            for batch in data.valid_batches(32):
                for key, value in module.loss_terms(batch.to(module.device)).items():
                    if key in sums:
                        sums[key] += float(value)
        actions, words = max(sums["actions"], 1), max(sums["words"], 1)
        return {"val_ppl": math.exp((sums["action_nll"] + sums["word_nll"]) / (actions + words)),
                "val_action_ppl": math.exp(sums["action_nll"] / actions),
                "val_word_ppl": math.exp(sums["word_nll"] / words),
                "val_joint_word_ppl": math.exp((sums["action_nll"] + sums["word_nll"]) / words),
                "val_ppl_convention": "official eval_action_ppl: teacher-forced gold trees, NLL per action + word",
                **data.stats}

    # -- checkpoints and scoring ---------------------------------------------------------------------------
    def load(self, checkpoint: str | Path, device: str = "cpu") -> Any:
        from experiments.families.rnng.scorers import RNNGModel

        return RNNGModel.load(str(checkpoint), device)

    def scoring(self, checkpoint: str | Path, meta: dict[str, Any], request: ScoringRequest) -> Scoring:
        from experiments.evaluate.scorers.tree_marginal import TreeScorer

        model = self.load(checkpoint, request.device)
        if request.method == "beam":
            from experiments.families.rnng.beam import RNNGBeamScorer

            o = request.options
            return Scoring(RNNGBeamScorer(model, o["beam"], o["word_beam"], o["fast_track"]),
                           {"beam": o["beam"], "word_beam": o["word_beam"], "fast_track": o["fast_track"]},
                           f"word-synchronous beam {o['beam']}/{o['word_beam']}, shift size {o['fast_track']} "
                           "(rnng-pytorch's beam_search.py)", 8)
        if request.method == "gold":
            if request.gold is None:
                raise InputError("--method gold needs gold trees: evaluate a treebank corpus (eval ppl)", "--method")
            return Scoring(TreeScorer(model, request.gold, method="gold", pos_tags=request.pos_tags,
                                      batch_size=request.batch_size,
                                      source_name=request.source_name or "gold trees of the corpus"),
                           {}, "gold trees, log p(x, y_gold)")
        if request.proposals is None:
            raise InputError("--method proposals needs --proposals FILE or --parser CKPT", "--method")
        n = request.options["n"]
        return Scoring(TreeScorer(model, request.proposals, method="proposals", n=n, pos_tags=request.pos_tags,
                                  batch_size=request.batch_size, source_name=request.source_name),
                       {"n_proposals": n}, f"N = {n} proposals from {request.source_name}")

    def inspection(self) -> Inspection:
        """``synbench inspect rnng``: a tree's top-down and in-order actions (``inspect.py``)."""
        def record(name: str, tree: Any, options: Any) -> dict[str, Any]:
            from experiments.families.rnng.inspect import record

            return record(tree)

        return Inspection(("rnng",), record)

    def network(self) -> tuple[type, Any]:
        """The module class and its config reader (a subclass family swaps the network, e.g. the CAG)."""
        from lightning_modules.families.rnng.model import RNNG, config_from_dict

        return RNNG, config_from_dict

    def model_info(self, config: dict[str, Any], prefix: str) -> dict[str, Any]:
        from dataclasses import asdict

        import torch

        network, config_from_dict = self.network()
        cfg = config_from_dict(config, prefix=prefix)
        with torch.device("meta"):
            module = network(cfg)
        parts = {name: sum(p.numel() for p in child.parameters()) for name, child in module.named_children()
                 if name not in ("word_out", "drop")}
        parts["word_out_bias"] = module.word_out.bias.numel()  # its weight is the word embedding's
        return {"parameters": sum(p.numel() for p in module.parameters()), "parts": parts, "config": asdict(cfg)}
