"""Pretrained causal LMs saved locally with ``transformers`` (``hf:DIR``): the family of spec models with a
``source`` instead of training.

Nothing is trained: the experiment registers the source as a finished run (``DONE`` names it) and the
evaluation plan scores ``hf:DIR`` itself (``experiments.evaluate.scorers.hf``: exact, raw text through the
model's own tokenizer), so a pretrained LM stands beside the trained families in one report.
"""

from __future__ import annotations

from typing import Any

from experiments.families import register
from experiments.families.adapter import Family

PREFIX = "hf:"


@register
class HFFamily(Family):
    """Any local ``AutoModelForCausalLM`` with its tokenizer."""

    names = ("hf",)
    pretrained = True  # spec entries give a ``source``; no checkpoint of this family is ever written

    def kind(self, config: dict[str, Any] | None = None) -> str:
        return "string"

    def capabilities(self, config: dict[str, Any] | None = None) -> frozenset[str]:
        return frozenset({"perplexity", "score", "surprisal"})

    def methods(self, config: dict[str, Any] | None = None) -> tuple[str, ...]:
        return ("exact",)

    def model_presets(self) -> tuple[dict[str, Any], str]:
        return {}, "hf: sources (pretrained; nothing to train)"
