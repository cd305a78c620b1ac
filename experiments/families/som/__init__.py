"""Syntactic Ordered Memory (Shen et al. 2021): the family adapter.

SOM is a string model: its parser is part of how it computes p(x_{t+1} | x_<=t), so a sentence's
probability is exact given the decisions it takes, greedy in evaluation (``scorers.py``: the convention);
SyntaxGym and BLiMP read it like any string model. Its parses are the trees of those decisions
(``parsing.py``). Variants are config values: ``model.disentangled`` (dSOM / eSOM) and Table 2's ablations
(``lightning_modules.families.som.model``). Training data: UD CoNLL-U corpora (Γ of Fig. 4) by default
(``cpu-small``: UD EWT train/dev), or a constituency treebank (Appendix B.1). ``synbench inspect som`` prints
Γ, its grid labels, the grid view and Algorithm 1's labels (``inspect.py``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from experiments.families import register
from experiments.families.adapter import Family, Inspection, InspectOption, Method, ParseView, Scoring, ScoringRequest
from experiments.families.dependency_presets import data_presets
from lightning_modules.errors import InputError


@register
class SOMFamily(Family):
    """Syntactic Ordered Memory: Γ from UD trees, grid labels, Algorithm 1 (Shen et al. 2021)."""

    names = ("som",)

    def kind(self, config: dict[str, Any] | None = None) -> str:
        return "string"

    def methods(self, config: dict[str, Any] | None = None) -> tuple[Method, ...]:
        """``exact`` (greedy decisions); ``gold``: the gold decisions of the corpus's trees (Table 2's upper
        bound, ``eval ppl --method gold``)."""
        return (Method("exact"), Method("gold"))

    # -- training ------------------------------------------------------------------------------------------
    def train_presets(self) -> dict[str, Any]:
        """The shared data/train presets, each model preset under its base name (``cpu-small-esom`` reads
        ``cpu-small``), with the dependency data of the families trained on dependency trees: ``cpu-small*``
        on UD EWT train/dev, ``ptb*`` (Table 6's models; Γ read from dependency trees as the paper's Table 2
        run) on the PTB sample converted to Universal Dependencies as CoreNLP converts (``ptb-sample-ud``; the
        licensed PTB: ``data.corpus=ptb-ud``; the Collins head-rule trees: ``ptb-sample-dep``). A constituency
        treebank is an override (Appendix B.1, ``data.corpus=ptb``)."""
        shared = super().train_presets()
        models, _ = self.model_presets()
        out: dict[str, Any] = {"runtime": shared["runtime"]}
        ud = data_presets("ud")
        for name in models:
            base = next(b for b in sorted(shared, key=len, reverse=True) if name.startswith(b))
            preset = {**shared[base]}
            if base in ud:
                preset["data"] = {**preset["data"], **ud[base]}
            out[name] = preset
        return out

    def build_data(self, cfg: dict[str, Any]) -> Any:
        from lightning_modules.families.som import data as som_data

        return som_data.build(cfg)

    def build_module(self, cfg: dict[str, Any], data: Any) -> Any:
        from lightning_modules.families.som.model import build

        return build({**cfg["model"], "vocab_size": data.vocab_size})

    def final_metrics(self, module: Any, data: Any, best_path: str) -> dict[str, Any]:
        """Validation metrics of the best checkpoint with greedy decisions: exact perplexity (per token, the
        ``<eos>`` of each sentence in the sum and in the count as Kim et al. (2019); per word, ``<eos>`` in the
        sum only, as ``eval ppl``'s ``word_ppl``), p / p' accuracy against Algorithm 1's labels (Table 2), and
        the unlabeled F1 of the parses against the trees the model is trained on (Γ, or the binarized
        constituency trees) with ``eval parse``'s protocol (``parsing.py``): against the whole tree, also
        where it is deeper than the memory and its training labels are clamped (``encoding.depth_slots``)."""
        import torch

        from experiments.families.som import parsing
        from lightning_modules.families.som import encoding as som

        if best_path:
            module.load_state_dict(torch.load(best_path, map_location="cpu", weights_only=True)["state_dict"])
        module.eval()
        sums: dict[str, float] = {}
        gold, parsed = [], []
        with torch.no_grad():
            for start in range(0, len(data.valid), 32):
                rows = data.valid[start: start + 32]
                batch = data.collate(rows).to(module.device)
                for key, value in module.loss_terms(batch).items():
                    sums[key] = sums.get(key, 0.0) + float(value)
                theta = module(batch.inputs, batch.slots, "argmax").decisions.cpu().numpy()
                for b, row in enumerate(rows):
                    n = len(row) - 1
                    words = [str(i) for i in range(n)]
                    tree = som.shape_from_slots(som.depth_slots(row.first_sibling, module.config.n_slots)[1: n + 1])
                    gold.append(parsing.evalb_line(tree, words, row.tags))
                    parsed.append(parsing.evalb_line(som.shape_from_slots(theta[b, 1: n + 1]), words, row.tags))
        tokens, words = max(sums["lm_count"], 1), max(data.valid_words, 1)
        out = {
            "val_tokens": int(sums["lm_count"]),
            "val_words": data.valid_words,
            "val_token_ppl": math.exp(sums["lm_nll"] / tokens),
            "val_word_ppl": math.exp(sums["lm_nll"] / words),
            "val_word_ppl_convention": "exact with greedy decisions, <eos> predicted, denominator = words",
            "val_token_ppl_convention": "exact with greedy decisions, <eos> predicted and counted (Kim et al. 2019)",
            "val_p_accuracy": sums["parser_correct"] / max(sums["parser_count"], 1),
            "val_uf1": parsing.unlabeled_f1(gold, parsed)["bracket_f1"],
            "val_uf1_convention": "as eval parse: EVALB unlabeled vs the training trees (unclamped), punctuation "
                                  "and trivial spans removed",
        }
        if "zero_step_count" in sums:
            out["val_p_prime_accuracy"] = sums["zero_step_correct"] / max(sums["zero_step_count"], 1)
        out.update(data.stats)
        return out

    # -- checkpoints and scoring ---------------------------------------------------------------------------
    def load(self, checkpoint: str | Path, device: str = "cpu") -> Any:
        from experiments.families.som.scorers import SOMModel

        return SOMModel.load(str(checkpoint), device)

    def scoring(self, checkpoint: str | Path, meta: dict[str, Any], request: ScoringRequest) -> Scoring:
        from experiments.families.som.scorers import ExactScorer

        if request.proposals is not None:
            raise InputError("SOM decides its own structure: --proposals/--parser do not apply", str(checkpoint))
        model = self.load(checkpoint, request.device)
        if request.method == "exact":
            return Scoring(ExactScorer(model, request.batch_size), {}, "exact, greedy structure (argmax p_t and p'_t)")
        if request.gold is None:
            raise InputError("--method gold needs the gold trees of a corpus (eval ppl)", "--method")
        return Scoring(ExactScorer(model, request.batch_size, request.gold), {},
                       "gold decisions (Table 2's upper bound: theta_t and c_t from the corpus's trees)")

    def parse_view(self, config: dict[str, Any] | None = None) -> ParseView:
        from experiments.families.som.parsing import VIEW

        return VIEW

    def model_info(self, config: dict[str, Any], prefix: str) -> dict[str, Any]:
        from dataclasses import asdict

        import torch

        from lightning_modules.families.som import model as som

        cfg = som.config_from_dict(config, prefix=prefix)
        with torch.device("meta"):
            module = som.build(cfg)
        return {"parameters": som.parameter_count(module), "parts": som.parameter_breakdown(module),
                "config": asdict(cfg)}

    # -- inspect -------------------------------------------------------------------------------------------
    def inspection(self) -> Inspection:
        def record(name: str, item: Any, options: Mapping[str, Any]) -> dict[str, Any]:
            from experiments.families.som.inspect import record

            return record(item, options.get("slots"), options.get("decisions"))

        def sources(tree: str | None, trees_file: str | None) -> list[tuple[str, Any]]:
            from experiments.families.som.inspect import sources

            return sources(tree, trees_file)

        options = (InspectOption("--slots", {"type": int, "metavar": "N",
                                             "help": "som: memory slots N (default 15, the paper's)"}),
                   InspectOption("--decisions", {"metavar": "T1,...,TT",
                                                 "help": "som: the model's decisions, one slot per word (the first "
                                                         "N): adds Algorithm 1's labels and the parse they build"}))
        return Inspection(("som",), record, options, sources)
