"""AWD-LSTM (Merity et al. 2018) and PaLM (Peng et al. 2019): the family adapter.

All four are string models on Mikolov-style text, scored exactly: ``awd-lstm`` (the baseline), ``palm-u``
(span attention, unsupervised), ``palm-s`` (the attention supervised with gold spans, Eq. 5) and ``palm-rb``
(fixed right-branching scores). PaLM models also parse (§2.2): their scorer gives the greedy tree of the span
attention scores. Training reads the corpus as one stream in truncated-BPTT windows
(``lightning_modules.families.palm.data``); the run's final metrics are the papers' stream-level perplexity.

Presets: ``presets/palm.yaml`` holds the PaLM presets (the three variants share "exactly the same
architecture and hyperparameters", Appendix A) and ``presets/awd-lstm.yaml`` the baseline's.

``synbench import`` (``importing``) reads official ``RNNModel.state_dict()`` files of salesforce/awd-lstm-lm and
Noahs-ARK/PaLM with their vocabulary (``lightning_modules.families.palm.official``); the imported run has the
``ptb`` preset's config with the sizes and settings of the official network.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from experiments.config_ranges import Range
from experiments.families import register
from experiments.families.adapter import Family, ImportedModel, Importing, Method, ParseView, Scoring, ScoringRequest
from lightning_modules.errors import InputError

# the data/train presets of configs/train.yaml that the AWD-LSTM recipe changes: parallel streams per batch
# (Merity et al.: 20 for PTB, 80 for WikiText-2, evaluation 10)
STREAM_BATCHES = {"ptb": {"batch_size": 20, "eval_batch_size": 10},
                  "wikitext-2": {"batch_size": 80, "eval_batch_size": 10}}
# data/train presets of the family's own: name -> (the configs/train.yaml preset it starts from, its corpus)
OWN_TRAIN_PRESETS = {"wikitext-2": ("ptb", "wikitext-2")}
EVAL_STREAMS = 10  # parallel streams of the final stream-level perplexities (the official evaluation batch)
STREAM_CONVENTION = ("stream-level (val_ppl, ppl_stream: the split's Mikolov text as one stream, <eos> predicted, "
                     f"{EVAL_STREAMS} parallel streams, state carried across windows) as the papers report; the "
                     "shared protocol's sentence-level test perplexity is eval ppl's ppl")


@register
class PalmFamily(Family):
    """AWD-LSTM and PaLM-U/S/RB: LSTM language models over a token stream, PaLM with span attention."""

    names = ("awd-lstm", "palm-u", "palm-s", "palm-rb")
    # switch_after and switch_after_epochs 0: the NT trigger switches; finetune_at 0: no finetuning;
    # finetune_min 0: no minimum; epochs 0: the step schedule; max_steps 0: an untrained model (Table 4's
    # random-initialisation row)
    config_ranges = {"switch_after": Range(0), "switch_after_epochs": Range(0), "finetune_at": Range(0),
                     "finetune_min": Range(0), "epochs": Range(0), "max_steps": Range(0)}

    def kind(self, config: dict[str, Any] | None = None) -> str:
        return "string"

    def methods(self, config: dict[str, Any] | None = None) -> tuple[Method, ...]:
        return (Method("exact"),)

    # -- presets and training ------------------------------------------------------------------------------
    def model_presets(self) -> tuple[dict[str, Any], str]:
        from experiments.presets import load_presets, presets_file

        path = presets_file(self).with_name(self._presets_name())
        return load_presets(path), str(path)

    def _presets_name(self) -> str:
        """The presets file of this name: the baseline's own, or the one the three PaLM variants share."""
        return "awd-lstm.yaml" if self.name == "awd-lstm" else "palm.yaml"

    def train_presets(self) -> dict[str, Any]:
        """The shared presets with the recipe's stream batches and ``data.test_split`` (the split of the final
        stream-level test perplexity, ``ppl_stream``; skipped when the corpus has no such split), and the
        family's own (``OWN_TRAIN_PRESETS``: ``wikitext-2``, the ``ptb`` loop on the registered copy). A model
        preset counted in epochs (``model.epochs`` > 0: the official loop, validated once an epoch) trains
        without a step limit or a step interval (``train.max_steps`` and ``train.val_every`` null)."""
        from experiments.presets import presets_file, resolve_presets

        presets = super().train_presets()
        models, _ = self.model_presets()
        loops = {name: preset.get("train_preset", name)  # the configs/train.yaml preset each one trains with
                 for name, preset in resolve_presets(presets_file(self).with_name(self._presets_name())).items()}
        for name, (base, corpus) in OWN_TRAIN_PRESETS.items():
            if name in models and base in presets:  # the WikiText-2 copy registered by the user
                presets[name] = {**presets[base], "data": {**presets[base]["data"], "corpus": corpus}}
        for name, preset in presets.items():
            if "data" not in preset:  # the runtime defaults
                continue
            loop = loops.get(name, name)
            epochs = {"max_steps": None, "val_every": None} if models.get(name, {}).get("epochs") else {}
            presets[name] = {**preset, "data": {**preset["data"], "test_split": "test"},
                             "train": {**preset["train"], **STREAM_BATCHES.get(loop, {}), **epochs}}
        return presets

    def build_data(self, cfg: dict[str, Any]) -> Any:
        from lightning_modules.families.palm import data as palm_data

        return palm_data.build(self.name, cfg)

    def build_module(self, cfg: dict[str, Any], data: Any) -> Any:
        from lightning_modules.families.palm.model import build

        return build({**cfg["model"], "vocab_size": data.vocab_size}, family=self.name)

    def final_metrics(self, module: Any, data: Any, best_path: str) -> dict[str, Any]:
        """Stream-level validation and test perplexity of the best checkpoint (the lowest validation loss of
        all stages; its averaged weights after the switch), with the stage it was validated in
        (``nt_asgd_stage``: base, averaged, finetune), as the papers report it: the split read as one stream in
        windows, ``<eos>`` predicted. The shared protocol's sentence-level test perplexity is ``eval ppl``'s
        ``ppl``."""
        import torch

        stage = "base"  # an untrained model (train.max_steps 0)
        if best_path:
            best = torch.load(best_path, map_location="cpu", weights_only=True)
            module.load_state_dict(best["state_dict"])
            stage = (best.get("nt_asgd_stage") or {}).get("validated_in", stage)
        module.eval()
        valid_tokens, valid_ppl = _stream_perplexity(module, data.valid_batches(EVAL_STREAMS))
        out = {"val_tokens": valid_tokens, "val_ppl": valid_ppl}
        if data.test_ids is not None:
            out["ppl_stream_tokens"], out["ppl_stream"] = _stream_perplexity(module, data.eval_batches(data.test_ids,
                                                                                                EVAL_STREAMS))
        return {**out, "ppl_convention": STREAM_CONVENTION, "nt_asgd_stage": stage, **data.stats}

    # -- checkpoints and scoring ---------------------------------------------------------------------------
    def load(self, checkpoint: str | Path, device: str = "cpu") -> Any:
        from experiments.families.palm.scorers import PalmModel

        return PalmModel.load(str(checkpoint), device)

    def scoring(self, checkpoint: str | Path, meta: dict[str, Any], request: ScoringRequest) -> Scoring:
        from experiments.families.palm.scorers import ExactScorer

        if request.proposals is not None or request.method != "exact":
            raise InputError(f"a {self.name} model is a string model, scored exactly", str(checkpoint))
        model = self.load(checkpoint, request.device)
        return Scoring(ExactScorer(model, request.batch_size, trees=True), {}, "exact", 64)

    def parse_view(self, config: dict[str, Any] | None = None) -> ParseView | None:
        if self.name == "awd-lstm":
            return None
        from experiments.families.palm.parsing import VIEW

        return VIEW

    def importing(self) -> Importing | None:
        """Official ``RNNModel.state_dict()`` files of salesforce/awd-lstm-lm (awd-lstm) and Noahs-ARK/PaLM (palm-u,
        palm-s; the official code has no PaLM-RB network), with the official vocabulary
        (``lightning_modules.families.palm.official``)."""
        if self.name == "palm-rb":
            return None
        official = ("salesforce/awd-lstm-lm" if self.name == "awd-lstm" else "Noahs-ARK/PaLM") + \
            " RNNModel.state_dict() (torch.save(model.state_dict(), F)) + vocab (idx2word a line, or the corpus folder)"
        return Importing(official, self._convert, needs_vocab=True)

    def _convert(self, checkpoint: Path, vocab: Path | None, tokenizer: Path | None) -> ImportedModel:
        """The run config of the family's ``ptb`` preset with the model keys the official checkpoint fixes."""
        from experiments.config import resolve_train_config
        from lightning_modules.data.mikolov import EOS
        from lightning_modules.families.palm import official
        from lightning_modules.families.palm.model import config_from_dict

        if tokenizer is not None:
            raise InputError(f"a {self.name} checkpoint reads Mikolov-style words: no tokenizer", str(tokenizer))
        converted = official.convert(Path(checkpoint), None if vocab is None else Path(vocab), self.name)
        cfg = resolve_train_config(self.name, "ptb")
        cfg["model"] = {**cfg["model"], **converted.model}
        config_from_dict(cfg["model"], family=self.name)  # the sizes make a model (checked again on load)
        return ImportedModel(cfg, {"tokens": converted.tokens, "eos": EOS}, converted.state_dict,
                             {"checkpoint": str(checkpoint), "vocab": str(vocab), **converted.source})

    def model_info(self, config: dict[str, Any], prefix: str) -> dict[str, Any]:
        import torch

        from lightning_modules.families.palm import model as palm

        cfg = palm.config_from_dict(config, prefix=prefix, family=self.name)
        with torch.device("meta"):
            module = palm.build(cfg, self.name)
        return {"parameters": palm.parameter_count(module), "config": palm.asdict(cfg)}


def _stream_perplexity(module: Any, batches: Any) -> tuple[int, float]:
    """(tokens, perplexity) of a held-out stream read window by window with the state carried."""
    import torch
    import torch.nn.functional as F

    nll, tokens, state = 0.0, 0, None
    with torch.no_grad():
        for batch in batches:
            out = module(batch.inputs.to(module.device), None if batch.reset else state)
            state = out.state
            nll += float(F.cross_entropy(out.logits.flatten(0, 1).float(), batch.targets.to(module.device).flatten(),
                                         reduction="sum"))
            tokens += batch.targets.numel()
    return tokens, math.exp(nll / max(tokens, 1))
