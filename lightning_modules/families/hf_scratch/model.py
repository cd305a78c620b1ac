"""A standard transformer LM from ``transformers``, trained from scratch by our loop (GPT-2 by default).

The preset names an architecture (``model.architecture``: any ``transformers`` model type with a causal LM
head, e.g. ``gpt2``, ``llama``) and overrides of its config (``model.config``); the network is built
locally (``AutoConfig.for_model`` + ``AutoModelForCausalLM.from_config``: no hub, the library's own
initialisation) with the vocabulary size and special ids of our data, and checked to be causal (a model
the causal-LM mapping builds may still attend both ways, e.g. BERT without ``is_decoder``). Optimisation is
the TXL baselines': Adam with linear warm-up then cosine decay, clipping by global norm (``models.optimisation``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

import pytorch_lightning as pl
import torch
import torch.nn.functional as F
from torch import Tensor

from lightning_modules.data.train_data import TrainData
from lightning_modules.errors import InputError
from lightning_modules.families.hf_scratch.encoding import BOS, EOS, PAD
from lightning_modules.models.config_fields import checked_values
from lightning_modules.models.lr_schedule import stepwise_scheduler
from lightning_modules.models.optimisation import ScheduledClipping, global_token_mean


@dataclass(frozen=True)
class HFScratchConfig:
    """The architecture, its config overrides and the optimisation of one model."""

    architecture: str = "gpt2"
    config: dict[str, Any] = field(default_factory=dict)  # fields of the architecture's transformers config
    vocab_size: int = 12000  # the data's at training time; the preset's only sizes model-info
    peak_lr: float = 1e-3
    start_lr: float = 1e-7
    min_lr: float = 3e-7
    warmup_steps: int = 100
    total_steps: int = 900
    adam_beta1: float = 0.9
    adam_beta2: float = 0.999
    weight_decay: float = 0.0
    grad_clip_norm: float = 3.0


def config_from_dict(config: Mapping[str, Any], prefix: str = "model.") -> HFScratchConfig:
    """A checked ``HFScratchConfig`` from a flat preset (``config`` a mapping of the architecture's fields)."""
    overrides = config.get("config", {})
    if not isinstance(overrides, Mapping):
        raise InputError(f"expected a mapping of {config.get('architecture', 'gpt2')} config fields, got "
                         f"{overrides!r}", f"{prefix}config")
    values = checked_values(HFScratchConfig, {k: v for k, v in config.items() if k != "config"}, prefix)
    return HFScratchConfig(**values, config=dict(overrides))


def transformers_config(cfg: HFScratchConfig, prefix: str = "model.") -> Any:
    """The ``transformers`` config: the architecture's defaults, the preset's fields, our vocabulary and ids.

    A field the architecture's config does not have is an error (``transformers`` would keep it silently)."""
    from transformers import AutoConfig

    try:
        default = AutoConfig.for_model(cfg.architecture)
    except ValueError:
        raise InputError(f"unknown transformers architecture {cfg.architecture!r}", f"{prefix}architecture") from None
    for key in cfg.config:
        if not hasattr(default, key):
            raise InputError(f"{cfg.architecture} configs have no field {key!r}", f"{prefix}config.{key}")
    return AutoConfig.for_model(cfg.architecture, **{**cfg.config, "vocab_size": cfg.vocab_size,
                                                     "bos_token_id": BOS, "eos_token_id": EOS,
                                                     "pad_token_id": PAD})


def max_positions(cfg: HFScratchConfig) -> int | None:
    """The longest sequence the architecture's positions cover (None: unbounded, e.g. rotary)."""
    value = getattr(transformers_config(cfg), "max_position_embeddings", None)
    return int(value) if isinstance(value, int) else None


class CausalLM(ScheduledClipping, pl.LightningModule):
    """A ``transformers`` causal LM (``network``) with our loss, logging and optimisation."""

    def __init__(self, config: HFScratchConfig | Mapping[str, Any]):
        from transformers import AutoModelForCausalLM

        super().__init__()
        self.config = config if isinstance(config, HFScratchConfig) else config_from_dict(config)
        self.save_hyperparameters({"config": asdict(self.config)})
        try:
            self.network = AutoModelForCausalLM.from_config(transformers_config(self.config))
        except ValueError as e:  # not a causal LM architecture
            raise InputError(str(e).splitlines()[0], "model.architecture") from None
        if not next(self.network.parameters()).is_meta:
            check_causal(self.network, self.config.architecture)

    def token_logprobs(self, inputs: Tensor, labels: Tensor) -> Tensor:
        """[B, T] log p(labels[b, t] | inputs[b, :t+1]); 0 where the label is padding."""
        logits = self.network(input_ids=inputs, attention_mask=(inputs != PAD).long()).logits
        logp = logits.float().log_softmax(-1).gather(-1, labels[..., None]).squeeze(-1)
        return logp.masked_fill(labels == PAD, 0.0)

    def nll(self, batch: tuple[Tensor, Tensor]) -> tuple[Tensor, Tensor]:
        """Summed negative log-likelihood over the labels of a batch, and their count."""
        inputs, labels = batch
        logits = self.network(input_ids=inputs, attention_mask=(inputs != PAD).long()).logits
        total = F.cross_entropy(logits.flatten(0, 1).float(), labels.flatten(), ignore_index=PAD, reduction="sum")
        return total, (labels != PAD).sum()

    def training_step(self, batch: tuple[Tensor, Tensor], batch_idx: int) -> Tensor:
        total, count = self.nll(batch)
        loss, logged = global_token_mean(self, total, count)
        self.log("train/loss", logged, prog_bar=True, batch_size=int(count))
        return loss

    def validation_step(self, batch: tuple[Tensor, Tensor], batch_idx: int) -> None:
        total, count = self.nll(batch)
        n = int(count)
        if n:  # weighted by the token count, the epoch mean is the token-level mean NLL
            self.log("val/loss", total / n, prog_bar=True, batch_size=n, on_epoch=True)

    def configure_optimizers(self) -> dict[str, Any]:
        c = self.config
        optimizer = torch.optim.AdamW(self.parameters(), lr=c.peak_lr, betas=(c.adam_beta1, c.adam_beta2),
                                      weight_decay=c.weight_decay)
        return {"optimizer": optimizer, "lr_scheduler": stepwise_scheduler(optimizer, c)}


@torch.no_grad()
def check_causal(network: torch.nn.Module, architecture: str) -> None:
    """The first position's output must not see the second token: a model the causal-LM mapping builds may
    still attend both ways (e.g. BERT's LM head without ``is_decoder``), which would see the words it predicts."""
    training = network.training
    network.eval()
    inputs = torch.tensor([[BOS, EOS], [BOS, BOS]])
    logits = network(input_ids=inputs).logits
    network.train(training)
    if not torch.allclose(logits[0, 0], logits[1, 0], atol=1e-5):
        raise InputError(f"{architecture} as configured is not causal (a position sees the tokens after it)",
                         "model.architecture")


def parameter_count(module: torch.nn.Module) -> int:
    """Parameters, tied ones counted once."""
    return sum(p.numel() for p in module.parameters())


def validation_metrics(module: CausalLM, data: TrainData, best_path: str) -> dict[str, Any]:
    """Validation NLL of the best checkpoint per token and per word (exact, ``</s>`` predicted)."""
    if best_path:
        module.load_state_dict(torch.load(best_path, map_location="cpu", weights_only=True)["state_dict"])
    module.eval()
    total, count = 0.0, 0
    with torch.no_grad():
        for inputs, labels in data.valid_batches(32):
            nll, n = module.nll((inputs.to(module.device), labels.to(module.device)))
            total, count = total + float(nll), count + int(n)
    words = max(data.valid_words, 1)
    return {"val_tokens": count, "val_words": data.valid_words, "val_token_nll": total / max(count, 1),
            "val_token_ppl": math.exp(total / max(count, 1)), "val_word_ppl": math.exp(total / words),
            "val_word_ppl_convention": "exact, </s> predicted, denominator = words",
            "parameters": parameter_count(module), **data.stats}
