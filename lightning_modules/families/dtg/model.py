"""Dependency Transformer Grammars (Zhao et al. 2024, §3) and TXL (trans) as one LightningModule.

Both are the Transformer Grammar network (``models/txl_lm.py``: the generalised Transformer-XL, loss over labelled
positions, the official optimisation) over a dependency transition sequence (``data/families/dtg/encoding.py``):

  * ``dtg``: arc-standard, arc-eager or arc-swift (``system``) with STACK/COMPOSE attention and stack-depth
    relative positions clipped to [-1, 62]; an arc token's input is its arc representation (§3.3, Table 4):
    ``w+arc`` (the arc embedding plus the head word's, the paper's), ``arc`` or ``w`` (the head word's alone);
  * ``txl-trans``: the undoubled transition sequence with causal attention and linear relative positions,
    arc tokens as themselves (the official ``--attn_mask txl_arc``).

Deviations of the official DTG port (zhaoyd1/Dep_Transformer_Grammars, ``model_dep_gen_first.py`` and
``model_bllip_dep.py``) from TG are config values, set as the official code in the paper presets (checked
against it by ``tests/experiments/families/dtg/test_dtg_official.py``); the dataclass defaults keep the earlier
behaviour, so checkpoints trained before these keys existed load unchanged:

  * ``shared_relative_bias``: one u, v for all layers (official: shared);
  * ``scale_embeddings``: inputs times sqrt(d) (official: no; its ``emb_scale`` is never used);
  * ``ffn_activation``: ``relu`` (official ``PositionwiseFF``) or ``gelu`` (TG's, tanh approximation);
  * ``attention_output_bias``: a bias on the attention output projection (official ``o_net``: none);
  * ``output_head``: ``split`` (official DTG, ``--attn_mask sub+action``): an action MLP (d -> d -> ReLU -> 4:
    pad, left_arc, right_arc, other) beside the word softmax; p(left_arc) = p_action(left_arc), p(right_arc) =
    p_action(right_arc), p(x) = p_action(other) p_word(x) for any other token (words, pop_root, ``</s>``), the
    official ``constrained_forward_gen`` and loss (word CE + action CE). The official values do not sum to 1:
    the action head's pad class and the word softmax's mass on the arc tokens are lost; here that mass goes
    to the reserved placeholder token (id 3, never a label), so the network still outputs a distribution
    whose log-probabilities of every real token are the official ones. ``joint``: one softmax over words and
    transitions, the paper's p(a_t | a_<t) (the official TXL (trans), ``model_bllip_dep.py``). ``split``
    needs arc-standard's vocabulary layout (transitions last: left_arc, pop_root, right_arc). ``official``
    (the ``dtg`` presets): ``split`` for arc-standard, the official code's system, ``joint`` for arc-eager and
    arc-swift, which the official code does not have (so ``model.system=eager`` overrides still work);
  * ``emb_lr_multiplier``: 2.0, the embedding's learning rate is doubled; the presets set dropout to 0.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from lightning_modules.errors import InputError
from lightning_modules.families.dtg.encoding import SYSTEMS
from lightning_modules.layers.txl_core import FeedForward, TransformerXL
from lightning_modules.models.config_fields import checked_values
from lightning_modules.models.lr_schedule import stepwise_scheduler
from lightning_modules.models.txl_lm import TGConfig, TransformerGrammarLM

FAMILIES = ("dtg", "txl-trans")
ARC_INPUTS = ("w+arc", "arc", "w")
FFN_ACTIVATIONS = ("gelu", "relu")
OUTPUT_HEADS = ("joint", "split", "official")
ARC_STANDARD_TRANSITIONS = ("left_arc", "pop_root", "right_arc")  # the vocabulary's last ids (data.build)
PLACEHOLDER = 3  # the reserved id that never is a label (choe_charniak.RESERVED): the split head's lost mass
ACTION_CLASSES = 4  # the official action MLP's classes: pad, left_arc, right_arc, other


@dataclass(frozen=True)
class DTGConfig(TGConfig):
    """``TGConfig`` plus the transition system, the arc representation and the official port's options."""

    system: str = "standard"
    arc_input: str = "w+arc"
    shared_relative_bias: bool = True
    scale_embeddings: bool = True
    emb_lr_multiplier: float = 2.0
    ffn_activation: str = "gelu"
    attention_output_bias: bool = True
    output_head: str = "joint"

    def validate(self, prefix: str = "model.") -> DTGConfig:
        super().validate(prefix)
        if self.system not in SYSTEMS:
            raise InputError(f"must be one of {', '.join(SYSTEMS)} (got {self.system!r})", f"{prefix}system")
        if self.arc_input not in ARC_INPUTS:
            raise InputError(f"must be one of {', '.join(ARC_INPUTS)} (got {self.arc_input!r})",
                             f"{prefix}arc_input")
        if self.emb_lr_multiplier <= 0:
            raise InputError(f"must be positive (got {self.emb_lr_multiplier!r})", f"{prefix}emb_lr_multiplier")
        if self.ffn_activation not in FFN_ACTIVATIONS:
            raise InputError(f"must be one of {', '.join(FFN_ACTIVATIONS)} (got {self.ffn_activation!r})",
                             f"{prefix}ffn_activation")
        if self.output_head not in OUTPUT_HEADS:
            raise InputError(f"must be one of {', '.join(OUTPUT_HEADS)} (got {self.output_head!r})",
                             f"{prefix}output_head")
        if self.output_head == "split" and self.system != "standard":
            raise InputError(f"the split head (the official action MLP) predicts arc-standard's left_arc and "
                             f"right_arc; model.system is {self.system!r}", f"{prefix}output_head")
        return self


