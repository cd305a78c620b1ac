"""Dependency Transformer Grammars (Zhao et al. 2024, §3) and TXL (trans) as one LightningModule.

Both are the Transformer Grammar network (``models/txl_lm.py``: the generalised Transformer-XL, loss over labelled
positions, the official optimisation) over a dependency transition sequence (``data/families/dtg/encoding.py``):

  * ``dtg``: arc-standard, arc-eager or arc-swift (``system``) with STACK/COMPOSE attention and stack-depth
    relative positions clipped to [-1, 62]; an arc token's input is its arc representation (§3.3, Table 4):
    ``w+arc`` (the arc embedding plus the head word's, the paper's), ``arc`` or ``w`` (the head word's alone);
  * ``txl-trans``: the undoubled transition sequence with causal attention and linear relative positions,
    arc tokens as themselves (the official ``--attn_mask txl_arc``).

Deviations of the official DTG port from TG are config values: ``shared_relative_bias`` (one u, v for all
layers), ``scale_embeddings`` (inputs times sqrt(d)), ``emb_lr_multiplier`` (2.0: the embedding's learning rate
is doubled), and the presets set dropout to 0. One deviation from the official code, by design: a single
softmax over words and transitions, as the paper's p(a_t | a_<t); the official splits it into an action
classifier and a word softmax.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import torch

from lightning_modules.errors import InputError
from lightning_modules.families.dtg.encoding import SYSTEMS
from lightning_modules.models.config_fields import checked_values
from lightning_modules.models.lr_schedule import stepwise_scheduler
from lightning_modules.models.txl_lm import TGConfig, TransformerGrammarLM

FAMILIES = ("dtg", "txl-trans")
ARC_INPUTS = ("w+arc", "arc", "w")


@dataclass(frozen=True)
class DTGConfig(TGConfig):
    """``TGConfig`` plus the transition system, the arc representation and the official port's options."""

    system: str = "standard"
    arc_input: str = "w+arc"
    shared_relative_bias: bool = True
    scale_embeddings: bool = True
    emb_lr_multiplier: float = 2.0

    def validate(self, prefix: str = "model.") -> DTGConfig:
        super().validate(prefix)
        if self.system not in SYSTEMS:
            raise InputError(f"must be one of {', '.join(SYSTEMS)} (got {self.system!r})", f"{prefix}system")
        if self.arc_input not in ARC_INPUTS:
            raise InputError(f"must be one of {', '.join(ARC_INPUTS)} (got {self.arc_input!r})",
                             f"{prefix}arc_input")
        if self.emb_lr_multiplier <= 0:
            raise InputError(f"must be positive (got {self.emb_lr_multiplier!r})", f"{prefix}emb_lr_multiplier")
        return self


def config_from_dict(config: Mapping[str, Any], prefix: str = "model.") -> DTGConfig:
    """A validated ``DTGConfig`` from a flat mapping (a YAML preset); unknown keys, wrong types are errors."""
    return DTGConfig(**checked_values(DTGConfig, config, prefix)).validate(prefix)


def build(config: Mapping[str, Any] | DTGConfig) -> DependencyTransformerGrammarLM:
    """The LightningModule for a config (a ``DTGConfig`` or a flat dict of its fields)."""
    return DependencyTransformerGrammarLM(config if isinstance(config, DTGConfig) else config_from_dict(config))


class DependencyTransformerGrammarLM(TransformerGrammarLM):
    """DTG / TXL (trans): the TG network with DTG's options; batches carry ``added`` (arc head ids)."""

    def __init__(self, config: DTGConfig | Mapping[str, Any]):
        super().__init__(config if isinstance(config, DTGConfig) else config_from_dict(config))

    def network_options(self) -> dict[str, Any]:
        c = self.config
        return {"shared_relative_bias": c.shared_relative_bias, "scale_embeddings": c.scale_embeddings}

    def configure_optimizers(self) -> dict[str, Any]:
        """Adam (the official AdamW with weight decay 0) with the embedding in its own group at
        ``emb_lr_multiplier`` times the rate; the schedule scales both groups alike."""
        c = self.config
        embedding = self.network.embedding.weight
        rest = [p for p in self.parameters() if p is not embedding]
        groups = [{"params": rest}, {"params": [embedding], "lr": c.peak_lr * c.emb_lr_multiplier}]
        optimizer = torch.optim.Adam(groups, lr=c.peak_lr, betas=(c.adam_beta1, c.adam_beta2))
        return {"optimizer": optimizer, "lr_scheduler": stepwise_scheduler(optimizer, c)}
