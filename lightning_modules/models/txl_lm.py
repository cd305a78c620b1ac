"""The Transformer-XL core language model as one LightningModule: Transformer Grammars and their
Transformer-XL baselines (TG §2–§3), and the Dependency TG (a subclass in its family's folder).

The families built on it share the network and differ only in the encoding (mask rule, relative positions)
and config, for instance:
  * TG: STACK/COMPOSE mask, relpos = depth difference clipped to [-1, 62], smart memory;
  * TXL (trees): causal mask over Choe–Charniak actions, relpos = i - j (no clipping in range);
  * TXL (terminals): the same over the words alone.
The encodings live with their families (``lightning_modules/families/NAME``); this module only consumes
batches, and does not know which family it serves: a family's adapter builds it and names the checkpoints.

A batch is a list of chunks processed in order, the memory carried across them with stop-gradient. A chunk
is a mapping of tensors, or an object with them as attributes (B sequences, chunk length L, memory M):
  ``inputs`` [B,L] long (0 = PAD), ``labels`` [B,L] long (0 = nothing to predict), ``attn_mask`` [B,L,M+L]
  bool (memory columns first), ``relpos`` [B,L,M+L] long (raw; clipped here), ``mem_src`` [B,M] long (next
  memory slot m = concat(memory, this chunk's layer inputs)[mem_src[m]], -1 = empty), ``reset`` [B] bool (a
  new sequence starts: clear the memory), ``compose`` [B,L] bool (COMPOSE positions; read only with different
  attention functions), optionally ``added`` [B,L] long (ids whose embeddings are added to the inputs': the
  Dependency TG's arc representations).

Loss: cross-entropy summed over positions whose label is not 0, divided by their number (per batch); the output
head runs at those positions alone, a chunk of rows at a time (``lightning_modules.models.labelled_loss``).
Optimisation as the official config: Adam(0.9, 0.999), ``linear_warmup_then_cosine_anneal`` stepped per
optimizer step, gradients clipped to global norm 3.0. Deviation, by design: the official steps once per chunk
of B streams; here one step covers whole sequences (identical when a sequence fits in one chunk).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import pytorch_lightning as pl
import torch
from torch import Tensor

from lightning_modules.data.train_data import TrainData, unigram_nll
from lightning_modules.errors import InputError
from lightning_modules.layers.relative_attention import FLEX_MIN_HEAD_DIM, fits_flex
from lightning_modules.layers.txl_core import TransformerXL
from lightning_modules.models.config_fields import checked_values
from lightning_modules.models.labelled_loss import chunked_nll, labelled_rows
from lightning_modules.models.lr_schedule import stepwise_scheduler
from lightning_modules.models.optimisation import ScheduledClipping, global_token_mean

RELPOS_KINDS = ("delta_depth", "linear", "none")
ATTENTION_PATHS = ("dense", "flex", "auto")

Chunk = Any  # a mapping of the tensors above, or an object with them as attributes (encodings.batch.Batch)


def field(chunk: Chunk, name: str) -> Tensor | None:
    """``chunk[name]`` for a mapping, ``chunk.name`` otherwise; None when absent."""
    if isinstance(chunk, Mapping):
        return chunk.get(name)
    return getattr(chunk, name, None)


@dataclass(frozen=True)
class TGConfig:
    """Architecture and optimisation of one model (defaults: the official large TG config, BLLIP).

    The family is not part of it: the families on this network differ only through these values and the
    encoding.
    """

    vocab_size: int = 32768
    d_model: int = 1024
    n_layers: int = 16
    n_heads: int = 8
    d_ff: int = 4096
    embedding_dropout: float = 0.1  # on token embeddings (then core_dropout hits them again, as the official)
    core_dropout: float = 0.1  # embeddings into the core, attention output, FFN hidden and output
    core_output_dropout: float = 0.1  # before the output projection
    attention_dropout: float = 0.1  # attention weights and the sinusoid table (official: = core dropout)
    relpos: str = "delta_depth"  # delta_depth | linear | none (no position information: no u, v, r_k)
    min_rel: int = -1  # relative positions the table covers; raw values are clipped to [min_rel - 1, max_rel]
    max_rel: int = 62
    segment_length: int = 256  # L (the official masking library needs L == M when M > 0)
    memory_length: int = 256  # M; 0 = no memory
    attention: str = "auto"  # dense | flex | auto (flex on CUDA unless attention weights are dropped)
    use_different_attn_fns: bool = False  # a second attention parameter set at COMPOSE positions
    peak_lr: float = 1.5e-4
    start_lr: float = 1e-7
    min_lr: float = 3e-7
    warmup_steps: int = 8000
    total_steps: int = 100_000  # the cosine cycle, counted from the end of the warm-up (official num_steps)
    adam_beta1: float = 0.9
    adam_beta2: float = 0.999
    grad_clip_norm: float = 3.0

    def validate(self, prefix: str = "model.") -> TGConfig:
        """Raise ``InputError`` at the first impossible value; return self."""

        def bad(key: str, message: str) -> InputError:
            return InputError(f"{message} (got {getattr(self, key)!r})", f"{prefix}{key}")

        if self.relpos not in RELPOS_KINDS:
            raise bad("relpos", f"must be one of {', '.join(RELPOS_KINDS)}")
        if self.attention not in ATTENTION_PATHS:
            raise bad("attention", f"must be one of {', '.join(ATTENTION_PATHS)}")
        for key in ("vocab_size", "d_model", "n_layers", "n_heads", "d_ff", "segment_length", "total_steps"):
            if getattr(self, key) < 1:
                raise bad(key, "must be positive")
        for key in ("memory_length", "warmup_steps"):
            if getattr(self, key) < 0:
                raise bad(key, "must be >= 0")
        if self.d_model % self.n_heads or (self.d_model // self.n_heads) % 2:
            raise bad("n_heads", f"must divide d_model={self.d_model} into heads of even size")
        for key in ("embedding_dropout", "core_dropout", "core_output_dropout", "attention_dropout"):
            if not 0.0 <= getattr(self, key) < 1.0:
                raise bad(key, "must be in [0, 1)")
        if self.min_rel > self.max_rel:
            raise bad("min_rel", f"must be <= max_rel={self.max_rel}")
        if self.memory_length and self.memory_length != self.segment_length:
            raise bad("memory_length", f"must equal segment_length={self.segment_length} (or be 0)")
        if self.attention == "flex" and self.attention_dropout > 0:
            raise bad("attention", "flex cannot drop attention weights; set attention_dropout=0 or use dense")
        if self.attention == "flex" and not fits_flex(self.d_model, self.n_heads):
            raise bad("attention", f"flex needs heads of >= {FLEX_MIN_HEAD_DIM} dimensions (FlexAttention's "
                      f"compiled kernel); d_model / n_heads = {self.d_model // self.n_heads}: use dense")
        for key in ("peak_lr", "start_lr", "min_lr"):
            if getattr(self, key) < 0:
                raise bad(key, "must be >= 0")
        return self


def config_from_dict(config: Mapping[str, Any], prefix: str = "model.") -> TGConfig:
    """A validated ``TGConfig`` from a flat mapping (a YAML preset); unknown keys, wrong types are errors."""
    values = checked_values(TGConfig, config, prefix)
    return TGConfig(**values).validate(prefix)


def build(config: Mapping[str, Any] | TGConfig) -> TransformerGrammarLM:
    """The LightningModule for a config (a ``TGConfig`` or a flat dict of its fields)."""
    cfg = config if isinstance(config, TGConfig) else config_from_dict(config)
    return TransformerGrammarLM(cfg.validate())


def parameter_count(module: torch.nn.Module) -> int:
    """Number of trainable parameters (tied embeddings counted once)."""
    return sum(p.numel() for p in module.parameters() if p.requires_grad)


def parameter_breakdown(module: TransformerGrammarLM) -> dict[str, int]:
    """Parameters per part: embedding (tied with the output), output bias, attention, FFN, layer norms; a
    parameter shared between layers (the Dependency TG's u, v) is counted once."""
    net = module.network
    parts = {"embedding": net.embedding.weight.numel(), "output_bias": net.output_bias.numel(),
             "attention": 0, "ffn": 0, "layer_norm": 0}
    seen: set[int] = set()

    def count(part: torch.nn.Module) -> int:
        new = [p for p in part.parameters() if p.requires_grad and id(p) not in seen]
        seen.update(id(p) for p in new)
        return sum(p.numel() for p in new)

    for layer in net.layers:
        parts["attention"] += count(layer.attentions)
        parts["ffn"] += count(layer.ffn)
        parts["layer_norm"] += count(layer.ln1) + count(layer.ln2)
    return parts


class TransformerGrammarLM(ScheduledClipping, pl.LightningModule):
    """TG / TXL (trees) / TXL (terminals): forward over chunks, loss, optimisation, token log-probs."""

    compiled_parts = ("network",)  # what ``runtime.compile`` compiles (lightning_modules.models.compiled)

    def __init__(self, config: TGConfig | Mapping[str, Any]):
        super().__init__()
        self.config = config if isinstance(config, TGConfig) else config_from_dict(config)
        self.save_hyperparameters({"config": asdict(self.config)})
        c = self.config
        self.network = TransformerXL(
            vocab_size=c.vocab_size, d_model=c.d_model, n_layers=c.n_layers, n_heads=c.n_heads, d_ff=c.d_ff,
            embedding_dropout=c.embedding_dropout, core_dropout=c.core_dropout,
            core_output_dropout=c.core_output_dropout, attention_dropout=c.attention_dropout,
            memory_length=c.memory_length, min_rel=c.min_rel, max_rel=c.max_rel, relative=c.relpos != "none",
            n_attention_fns=2 if c.use_different_attn_fns else 1, **self.network_options(),
        )

    def network_options(self) -> dict[str, Any]:
        """Further ``TransformerXL`` options of a subclass (the Dependency TG port's)."""
        return {}

    # ---- forward -------------------------------------------------------------------------------------------
    def use_flex(self, device: torch.device) -> bool:
        """Use flex for this call: as configured, or ``auto`` on CUDA when no attention weights drop and the
        heads are wide enough for FlexAttention's kernel."""
        c = self.config
        if c.attention == "flex":
            return True
        dropping = self.training and c.attention_dropout > 0
        return c.attention == "auto" and device.type == "cuda" and not dropping and fits_flex(c.d_model, c.n_heads)

    def forward(self, chunks: Sequence[Chunk],
                memory: Tensor | None = None) -> tuple[list[Tensor], Tensor | None]:
        """Logits [B, L, V] per chunk, and the memory after the last one (None without memory)."""
        return self._run(chunks, memory, logits=True)

    def hidden(self, chunks: Sequence[Chunk],
               memory: Tensor | None = None) -> tuple[list[Tensor], Tensor | None]:
        """Final hidden states [B, L, D] per chunk (after the output dropout: what the head projects), and the
        memory after the last one."""
        return self._run(chunks, memory, logits=False)

    def _run(self, chunks: Sequence[Chunk], memory: Tensor | None,
             logits: bool) -> tuple[list[Tensor], Tensor | None]:
        outputs = []
        for chunk in chunks:
            inputs = field(chunk, "inputs")
            flex = self.use_flex(inputs.device)
            out, memory = self.network(
                inputs, field(chunk, "attn_mask"), field(chunk, "relpos"), field(chunk, "mem_src"),
                field(chunk, "reset"), memory, compose=field(chunk, "compose"), flex=flex,
                compiled_flex=flex and inputs.is_cuda, added=field(chunk, "added"), logits=logits,
            )
            outputs.append(out)
        return outputs, memory

    def nll(self, chunks: Sequence[Chunk]) -> tuple[Tensor, Tensor]:
        """Summed negative log-likelihood over positions with a label, and their count: the head applied at
        the labelled positions alone, in chunks of rows, so the logits of the whole batch never exist
        (``labelled_loss``; a chunk's ``label_index``, when given, names its labelled positions: a seed
        group's)."""
        hidden, _ = self.hidden(chunks)
        params = self.network.head_parameters()
        total = hidden[0].new_zeros((), dtype=torch.float32)
        count = torch.zeros((), dtype=torch.long, device=total.device)
        for states, chunk in zip(hidden, chunks, strict=True):
            labels = field(chunk, "labels")
            rows, targets = labelled_rows(states, labels, field(chunk, "label_index"))
            total = total + chunked_nll(rows, targets, self.network.project, params, self.config.vocab_size)
            count = count + (labels != 0).sum()
        return total, count

    @torch.no_grad()
    def token_logprobs(self, chunks: Sequence[Chunk]) -> Tensor:
        """[B, N] log-probability of each label token, N = total chunk length; 0 where the label is 0."""
        logits, _ = self(chunks)
        out = []
        for chunk_logits, chunk in zip(logits, chunks, strict=True):
            labels = field(chunk, "labels")
            logp = chunk_logits.float().log_softmax(-1).gather(-1, labels[..., None]).squeeze(-1)
            out.append(logp.masked_fill(labels == 0, 0.0))
        return torch.cat(out, dim=1)

    # ---- Lightning hooks -----------------------------------------------------------------------------------
    def training_step(self, batch: Sequence[Chunk], batch_idx: int) -> Tensor:
        total, count = self.nll(batch)
        loss, logged = global_token_mean(self, total, count)  # data parallel: the global batch's token mean
        self.log("train/loss", logged, prog_bar=True, batch_size=int(count))
        return loss

    def validation_step(self, batch: Sequence[Chunk], batch_idx: int) -> None:
        total, count = self.nll(batch)
        n = int(count)
        # Weighted by the token count, Lightning's epoch mean of val/loss is the exact token-level mean NLL.
        if n:
            self.log("val/loss", total / n, prog_bar=True, batch_size=n, on_epoch=True)
        self.log("val/nll_sum", total, reduce_fx="sum", on_epoch=True, batch_size=1)
        self.log("val/tokens", count.float(), reduce_fx="sum", on_epoch=True, batch_size=1)

    def configure_optimizers(self) -> dict[str, Any]:
        c = self.config
        optimizer = torch.optim.Adam(self.parameters(), lr=c.peak_lr, betas=(c.adam_beta1, c.adam_beta2))
        return {"optimizer": optimizer, "lr_scheduler": stepwise_scheduler(optimizer, c)}



def validation_metrics(kind: str, module: TransformerGrammarLM, data: TrainData, best_path: str) -> dict[str, Any]:
    """Validation NLL of the best checkpoint per token and per word, beside a unigram baseline (a
    ``TransformerGrammarLM`` or a subclass, on ``TrainData`` whose batches are lists of chunks); ``kind``:
    ``string`` (the word perplexity is exact) or ``joint`` (a gold-tree bound)."""
    if best_path:
        module.load_state_dict(torch.load(best_path, map_location="cpu", weights_only=True)["state_dict"])
    module.eval()
    total, count = 0.0, 0
    with torch.no_grad():
        for batch in data.valid_batches(32):
            nll, n = module.nll([chunk.to(module.device) for chunk in batch])
            total += float(nll)
            count += int(n)
    unigram = unigram_nll(data.train, data.valid, data.vocab_size)
    words = max(data.valid_words, 1)
    out = {
        "val_tokens": count,
        "val_words": data.valid_words,
        "val_token_nll": total / max(count, 1),
        "val_token_ppl": math.exp(total / max(count, 1)),
        "unigram_val_token_ppl": math.exp(unigram / max(count, 1)),
        # joint models: -log p(x, y_gold) >= -log p(x), so this is an upper bound on word perplexity
        "val_word_ppl": math.exp(total / words),
        "val_word_ppl_convention": (
            "exact, </s> predicted, denominator = words" if kind == "string"
            else "gold-tree bound exp(-log p(x, y_gold) / words)"),
        "unigram_val_word_ppl": math.exp(unigram / words),
    }
    out.update(data.stats)
    return out
