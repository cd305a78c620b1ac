"""Pretrained causal LMs saved locally with ``transformers`` (``hf:DIR``): the family of spec models with a
``source`` instead of training.

Nothing is trained: the experiment registers the source as a finished run (``DONE`` names it) and the
evaluation plan scores ``hf:DIR`` itself (``experiments.evaluate.scorers.hf``: exact, raw text through the
model's own tokenizer), so a pretrained LM stands beside the trained families in one report. Its one method,
``exact``, has two options: ``hf_convention`` (``CONVENTIONS``), whose requests the scores reproduce, minicons'
or lm-evaluation-harness's (they differ on BLiMP by the space lm-eval puts before each sentence), and
``word_prob`` (``experiments.evaluate.word_prob``), how pieces make a word's probability.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from experiments.evaluate.scorers import HF_CONVENTIONS as CONVENTIONS
from experiments.evaluate.scorers import HF_PREFIX
from experiments.evaluate.word_prob import WORD_PROBS
from experiments.families import register
from experiments.families.adapter import Family, Method, Scoring, ScoringRequest


@register
class HFFamily(Family):
    """Any local ``AutoModelForCausalLM`` with its tokenizer."""

    names = ("hf",)
    source_prefix = HF_PREFIX  # spec entries give a ``source``; no checkpoint of this family is ever written

    def kind(self, config: dict[str, Any] | None = None) -> str:
        return "string"

    def model_presets(self) -> tuple[dict[str, Any], str]:
        return {}, "hf: sources (pretrained; nothing to train)"

    def methods(self, config: dict[str, Any] | None = None) -> tuple[Method, ...]:
        return (Method("exact", {"hf_convention": CONVENTIONS[0], "word_prob": WORD_PROBS[0]}),)

    def scoring(self, checkpoint: str | Path, meta: dict[str, Any], request: ScoringRequest) -> Scoring:
        """Exact, on raw text through the model's own tokenizer (``checkpoint`` is ``hf:DIR``), under the
        request's ``hf_convention`` and ``word_prob``."""
        from experiments.evaluate.scorers import hf

        scorer = hf.load(str(checkpoint), request.device, request.precision, request.batch_size,
                         request.options["hf_convention"], request.options["word_prob"])
        return Scoring(scorer, scorer.identity(), scorer.description(), request.batch_size)
