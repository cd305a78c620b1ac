"""A standard transformer trained from scratch (``hf-scratch``): the plain modern LM at the same data and size.

The preset names a ``transformers`` architecture (GPT-2 by default; any causal LM config) and its fields,
sized to the other families' parameter count; it trains on the terminals TXL (terminals) trains on, by our
loop, and is scored exactly like the string families (``exact``: ``<s> words </s>``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from experiments.evaluate.word_prob import WORD_PROBS, describe, method_options
from experiments.families import register
from experiments.families.adapter import Family, Method, Scoring, ScoringRequest


@register
class HFScratchFamily(Family):
    """Any ``transformers`` causal LM architecture, built locally and trained from scratch."""

    names = ("hf-scratch",)

    def kind(self, config: dict[str, Any] | None = None) -> str:
        return "string"

    def methods(self, config: dict[str, Any] | None = None) -> tuple[Method, ...]:
        return (Method("exact", method_options(config)),)

    def build_data(self, cfg: dict[str, Any]) -> Any:
        from lightning_modules.families.hf_scratch import data
        from lightning_modules.families.hf_scratch.model import config_from_dict, max_positions

        return data.build(self.name, cfg, max_positions(config_from_dict(cfg["model"])))

    def build_module(self, cfg: dict[str, Any], data: Any) -> Any:
        from lightning_modules.families.hf_scratch.model import CausalLM

        return CausalLM({**cfg["model"], "vocab_size": data.vocab_size})

    def final_metrics(self, module: Any, data: Any, best_path: str) -> dict[str, Any]:
        from lightning_modules.families.hf_scratch.model import validation_metrics

        return validation_metrics(module, data, best_path)

    def load(self, checkpoint: str | Path, device: str = "cpu") -> Any:
        from experiments.families.hf_scratch.scorers import HFScratchModel

        return HFScratchModel.load(str(checkpoint), device)

    def scoring(self, checkpoint: str | Path, meta: dict[str, Any], request: ScoringRequest) -> Scoring:
        from experiments.families.hf_scratch.scorers import ExactScorer

        model = self.load(checkpoint, request.device)
        word_prob = request.options.get("word_prob", WORD_PROBS[0])
        scorer = ExactScorer(model, request.batch_size, word_prob)
        description = f"exact ({model.module.config.architecture})"
        if word_prob == WORD_PROBS[0]:
            return Scoring(scorer, {}, description)
        return Scoring(scorer, {"word_prob": word_prob}, f"{description}, {describe(word_prob)}")

    def model_info(self, config: dict[str, Any], prefix: str) -> dict[str, Any]:
        """Parameters of a preset's network (built on the meta device; tied weights counted once)."""
        from dataclasses import asdict

        import torch

        from lightning_modules.families.hf_scratch.model import CausalLM, config_from_dict, parameter_count

        cfg = config_from_dict(config, prefix=prefix)
        with torch.device("meta"):
            module = CausalLM(cfg)
        total, embedding = parameter_count(module), module.network.get_input_embeddings().weight
        head = module.network.get_output_embeddings()
        output = 0 if head is None or head.weight is embedding else head.weight.numel()
        parts = {"input_embedding": embedding.numel(), "output_head": output,
                 "rest": total - embedding.numel() - output}
        return {"parameters": total, "parts": parts, "config": asdict(cfg)}