def config_from_dict(config: Mapping[str, Any], prefix: str = "model.") -> DTGConfig:
    """A validated ``DTGConfig`` from a flat mapping (a YAML preset); unknown keys, wrong types are errors."""
    return DTGConfig(**checked_values(DTGConfig, config, prefix)).validate(prefix)


def build(config: Mapping[str, Any] | DTGConfig) -> DependencyTransformerGrammarLM:
    """The LightningModule for a config (a ``DTGConfig`` or a flat dict of its fields)."""
    return DependencyTransformerGrammarLM(config if isinstance(config, DTGConfig) else config_from_dict(config))


def split_head(config: DTGConfig) -> bool:
    """Whether ``config``'s network has the split head (``output_head``: split, or official on arc-standard)."""
    return config.output_head == "split" or (config.output_head == "official" and config.system == "standard")


def arc_ids(vocab_size: int) -> tuple[int, int]:
    """The ids of left_arc and right_arc in an arc-standard vocabulary (transitions last, sorted: left_arc,
    pop_root, right_arc; ``data.build``)."""
    return vocab_size - 3, vocab_size - 1


class ReluFeedForward(FeedForward):
    """The official ``PositionwiseFF``: ``Linear(d, f) -> ReLU -> dropout -> Linear(f, d)`` (TG's is GELU)."""

    def forward(self, x: Tensor) -> Tensor:
        return self.outer(self.dropout(F.relu(self.inner(x))))


class SplitHeadTransformerXL(TransformerXL):
    """``TransformerXL`` with the official DTG action MLP: its outputs are log-probabilities of the split head
    (module docstring), a distribution over the vocabulary (log_softmax leaves them as they are). The head is
    ``project`` (its parameters: the word head's, then the action MLP's), so every path to the outputs
    (``forward``, ``step``, the chunked loss) goes through it."""

    action_head: nn.Sequential
    arcs: tuple[int, int]

    @classmethod
    def convert(cls, network: TransformerXL, dropout: float) -> SplitHeadTransformerXL:
        """``network`` with the action MLP added (initialised as the core's linears: truncated normal of
        variance (2 / n_layers) / fan_in, zero biases)."""
        network.__class__ = cls
        assert isinstance(network, SplitHeadTransformerXL)
        d = network.d_model
        network.action_head = nn.Sequential(nn.Linear(d, d), nn.ReLU(), nn.Dropout(dropout),
                                            nn.Linear(d, ACTION_CLASSES))
        network.arcs = arc_ids(network.embedding.num_embeddings)
        with torch.no_grad():
            for linear in (network.action_head[0], network.action_head[3]):
                std = math.sqrt(2.0 / network.n_layers / linear.in_features) / 0.87962566103423978
                nn.init.trunc_normal_(linear.weight, std=std, a=-2 * std, b=2 * std)
                nn.init.zeros_(linear.bias)
        return network

    def head_parameters(self) -> tuple[Tensor, ...]:
        """The word head's parameters, then the action MLP's (``project``'s order)."""
        return (*super().head_parameters(), *self.action_head.parameters())

    def project(self, h: Tensor, weight: Tensor, bias: Tensor, *action: Tensor) -> Tensor:
        """Final hidden states [..., D] -> the split head's log-probabilities [..., V]."""
        inner_weight, inner_bias, outer_weight, outer_bias = action  # the MLP of ``convert``
        hidden = self.action_head[2](F.relu(F.linear(h, inner_weight, inner_bias)))
        return self.split(super().project(h, weight, bias), F.linear(hidden, outer_weight, outer_bias))

    def split(self, logits: Tensor, actions: Tensor) -> Tensor:
        """Word logits [..., V] and action logits [..., 4] -> the split head's log-probabilities [..., V]."""
        action = actions.float().log_softmax(-1)
        word = logits.float().log_softmax(-1)
        left, right = self.arcs
        out = action[..., 3:4] + word
        lost = torch.logaddexp(action[..., 0], action[..., 3] + word[..., [left, right, PLACEHOLDER]].logsumexp(-1))
        out[..., left], out[..., right], out[..., PLACEHOLDER] = action[..., 1], action[..., 2], lost
        return out.to(logits.dtype)


class DependencyTransformerGrammarLM(TransformerGrammarLM):
    """DTG / TXL (trans): the TG network with DTG's options; batches carry ``added`` (arc head ids)."""

    def __init__(self, config: DTGConfig | Mapping[str, Any]):
        super().__init__(config if isinstance(config, DTGConfig) else config_from_dict(config))
        c = self.config
        for layer in self.network.layers:
            if c.ffn_activation == "relu":
                layer.ffn.__class__ = ReluFeedForward
            if not c.attention_output_bias:
                for attention in layer.attentions:
                    attention.output.register_parameter("bias", None)
        if split_head(c):
            self.network = SplitHeadTransformerXL.convert(self.network, c.core_dropout)

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
