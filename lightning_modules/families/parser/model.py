"""The proposal parser q(y | x): a Transformer encoder–decoder that reads the words and writes the tree.

"Grammar as a foreign language" (Vinyals et al. 2015) with the word actions forced: the encoder reads the
sentence (words or pieces), the decoder generates the actions of ``data/families/parser/encoding.py`` (open a
labelled constituent, SHIFT the next word, close the constituent on top), and the softmax is restricted to
the actions that keep the prefix a tree over exactly the input words. So ``q(y | x)`` is a proper
distribution over the trees of x, and the training loss is ``-log q(y_gold | x)`` per action.

At every step the decoder input is the previous action's embedding, plus the encoder's representation of
the word at the buffer front (the next word SHIFT would move; a learned vector once all are shifted), plus a
sinusoidal position. Everything else the decoder learns from cross-attention. Pre-LayerNorm blocks; the
action embedding is tied with the output layer.

Search (greedy, beam, stochastic beam) lives in ``experiments/evaluate/proposals.py``; this module offers
``encode`` (once per sentence) and ``step`` (one action for many rows, with a key/value cache).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

import pytorch_lightning as pl
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from lightning_modules.errors import InputError
from lightning_modules.families.parser.packing import pack
from lightning_modules.layers.folded_attention import attention
from lightning_modules.models.config_fields import checked_values
from lightning_modules.models.lr_schedule import stepwise_scheduler
from lightning_modules.models.optimisation import ScheduledClipping
from lightning_modules.models.seed_stack import StackedForm


@dataclass(frozen=True)
class ParserConfig:
    """Architecture and optimisation. The two vocabulary sizes are set from the data by the family."""

    source_vocab_size: int = 1  # encoder ids (0 = padding)
    action_vocab_size: int = 5  # decoder actions (encodings.parser.ParserVocab)
    d_model: int = 256
    n_encoder_layers: int = 4
    n_decoder_layers: int = 4
    n_heads: int = 8
    d_ff: int = 1024
    dropout: float = 0.1
    max_depth: int = 100  # open constituents at most (RNNG's limit on open nonterminals is 100)
    peak_lr: float = 5e-4
    start_lr: float = 1e-7
    min_lr: float = 1e-6
    warmup_steps: int = 1000
    total_steps: int = 50_000
    adam_beta1: float = 0.9
    adam_beta2: float = 0.98
    weight_decay: float = 0.01
    grad_clip_norm: float = 1.0

    def validate(self, prefix: str = "model.") -> ParserConfig:
        for key in ("source_vocab_size", "action_vocab_size", "d_model", "n_encoder_layers", "n_decoder_layers",
                    "n_heads", "d_ff", "max_depth", "total_steps"):
            if getattr(self, key) < 1:
                raise InputError(f"must be positive (got {getattr(self, key)!r})", f"{prefix}{key}")
        if self.d_model % self.n_heads:
            raise InputError(f"must divide d_model={self.d_model}", f"{prefix}n_heads")
        if not 0.0 <= self.dropout < 1.0:
            raise InputError(f"must be in [0, 1) (got {self.dropout!r})", f"{prefix}dropout")
        for key in ("warmup_steps", "peak_lr", "start_lr", "min_lr", "weight_decay"):
            if getattr(self, key) < 0:
                raise InputError(f"must be >= 0 (got {getattr(self, key)!r})", f"{prefix}{key}")
        return self


def config_from_dict(config: Mapping[str, Any], prefix: str = "model.") -> ParserConfig:
    """A validated ``ParserConfig`` from a flat mapping; unknown keys and wrong types are errors."""
    values = checked_values(ParserConfig, config, prefix)
    return ParserConfig(**values).validate(prefix)


def build(config: Mapping[str, Any] | ParserConfig) -> ProposalParser:
    cfg = config if isinstance(config, ParserConfig) else config_from_dict(config)
    return ProposalParser(cfg.validate())


def sinusoid(length: int, dim: int, device: torch.device) -> Tensor:
    """[length, dim] sinusoidal positions (Vaswani et al. 2017)."""
    pos = torch.arange(length, device=device, dtype=torch.float32)[:, None]
    freq = torch.exp(torch.arange(0, dim, 2, device=device, dtype=torch.float32) * (-math.log(10000.0) / dim))
    out = torch.zeros(length, dim, device=device)
    out[:, 0::2] = torch.sin(pos * freq)
    out[:, 1::2] = torch.cos(pos * freq)[:, : dim // 2]
    return out


class Attention(nn.Module):
    """Multi-head attention: queries from ``x``, keys and values from ``kv_source`` (or given k, v)."""

    def __init__(self, d_model: int, n_heads: int, dropout: float):
        super().__init__()
        self.n_heads = n_heads
        self.q = nn.Linear(d_model, d_model)
        self.kv = nn.Linear(d_model, 2 * d_model)
        self.out = nn.Linear(d_model, d_model)
        self.dropout = dropout

    def heads(self, x: Tensor) -> Tensor:  # [B, T, D] -> [B, H, T, D/H]
        return x.view(*x.shape[:2], self.n_heads, -1).transpose(1, 2)

    def keys_values(self, source: Tensor) -> tuple[Tensor, Tensor]:
        k, v = self.kv(source).chunk(2, dim=-1)
        return self.heads(k), self.heads(v)

    def attend(self, x: Tensor, k: Tensor, v: Tensor, mask: Tensor | None = None, causal: bool = False) -> Tensor:
        q = self.heads(self.q(x))
        y = attention(q, k, v, attn_mask=mask, is_causal=causal,  # SDPA; seeds folded under vmap
                      dropout_p=self.dropout if self.training else 0.0)
        return self.out(y.transpose(1, 2).flatten(2))


class FeedForward(nn.Module):
    def __init__(self, d_model: int, d_ff: int, dropout: float):
        super().__init__()
        self.fc = nn.Linear(d_model, d_ff)
        self.proj = nn.Linear(d_ff, d_model)
        self.drop = nn.Dropout(dropout)

    def forward(self, x: Tensor) -> Tensor:
        return self.drop(self.proj(F.gelu(self.fc(x))))


class EncoderBlock(nn.Module):
    def __init__(self, c: ParserConfig):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(c.d_model), nn.LayerNorm(c.d_model)
        self.attn = Attention(c.d_model, c.n_heads, c.dropout)
        self.ffn = FeedForward(c.d_model, c.d_ff, c.dropout)
        self.drop = nn.Dropout(c.dropout)

    def forward(self, x: Tensor, key_mask: Tensor) -> Tensor:
        h = self.ln1(x)
        x = x + self.drop(self.attn.attend(h, *self.attn.keys_values(h), mask=key_mask))
        return x + self.ffn(self.ln2(x))


class DecoderBlock(nn.Module):
    """Causal self-attention, cross-attention to the encoder, feed-forward."""

    def __init__(self, c: ParserConfig):
        super().__init__()
        self.ln1, self.ln2, self.ln3 = (nn.LayerNorm(c.d_model) for _ in range(3))
        self.self_attn = Attention(c.d_model, c.n_heads, c.dropout)
        self.cross_attn = Attention(c.d_model, c.n_heads, c.dropout)
        self.ffn = FeedForward(c.d_model, c.d_ff, c.dropout)
        self.drop = nn.Dropout(c.dropout)

    def forward(self, x: Tensor, memory: tuple[Tensor, Tensor], memory_mask: Tensor,
                cache: list[Tensor] | None = None, self_mask: Tensor | None = None) -> Tensor:
        """``x`` [B, Q, D]. Training: Q decoder steps of B sentences (causal, or ``self_mask`` [B, 1, Q, Q]
        for packed rows). Search: one step of Q rows per sentence, each row with its own past keys/values in
        ``cache`` ([B*Q, H, t, D/H], updated)."""
        h = self.ln1(x)
        if cache is None:
            x = x + self.drop(self.self_attn.attend(h, *self.self_attn.keys_values(h), mask=self_mask,
                                                    causal=self_mask is None))
        else:
            rows = h.reshape(-1, 1, h.shape[-1])  # [B*Q, 1, D]: every row is its own sequence
            k, v = self.self_attn.keys_values(rows)
            cache[0] = k = torch.cat([cache[0], k], dim=2)
            cache[1] = v = torch.cat([cache[1], v], dim=2)
            x = x + self.self_attn.attend(rows, k, v).view_as(x)
        x = x + self.drop(self.cross_attn.attend(self.ln2(x), *memory, mask=memory_mask))
        return x + self.ffn(self.ln3(x))


@dataclass
class Encoded:
    """What the decoder needs from the encoder, per sentence: words and per-layer cross keys/values."""

    words: Tensor  # [B, W, D] representation of each word (its first piece)
    n_words: Tensor  # [B]
    memory: list[tuple[Tensor, Tensor]]  # per decoder layer: cross-attention keys and values
    memory_mask: Tensor  # [B, 1, 1, S] True where a source position exists


def _within(queries: Tensor, keys: Tensor) -> Tensor:
    """[B, 1, Q, K] attention mask of packed rows: a query sees the keys of its own sentence (segment ids
    ``queries`` [B, Q], ``keys`` [B, K], from 1); an unused slot (0) sees every key, so none is without keys."""
    return ((queries[:, :, None] == keys[:, None, :]) | (queries == 0)[:, :, None])[:, None]


def _parser_terms(module: Any, chunks: Any) -> tuple[Tensor, Tensor, Tensor]:
    """Proposal parsers (constituency and dependency): mean -log q per gold action, validation likewise."""
    nll, count, _ = module.loss_terms(chunks[0])
    return nll / count.clamp(min=1), nll, count


class ProposalParser(ScheduledClipping, pl.LightningModule):
    """Encoder–decoder parser; ``training_step`` minimises -log q(y_gold | x) per action."""

    # seeds as one SeedStack: the batch fields with their padding values (a padded step's mask allows every
    # action: a finite softmax whose target 0 is ignored) and the loss terms
    # (packed: ``packing.pack``, several sentences to a row, segments and positions telling them apart)
    seed_stack_form = StackedForm({"source": 0, "word_first": 0, "n_words": 0, "inputs": 0, "actions": 0, "front": 0,
                                   "mask": True, "positions": 0, "segments": 0, "source_positions": 0,
                                   "source_segments": 0}, _parser_terms, pack)

    def __init__(self, config: ParserConfig):
        super().__init__()
        self.config = config
        self.save_hyperparameters({"config": {f.name: getattr(config, f.name) for f in fields(config)}})
        c = config
        self.source_embedding = nn.Embedding(c.source_vocab_size, c.d_model, padding_idx=0)
        self.action_embedding = nn.Embedding(c.action_vocab_size, c.d_model)
        self.buffer = nn.Linear(c.d_model, c.d_model)
        self.empty_buffer = nn.Parameter(torch.zeros(c.d_model))
        self.encoder = nn.ModuleList(EncoderBlock(c) for _ in range(c.n_encoder_layers))
        self.encoder_norm = nn.LayerNorm(c.d_model)
        self.decoder = nn.ModuleList(DecoderBlock(c) for _ in range(c.n_decoder_layers))
        self.decoder_norm = nn.LayerNorm(c.d_model)
        self.drop = nn.Dropout(c.dropout)
        self.apply(self._init)

    @staticmethod
    def _init(module: nn.Module) -> None:
        if isinstance(module, nn.Linear | nn.Embedding):
            nn.init.normal_(module.weight, std=0.02)
        if isinstance(module, nn.Linear) and module.bias is not None:
            nn.init.zeros_(module.bias)

    # ---- the network ---------------------------------------------------------------------------------------
    def encode(self, source: Tensor, word_first: Tensor, n_words: Tensor, positions: Tensor | None = None,
               segments: Tensor | None = None) -> Encoded:
        """Run the encoder over ``source`` [B, S] (0 = padding) once per sentence. Packed rows
        (``packing``): ``positions`` [B, S] restart with every sentence and ``segments`` [B, S] keep a
        query's keys within its sentence (an unused slot, 0, sees the whole row: no query without keys)."""
        key_mask = (source != 0)[:, None, None, :]
        table = sinusoid(source.shape[1], self.config.d_model, source.device)
        x = self.source_embedding(source) + (table if positions is None else table[positions])
        x = self.drop(x)
        self_mask = key_mask if segments is None else _within(segments, segments)
        for block in self.encoder:
            x = block(x, self_mask)
        x = self.encoder_norm(x)
        words = x.gather(1, word_first[..., None].expand(-1, -1, x.shape[-1]))
        memory = [block.cross_attn.keys_values(x) for block in self.decoder]
        return Encoded(words, n_words, memory, key_mask)

    def decoder_input(self, enc: Encoded, prev: Tensor, front: Tensor, position: Tensor,
                      length: int | None = None) -> Tensor:
        """Embedding of the previous action + the buffer-front word (``front`` [B, Q] word index, n = empty)
        + the position (a tensor of step indices broadcastable to [B, Q], all below ``length`` if given: no
        host read of a tensor, as under vmap)."""
        index = front.clamp(max=enc.words.shape[1] - 1)
        word = enc.words.gather(1, index[..., None].expand(-1, -1, enc.words.shape[-1]))
        empty = (front >= enc.n_words[:, None])[..., None]
        buffer = torch.where(empty, self.empty_buffer, self.buffer(word))
        size = int(position.max()) + 1 if length is None else length
        table = sinusoid(size, self.config.d_model, prev.device)
        return self.drop(self.action_embedding(prev) + buffer + table[position])

    def logits(self, x: Tensor) -> Tensor:
        return self.decoder_norm(x) @ self.action_embedding.weight.T

    def forward(self, batch: Mapping[str, Tensor]) -> Tensor:
        """Teacher-forced action logits [B, T, V] (unmasked)."""
        segments = batch.get("segments")  # packed seed-group rows (``packing``): several sentences to a row
        enc = self.encode(batch["source"], batch["word_first"], batch["n_words"], batch.get("source_positions"),
                          batch.get("source_segments"))
        positions = batch.get("positions")
        if positions is None:
            positions = torch.arange(batch["inputs"].shape[1], device=self.device)[None, :]
        x = self.decoder_input(enc, batch["inputs"], batch["front"], positions, batch["inputs"].shape[1])
        self_mask, cross_mask = None, enc.memory_mask
        if segments is not None:
            steps = segments.shape[1]
            causal = torch.ones(steps, steps, dtype=torch.bool, device=segments.device).tril()
            self_mask, cross_mask = causal & _within(segments, segments), _within(segments, batch["source_segments"])
        for block, memory in zip(self.decoder, enc.memory, strict=True):
            x = block(x, memory, cross_mask, self_mask=self_mask)
        return self.logits(x)

    def empty_cache(self, rows: int) -> list[list[Tensor]]:
        """Key/value caches of ``rows`` search rows before the first step."""
        c = self.config
        shape = (rows, c.n_heads, 0, c.d_model // c.n_heads)
        return [[self.action_embedding.weight.new_zeros(shape) for _ in range(2)] for _ in self.decoder]

    def step(self, enc: Encoded, prev: Tensor, front: Tensor, position: int, cache: list[list[Tensor]]
             ) -> Tensor:
        """Action log-probabilities' logits [B, Q, V] for Q rows per sentence at step ``position``."""
        x = self.decoder_input(enc, prev, front, torch.tensor(position, device=prev.device))
        for block, memory, layer_cache in zip(self.decoder, enc.memory, cache, strict=True):
            x = block(x, memory, enc.memory_mask, layer_cache)
        return self.logits(x)

    # ---- training ------------------------------------------------------------------------------------------
    def loss_terms(self, batch: Mapping[str, Tensor]) -> tuple[Tensor, Tensor, Tensor]:
        """(summed -log q over gold actions, number of actions, number predicted correctly)."""
        logits = self(batch).float().masked_fill(~batch["mask"], -math.inf)
        actions = batch["actions"]
        nll = F.cross_entropy(logits.flatten(0, 1), actions.flatten(), ignore_index=0, reduction="sum")
        real = actions != 0
        correct = ((logits.argmax(-1) == actions) & real).sum()
        return nll, real.sum(), correct

    def training_step(self, batch: Mapping[str, Tensor], batch_idx: int) -> Tensor:
        nll, count, _ = self.loss_terms(batch)
        loss = nll / count.clamp(min=1)
        self.log("train/loss", loss, prog_bar=True, batch_size=int(count))
        return loss

    def validation_step(self, batch: Mapping[str, Tensor], batch_idx: int) -> None:
        nll, count, correct = self.loss_terms(batch)
        n = int(count)
        if n:
            self.log("val/loss", nll / n, prog_bar=True, batch_size=n, on_epoch=True)
            self.log("val/accuracy", correct.float() / n, batch_size=n, on_epoch=True)

    def configure_optimizers(self) -> dict[str, Any]:
        c = self.config
        optimizer = torch.optim.AdamW(self.parameters(), lr=c.peak_lr, betas=(c.adam_beta1, c.adam_beta2),
                                      weight_decay=c.weight_decay)
        return {"optimizer": optimizer, "lr_scheduler": stepwise_scheduler(optimizer, c)}

