"""Pushdown-LM and Base-LM (Murty et al. 2023, §3–§4) as one LightningModule.

The network, read top to bottom (as the official ``PushdownLM``/``Transformer``):
``h⁰ = drop_emb(√d · E[x])`` (OpenNMT scale, no absolute positions); per block, post-LN with ReLU,
``h = LN(h + drop(Attn(h, tape)))``, ``h = LN(h + drop(W₂ drop(ReLU(W₁ h))))``; word logits
``drop_out(h^L) Eᵀ + b`` (tied, with an output bias). ``Attn`` is ``PushdownSelfAttention``: relative
positions everywhere, the depth term (Eq. 6) in the Pushdown Layers, which are all blocks or the last
``pushdown_layers`` of them; ``attention`` picks how it is computed (the block loop, the same scores as one
dense bias, or FlexAttention: ``score_function``). The ``AttachmentHead`` (Eq. 5) reads ``h^L`` and the
embedding of the word being predicted. Families:
  * ``pushdown``: at least one Pushdown Layer and the attachment head;
  * ``base-lm``: the same network with plain attention; the attachment head is optional
    (``attachment_loss``: multi-task, as the §4.1 Dyck baseline).

Loss: mean LM cross-entropy over the words and ``<eos>`` + ``attachment_loss_weight`` × mean attachment
cross-entropy over the words (the ``<eos>`` step masked), each normalised by its own count as officially.
``val/loss`` is the per-token joint NLL −log p(x, y_gold) for ``pushdown`` (a bound on −log p(x)) and the
LM NLL for ``base-lm``.

Deviations from the official code (MurtyShikhar/Pushdown-Layers), each by design:
  * ``create_lm`` passes ``n_heads`` as ``ff_multiplier``: the official model always has 8 heads and an FFN
    of ``n_heads × d_model`` (8192 for BLLIP), and the attachment head's depth embedding has size
    ``d_model / n_heads``. Here heads, ``d_ff`` and ``attachment_depth_dim`` are explicit; the clean reading
    is the default and the preset ``bllip-official`` reproduces the official sizes.
  * The official ``PushdownLM`` applies the output dropout *after* computing the word logits, so it has no
    effect; here ``output_dropout`` acts (``bllip-official`` sets it to 0 to reproduce the official run).
  * Depths beyond the embedding tables are clamped (the official lookup crashes at depth ≥ 50).
  * The official attachment head inherits unused parameters (a query projection, a merge projection and a
    position bias: 2·d² + d parameters); they are not created here, so parameter counts are lower by that.
  * The official sequence reads ``<eos>`` too and predicts ``</s>`` after it; its loss and ``eval_gold`` count
    log p(``</s>``) and ``<eos>``'s attachment to ``<s>``. Here a sentence ends with predicting ``<eos>``, whose
    attachment is not scored (``sentence_end: eos``); imported official checkpoints (``synbench import``) get
    ``sentence_end: official``, under which gold-tree scores count both terms as the official code does, and
    the beam ends as the official ``eval_beam`` (training refuses it: the training data has no ``</s>``).
  * The attachment head's padded rows are not all −inf (the official masks them entirely, giving NaN rows
    that its loss multiplies by 0); they are ignored by the loss either way.
Initialisation as the official: embedding Xavier-uniform, output bias 0, FFN ``W₁`` Xavier (ReLU gain) and
``W₂`` Xavier, everything else PyTorch's defaults (the official attention ``reset_parameters`` is never
called). Optimiser: Adam (``adam_eps``) with TG's ``linear_warmup_then_cosine_anneal`` per step, which is
also HF's ``get_cosine_schedule_with_warmup`` when ``start_lr = min_lr = 0`` and the cycle is
``max_steps − warmup_steps``; gradients clipped to ``grad_clip_norm``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from functools import partial
from typing import Any

import pytorch_lightning as pl
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from lightning_modules.errors import InputError
from lightning_modules.families.pushdown.attachment_head import AttachmentHead
from lightning_modules.families.pushdown.attention import Extend, PushdownSelfAttention, causal_mask
from lightning_modules.families.pushdown.decoding import DecodingBuffers, DecodingState
from lightning_modules.families.pushdown.packing import pack
from lightning_modules.families.pushdown.score_function import PushdownPattern
from lightning_modules.layers.relative_attention import FLEX_MIN_HEAD_DIM, fits_flex
from lightning_modules.models.config_fields import checked_values
from lightning_modules.models.lr_schedule import stepwise_scheduler
from lightning_modules.models.optimisation import ScheduledClipping
from lightning_modules.models.seed_stack import StackedForm

FAMILIES = ("pushdown", "base-lm")
ATTENTION_PATHS = ("blocks", "dense", "flex", "auto")
# where a sentence ends: ``eos`` (synbench's training and scoring: predicting <eos> ends it, whose attachment is
# not scored) or ``official`` (the official code's: <eos> is read too, log p(</s> | ..., <eos>) and <eos>'s
# attachment to <s> are counted; the vocabulary has ``</s>``: imported official checkpoints, ``synbench import``)
SENTENCE_ENDS = ("eos", "official")


def batch_field(batch: Any, name: str) -> Tensor | None:
    """``batch[name]`` for a mapping, ``batch.name`` otherwise (``pushdown_data.PushdownBatch``); None for a
    field the batch does not have (``segments`` outside packed seed groups)."""
    return batch.get(name) if isinstance(batch, Mapping) else getattr(batch, name, None)


@dataclass(frozen=True)
class PushdownConfig:
    """Architecture and optimisation (defaults: BLLIP with TG's hyper-parameters, all 16 layers Pushdown)."""

    vocab_size: int = 32768
    d_model: int = 1024
    n_layers: int = 16
    n_heads: int = 8
    d_ff: int = 4096
    pushdown_layers: int = -1  # -1: all blocks; k >= 0: the last k blocks (0 = Base-LM)
    depth_vocab: int = 50  # depth embedding rows (official max_depth); larger depths are clamped
    attachment_loss: bool = True  # build the attachment head and train it (required for pushdown)
    attachment_loss_weight: float = 1.0
    attachment_depth_dim: int = 128  # size of the head's depth embedding (official: d_model / 8)
    dropout: float = 0.1  # attention weights, residual branches, FFN hidden
    embedding_dropout: float = 0.1
    output_dropout: float = 0.1
    attachment_dropout: float = 0.1  # inside the attachment head's MLPs (official: fixed 0.1)
    # blocks (the block-causal loop) | dense (the score function as a [B, H, T, T] bias) | flex
    # (FlexAttention, compiled on CUDA; cannot drop attention weights) | auto (flex on CUDA unless attention
    # weights drop, else blocks): equal up to float rounding (``score_function``)
    attention: str = "blocks"
    peak_lr: float = 1.5e-4
    start_lr: float = 1e-7
    min_lr: float = 3e-7
    warmup_steps: int = 8000
    total_steps: int = 100_000  # the cosine cycle, counted from the end of the warm-up
    adam_beta1: float = 0.9
    adam_beta2: float = 0.999
    adam_eps: float = 1e-8
    grad_clip_norm: float = 3.0
    sentence_end: str = "eos"  # SENTENCE_ENDS: official = imported checkpoints' scoring convention

    @property
    def n_pushdown(self) -> int:
        """Number of Pushdown Layers."""
        return self.n_layers if self.pushdown_layers < 0 else self.pushdown_layers

    def validate(self, prefix: str = "model.", family: str | None = None) -> PushdownConfig:
        """Raise ``InputError`` naming the config key at the first impossible value; return self."""

        def bad(key: str, message: str) -> InputError:
            return InputError(f"{message} (got {getattr(self, key)!r})", f"{prefix}{key}")

        for key in ("vocab_size", "d_model", "n_layers", "n_heads", "d_ff", "depth_vocab",
                    "attachment_depth_dim", "total_steps"):
            if getattr(self, key) < 1:
                raise bad(key, "must be positive")
        if self.d_model % self.n_heads or (self.d_model // self.n_heads) % 2:
            raise bad("n_heads", f"must divide d_model={self.d_model} into heads of even size")
        if self.d_model % 2:
            raise bad("d_model", "must be even (sinusoidal positions)")
        if not -1 <= self.pushdown_layers <= self.n_layers:
            raise bad("pushdown_layers", f"must be -1 (all) or between 0 and n_layers={self.n_layers}")
        for key in ("dropout", "embedding_dropout", "output_dropout", "attachment_dropout"):
            if not 0.0 <= getattr(self, key) < 1.0:
                raise bad(key, "must be in [0, 1)")
        for key in ("peak_lr", "start_lr", "min_lr", "attachment_loss_weight", "warmup_steps", "adam_eps",
                    "grad_clip_norm"):
            if getattr(self, key) < 0:
                raise bad(key, "must be >= 0")
        for key in ("adam_beta1", "adam_beta2"):
            if not 0.0 <= getattr(self, key) < 1.0:
                raise bad(key, "must be in [0, 1)")
        if self.sentence_end not in SENTENCE_ENDS:
            raise bad("sentence_end", f"must be one of {', '.join(SENTENCE_ENDS)}")
        if self.attention not in ATTENTION_PATHS:
            raise bad("attention", f"must be one of {', '.join(ATTENTION_PATHS)}")
        if self.attention == "flex" and self.dropout > 0:
            raise bad("attention", "flex cannot drop attention weights; set dropout=0 or use blocks|dense")
        if self.attention == "flex" and not fits_flex(self.d_model, self.n_heads):
            raise bad("attention", f"flex needs heads of >= {FLEX_MIN_HEAD_DIM} dimensions (FlexAttention's "
                      f"compiled kernel); d_model / n_heads = {self.d_model // self.n_heads}: use blocks|dense")
        if family is not None and family not in FAMILIES:
            raise InputError(f"unknown family {family!r} (known: {', '.join(FAMILIES)})", "family")
        if family == "pushdown" and self.n_pushdown == 0:
            raise bad("pushdown_layers", "a Pushdown-LM needs at least one Pushdown Layer (-1 = all)")
        if family == "pushdown" and not self.attachment_loss:
            raise bad("attachment_loss", "a Pushdown-LM predicts its stack tape: the attachment head is required")
        if family == "base-lm" and self.n_pushdown != 0:
            raise bad("pushdown_layers", "a Base-LM has plain attention: set 0")
        return self


def config_from_dict(config: Mapping[str, Any], prefix: str = "model.", family: str | None = None
                     ) -> PushdownConfig:
    """A validated config from a flat mapping (a YAML preset); unknown keys and wrong types are errors."""
    values = checked_values(PushdownConfig, config, prefix)
    return PushdownConfig(**values).validate(prefix, family)


def build(config: Mapping[str, Any] | PushdownConfig, family: str = "pushdown") -> PushdownLM:
    """The LightningModule of ``family`` for a config (a ``PushdownConfig`` or a flat dict of its fields)."""
    cfg = config if isinstance(config, PushdownConfig) else config_from_dict(config, family=family)
    return PushdownLM(cfg.validate(family=family), family)


def parameter_count(module: nn.Module) -> int:
    """Number of trainable parameters (tied embeddings counted once)."""
    return sum(p.numel() for p in module.parameters() if p.requires_grad)


def parameter_breakdown(module: PushdownLM) -> dict[str, int]:
    """Parameters per part: embedding (tied), output bias, attention, depth embeddings, FFN, norms, head."""
    parts = {"embedding": module.embedding.weight.numel(), "output_bias": module.output_bias.numel(),
             "attention": 0, "depth_embedding": 0, "ffn": 0, "layer_norm": 0,
             "attachment_head": 0 if module.attachment_head is None else parameter_count(module.attachment_head)}
    for block in module.blocks:
        depth = 0 if block.attention.depth is None else block.attention.depth.weight.numel()
        parts["attention"] += parameter_count(block.attention) - depth
        parts["depth_embedding"] += depth
        parts["ffn"] += parameter_count(block.inner) + parameter_count(block.outer)
        parts["layer_norm"] += parameter_count(block.ln1) + parameter_count(block.ln2)
    return parts


class Block(nn.Module):
    """One post-LN Transformer block with a (Pushdown) self-attention and a ReLU FFN."""

    def __init__(self, d_model: int, n_heads: int, d_ff: int, dropout: float, depth_vocab: int | None):
        super().__init__()
        self.attention = PushdownSelfAttention(d_model, n_heads, dropout, depth_vocab)
        self.inner = nn.Linear(d_model, d_ff)
        self.outer = nn.Linear(d_ff, d_model)
        self.ln1 = nn.LayerNorm(d_model)
        self.ln2 = nn.LayerNorm(d_model)
        self.dropout = nn.Dropout(dropout)
        nn.init.xavier_uniform_(self.inner.weight, gain=nn.init.calculate_gain("relu"))
        nn.init.xavier_uniform_(self.outer.weight)

    def forward(self, h: Tensor, mask: Tensor, tape: Tensor | None, pattern: PushdownPattern | None = None
                ) -> Tensor:
        h = self.ln1(h + self.dropout(self.attention(h, mask, tape, pattern)))
        return self.ln2(h + self.dropout(self.outer(self.dropout(F.relu(self.inner(h))))))

    def step(self, h: Tensor, extend: Extend, rel_keys: Tensor, tape_row: Tensor | None) -> Tensor:
        """``forward`` for the newest position only (decoding): h [N, 1, D]; ``extend`` stores its keys and
        values and returns the hypotheses' cached ones (``PushdownSelfAttention.step``)."""
        h = self.ln1(h + self.attention.step(h, extend, rel_keys, tape_row))
        return self.ln2(h + self.outer(F.relu(self.inner(h))))


def _pushdown_terms(module: Any, chunks: Any) -> tuple[Tensor, Tensor, Tensor]:
    """Pushdown-LM / Base-LM: the joint loss (LM mean + weight x attachment mean); validation NLL the LM's plus,
    for Pushdown-LM, the attachments', per LM token (``PushdownLM.validation_step``)."""
    terms = module.loss_terms(chunks[0])
    total = terms["lm_nll"] + (terms["attachment_nll"] if module.family == "pushdown" else 0.0)
    return module.joint_loss(terms), total, terms["lm_count"]


class PushdownLM(ScheduledClipping, pl.LightningModule):
    """Pushdown-LM / Base-LM: forward, joint loss, optimisation, and the step API for beam search."""

    # seeds as one SeedStack: the batch fields (``batch.collate``) with their padding values, and the loss terms
    # (packed: ``packing.pack``, several sentences to a row, ``segments`` telling them apart)
    seed_stack_form = StackedForm({"inputs": 0, "targets": 0, "attachment": 0, "tape": 0, "lengths": 0,
                                   "segments": 0}, _pushdown_terms, pack)

    def __init__(self, config: PushdownConfig | Mapping[str, Any], family: str = "pushdown"):
        super().__init__()
        self.config = c = (config if isinstance(config, PushdownConfig)
                           else config_from_dict(config, family=family)).validate(family=family)
        self.family = family
        self.save_hyperparameters({"config": asdict(c), "family": family})
        self.embedding = nn.Embedding(c.vocab_size, c.d_model)
        self.output_bias = nn.Parameter(torch.zeros(c.vocab_size))
        first_pushdown = c.n_layers - c.n_pushdown
        self.blocks = nn.ModuleList(
            Block(c.d_model, c.n_heads, c.d_ff, c.dropout, c.depth_vocab if k >= first_pushdown else None)
            for k in range(c.n_layers)
        )
        self.embedding_dropout = nn.Dropout(c.embedding_dropout)
        self.output_dropout = nn.Dropout(c.output_dropout)
        self.attachment_head = (AttachmentHead(c.d_model, c.depth_vocab, c.attachment_depth_dim,
                                               c.attachment_dropout) if c.attachment_loss else None)
        nn.init.xavier_uniform_(self.embedding.weight)

    # ---- forward -------------------------------------------------------------------------------------------
    def attention_path(self, device: torch.device) -> str:
        """The attention path of this call: as configured, ``auto`` = flex on CUDA unless weights drop or the
        heads are too narrow for FlexAttention's kernel."""
        c = self.config
        if c.attention != "auto":
            return c.attention
        dropping = self.training and c.dropout > 0
        return "flex" if device.type == "cuda" and not dropping and fits_flex(c.d_model, c.n_heads) else "blocks"

    def hidden_states(self, inputs: Tensor, tape: Tensor | None, lengths: Tensor, segments: Tensor | None = None
                      ) -> Tensor:
        """Final-layer states [B, T, D] of ``inputs`` [B, T] (``<s>`` first) under tape [B, T, T]; ``segments``
        [B, T] (packed rows, ``packing``): a query sees only keys of its own segment (an unused slot, 0, sees what
        a padding position sees)."""
        mask = causal_mask(lengths, inputs.shape[1])
        if segments is not None:  # unused slots (0) keep the causal rule, as padding does
            mask = mask & ((segments[:, :, None] == segments[:, None, :]) | (segments == 0)[:, :, None])
        path = self.attention_path(inputs.device)
        pattern = None
        if path != "blocks":  # one block mask and tape index for all layers
            depth_vocab = self.config.depth_vocab if self.config.n_pushdown else None
            pattern = PushdownPattern.build(mask, tape, depth_vocab, flex=path == "flex", compiled=inputs.is_cuda)
        h = self.embedding_dropout(self.embedding(inputs) * math.sqrt(self.config.d_model))
        for block in self.blocks:
            h = block(h, mask, tape, pattern)
        return h

    def word_logits(self, h: Tensor) -> Tensor:
        return F.linear(self.output_dropout(h), self.embedding.weight, self.output_bias)

    def forward(self, batch: Any) -> tuple[Tensor, Tensor | None]:
        """Word logits [B, T, V] and attachment logits [B, T, T + 1] (None without the head)."""
        tape, lengths = batch_field(batch, "tape"), batch_field(batch, "lengths")
        segments = batch_field(batch, "segments")
        h = self.hidden_states(batch_field(batch, "inputs"), tape, lengths, segments)
        attach = None
        if self.attachment_head is not None:
            attach = self.attachment_head(h, self.embedding(batch_field(batch, "targets")), tape, lengths,
                                          segments=segments)
        return self.word_logits(h), attach

    def loss_terms(self, batch: Any) -> dict[str, Tensor]:
        """Summed NLLs and counts: ``lm_nll, lm_count, attachment_nll, attachment_count, attachment_correct``."""
        word_logits, attach_logits = self(batch)
        targets = batch_field(batch, "targets")
        lm_nll = F.cross_entropy(word_logits.flatten(0, 1).float(), targets.flatten(), ignore_index=0,
                                 reduction="sum")
        out = {"lm_nll": lm_nll, "lm_count": (targets != 0).sum()}
        labels = batch_field(batch, "attachment")
        if attach_logits is None:
            zero = lm_nll.new_zeros(())
            out.update(attachment_nll=zero, attachment_count=torch.zeros_like(out["lm_count"]),
                       attachment_correct=torch.zeros_like(out["lm_count"]))
            return out
        flat = attach_logits.flatten(0, 1).float()
        out["attachment_nll"] = F.cross_entropy(flat, labels.flatten(), ignore_index=0, reduction="sum")
        out["attachment_count"] = (labels != 0).sum()
        out["attachment_correct"] = ((flat.argmax(-1) == labels.flatten()) & (labels.flatten() != 0)).sum()
        return out

    def joint_loss(self, terms: Mapping[str, Tensor]) -> Tensor:
        """Mean LM CE + weight × mean attachment CE (the official training objective)."""
        loss = terms["lm_nll"] / terms["lm_count"].clamp(min=1)
        if self.attachment_head is not None:
            weight = self.config.attachment_loss_weight
            loss = loss + weight * terms["attachment_nll"] / terms["attachment_count"].clamp(min=1)
        return loss

    # ---- scoring and search --------------------------------------------------------------------------------
    @torch.no_grad()
    def gold_logprobs(self, batch: Any) -> tuple[Tensor, Tensor]:
        """Per position: log p(target | prefix, gold tape) [B, T] and log p(gold attachment) [B, T]; 0 where
        nothing is predicted (padding; the ``<eos>`` attachment; every attachment without the head)."""
        word_logits, attach_logits = self(batch)
        targets, labels = batch_field(batch, "targets"), batch_field(batch, "attachment")
        words = word_logits.float().log_softmax(-1).gather(-1, targets[..., None]).squeeze(-1)
        words = words.masked_fill(targets == 0, 0.0)
        if attach_logits is None:
            return words, torch.zeros_like(words)
        attach = attach_logits.float().log_softmax(-1).gather(-1, labels[..., None]).squeeze(-1)
        return words, attach.masked_fill(labels == 0, 0.0)

    @torch.no_grad()
    def start(self, max_length: int) -> DecodingState:
        """An empty decoding state for sequences of at most ``max_length`` positions (``<s>`` included)."""
        like, c = self.embedding.weight, self.config
        head = self.attachment_head
        depth_features = like.new_empty((0, 0)) if head is None else head.depth_features()
        buffers = DecodingBuffers(max_length, len(self.blocks), c.n_heads, c.d_model // c.n_heads, c.d_model,
                                  depth_features, like)
        rel_keys = [block.attention.relative_keys(max_length, like) for block in self.blocks]
        return DecodingState(buffers, 0, None, rel_keys)

    @torch.no_grad()
    def step(self, state: DecodingState, tokens: Tensor, tape_row: Tensor, next_words: Tensor
             ) -> tuple[Tensor, Tensor | None, DecodingState]:
        """Read one more position t for N hypotheses and score what follows it (word-synchronous decoding).

        ``tokens`` [N] the token at position t (``<s>`` at t = 0); ``tape_row`` [N, t + 1] the depth tape row
        of position t (``StackStates.depth`` after token t); ``next_words`` [N] the token x_{t+1} being scored.
        Returns log p(· | prefix, tape) [N, V] for x_{t+1}, log p(r_{t+1} = c) [N, t + 2] over c = 0..t
        (reduce with token c) and t + 1 (shift), normalised over all t + 2 columns like the official search
        (which then sets reduced positions to -inf without renormalising; apply ``StackStates.legal`` the same
        way; None without the head), and the new state. Equal to the training forward on the whole prefix
        with each position's own tape row (tested), at O(t) per step instead of O(t²): a position's keys and
        values depend only on the tokens and tape rows up to its own, so they are computed once and cached in
        preallocated buffers (``decoding``: nothing allocated per position; a reorder copies each survivor's
        keys and values once and the head's cached features not at all).
        """
        count = tokens.shape[0]
        state = state.extended(count)
        buffers, position = state.buffers, state.length - 1
        h = self.embedding(tokens)[:, None] * math.sqrt(self.config.d_model)  # [N, 1, D]
        for index, (block, rel_keys) in enumerate(zip(self.blocks, state.rel_keys)):
            extend = partial(buffers.extend_keys, state.live, index, position)
            h = block.step(h, extend, rel_keys, tape_row if block.attention.is_pushdown else None)
        h = h[:, 0]
        words = self.word_logits(h).float().log_softmax(-1)
        head = self.attachment_head
        buffers.write(position, h, None if head is None else head.key_features(h))
        if head is None:
            return words, None, state
        attach = head.step(h, self.embedding(next_words), buffers.features, buffers.feature_rows(state.slots),
                           tape_row)
        return words, attach.float().log_softmax(-1), state

    # ---- Lightning hooks -----------------------------------------------------------------------------------
    def training_step(self, batch: Any, batch_idx: int) -> Tensor:
        terms = self.loss_terms(batch)
        loss = self.joint_loss(terms)
        tokens = int(terms["lm_count"])
        self.log("train/loss", loss, prog_bar=True, batch_size=tokens)
        self.log("train/lm_loss", terms["lm_nll"] / max(tokens, 1), batch_size=tokens)
        if self.attachment_head is not None:
            n = max(int(terms["attachment_count"]), 1)
            self.log("train/attachment_loss", terms["attachment_nll"] / n, batch_size=n)
        return loss

    def validation_step(self, batch: Any, batch_idx: int) -> None:
        terms = self.loss_terms(batch)
        tokens = int(terms["lm_count"])
        total = terms["lm_nll"] + (terms["attachment_nll"] if self.family == "pushdown" else 0.0)
        if tokens:  # weighted by tokens, the epoch mean is the exact per-token NLL
            self.log("val/loss", total / tokens, prog_bar=True, batch_size=tokens, on_epoch=True)
        for key in ("lm_nll", "attachment_nll", "attachment_correct", "attachment_count", "lm_count"):
            self.log(f"val/{key}", terms[key].float(), reduce_fx="sum", on_epoch=True, batch_size=1)

    def configure_optimizers(self) -> dict[str, Any]:
        c = self.config
        optimizer = torch.optim.Adam(self.parameters(), lr=c.peak_lr, betas=(c.adam_beta1, c.adam_beta2),
                                     eps=c.adam_eps)
        return {"optimizer": optimizer, "lr_scheduler": stepwise_scheduler(optimizer, c)}

