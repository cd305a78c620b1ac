"""Syntactic Ordered Memory (Shen et al. 2021, §3) as one LightningModule: eSOM, dSOM and Table 2's ablations.

The network, read top to bottom. Memory slots are tensor indices 0..N-1 (the paper's slots 1..N). A decision
θ_t is the paper's slot that x_t is written into (tensor index θ_t − 1; 0 is the virtual slot below slot 1),
which is also the 0-based index of p_t's split point i = θ_t + 1: the candidates at tensor indices ≤ θ_t
are committed and x_t composes with the memory from tensor index θ_t up
(``lightning_modules.families.som.encoding``). Per sentence ``<s> w_1 … w_n``, with x_t = LN(E[w_t]):

1. **One-step look-ahead parser** p_t (t ≥ 2; OM's attention, §3.1): q = LN(W_q x_t), k_j = LN(W_k M̂_{t−1}^j),
   β_j = w · ReLU(q + k_j) + b over the slots the mask allows (j ≥ θ_{t−1} − 1, Eq. 4), scaled by 1/√D,
   p_t = softmax(β). θ_1 = N: ``<s>`` is written into the top slot.
2. **Decision** θ_t: sampled from p_t in training (Eq. 12), argmax in evaluation (Eq. 13), or the gold
   grid label (teacher forcing, and the gold-tree upper bound of Table 2).
3. **Memory** (Eq. 1): M_t^j = M̂_{t−1}^j for j ≤ θ_t, M_{t−1}^j above.
4. **Candidates** (Eq. 2–3): M̂_t^j = x_t below θ_t, M̂_t^{θ_t} = cell(x_t, M_t^{θ_t}) and
   M̂_t^j = cell(M̂_t^{j−1}, M_t^j) above. This chain is the one sequential part over slots: each slot
   composes the one below it. It runs once per level for the whole batch, from the lowest θ_t up.
5. **Prediction network** (§3.2): the zero-step look-ahead parser p'_t (Eq. 5–6) over the candidates,
   α_j = (w_2 ReLU(W_1 M̂_t^j + b_1) + b_2)/√D with the mask j ≥ θ_t − 1, picks c (sampled / argmax /
   gold ξ_{t+1}); h_t = RNN(M_t^N, …, M_t^{c+1}, M̂_t^c) (Eq. 7) with the cell of Eq. 8–9. The RNN's
   state after M_t^N … M_t^j depends on memory that only changes at slots ≤ θ_t, so its states R^j are
   kept across steps and only R^{θ_t} is recomputed: h_t costs two cells per step, not N − c.
   Without the prediction network (Table 2), h_t = M̂_t^N.
6. **Words** (Eq. 10): p(w_{t+1} | w_≤t) = softmax(E drop_out(h_t) + b), tied with the input embedding.

Cell (Eq. 8–9, OM's cell): [f; i; c; u] = W_2 drop(ReLU(W_1 drop([h; m]) + b_1)) + b_2 (hidden 4D),
out = LN(σ(f)⊙h + σ(i)⊙m + σ(c)⊙u).

**dSOM** (§3.4): embeddings, slots and hidden states are [semantic | syntactic] segments (D_sem, D_syn);
every linear layer of the cells is block-triangular (the syntactic outputs read only syntactic inputs,
``SegmentLinear``), each segment has its own layer norm, and the parsers read the semantic segment
detached (Eq. 15, 17), so the structural loss reaches only the syntactic one. **eSOM** is one segment of
D = D_sem + D_syn (Table 6) with full linear layers and no detachment.

Losses (§3.3): L_LM = −Σ log p(w_{t+1} | w_≤t) and the adaptive structural loss
L_S = −Σ_t [log p_t(ξ_t) + log p'_t(ξ_{t+1})], where ξ comes from Algorithm 1 given the decisions θ
actually taken (so the labels follow the model's own mistakes); both are divided by the number of
predicted tokens. Ablations (Table 2) are config values: ``lm_loss: false``; ``structure:
teacher_forcing`` (θ and c are the gold labels in training); ``prediction_network: false``;
``tree_labels: left_branching`` (data); ``eval_decisions: gold`` (gold θ and c in evaluation).

Decisions the paper leaves open, each recorded here:
  * The recurrence follows the hard decisions θ_t (the paper's "structural decisions"; teacher forcing
    and the gold-tree upper bound only make sense so), so the parsers learn from L_S alone.
  * Eq. 5 calls W_1^Att "N × N" and divides by √N: we read N as the hidden size D (the weight acts on a
    D-vector), as OM's attention divides by √D.
  * x_t is the layer-normed embedding (OM normalises its input projection; SOM's parameter counts of
    Table 2/7 leave no room for a D × D projection, and the embedding is tied with the output).
  * Embedding dropout drops word types (rows of E) per batch, scaled by 1/(1−p) (AWD-LSTM's
    ``embedded_dropout``, used throughout Shen et al.'s code).
  * The RNN of the prediction network starts from zeros; the optimiser (Adam, warm-up then cosine, clip
    ``grad_clip_norm``) is not given in the paper.
  * Sentences are read as ``<s> w_1 … w_n`` under ((<s> Γ) <eos>), Algorithm 1's labels are kept inside the
    mask, and trees deeper than the memory are clamped at slot 0 (``encodings.som``).
  * p and p' accuracies leave out the steps the mask forces (the first word's slot, and its prediction at
    ``<s>``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

import pytorch_lightning as pl
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from lightning_modules.errors import InputError
from lightning_modules.families.som.encoding import TREE_LABELS, structure_labels
from lightning_modules.models.config_fields import checked_values
from lightning_modules.models.lr_schedule import stepwise_scheduler
from lightning_modules.models.optimisation import ScheduledClipping

STRUCTURES = ("adaptive", "teacher_forcing")
EVAL_DECISIONS = ("predicted", "gold")


@dataclass(frozen=True)
class SOMConfig:
    """Architecture, ablations and optimisation (defaults: dSOM on PTB, Table 6)."""

    vocab_size: int = 23815
    disentangled: bool = True  # dSOM; false: eSOM (one segment of d_sem + d_syn)
    d_sem: int = 300
    d_syn: int = 100
    n_slots: int = 15
    embedding_dropout: float = 0.1
    dropout: float = 0.3  # before every linear layer
    output_dropout: float = 0.5  # before the output layer
    lm_loss: bool = True
    structure: str = "adaptive"  # adaptive | teacher_forcing
    prediction_network: bool = True
    tree_labels: str = "gold"  # gold | left_branching (read by the data)
    eval_decisions: str = "predicted"  # predicted | gold (Table 2's upper bound)
    peak_lr: float = 1e-3
    start_lr: float = 1e-7
    min_lr: float = 1e-5
    warmup_steps: int = 1000
    total_steps: int = 50_000
    adam_beta1: float = 0.9
    adam_beta2: float = 0.999
    adam_eps: float = 1e-8
    weight_decay: float = 1.2e-6
    grad_clip_norm: float = 1.0

    @property
    def segments(self) -> tuple[int, int]:
        """(semantic, syntactic) sizes: eSOM is a single segment."""
        return (self.d_sem, self.d_syn) if self.disentangled else (self.d_sem + self.d_syn, 0)

    def validate(self, prefix: str = "model.") -> SOMConfig:
        """Raise ``InputError`` naming the config key at the first impossible value; return self."""

        def bad(key: str, message: str) -> InputError:
            return InputError(f"{message} (got {getattr(self, key)!r})", f"{prefix}{key}")

        for key in ("vocab_size", "d_sem", "total_steps"):
            if getattr(self, key) < 1:
                raise bad(key, "must be positive")
        if self.d_syn < (1 if self.disentangled else 0):
            raise bad("d_syn", "must be positive for dSOM" if self.disentangled else "must be >= 0")
        if self.n_slots < 2:
            raise bad("n_slots", "must be at least 2")
        for key in ("embedding_dropout", "dropout", "output_dropout", "adam_beta1", "adam_beta2"):
            if not 0.0 <= getattr(self, key) < 1.0:
                raise bad(key, "must be in [0, 1)")
        for key in ("peak_lr", "start_lr", "min_lr", "warmup_steps", "adam_eps", "weight_decay", "grad_clip_norm"):
            if getattr(self, key) < 0:
                raise bad(key, "must be >= 0")
        for key, allowed in (("structure", STRUCTURES), ("eval_decisions", EVAL_DECISIONS),
                             ("tree_labels", TREE_LABELS)):
            if getattr(self, key) not in allowed:
                raise bad(key, f"must be one of {', '.join(allowed)}")
        return self


def config_from_dict(config: Mapping[str, Any], prefix: str = "model.") -> SOMConfig:
    """A validated config from a flat mapping (a YAML preset); unknown keys and wrong types are errors."""
    return SOMConfig(**checked_values(SOMConfig, config, prefix)).validate(prefix)


def build(config: Mapping[str, Any] | SOMConfig) -> SOM:
    """The LightningModule for a config (a ``SOMConfig`` or a flat dict of its fields)."""
    cfg = config if isinstance(config, SOMConfig) else config_from_dict(config)
    return SOM(cfg.validate())


def parameter_count(module: nn.Module) -> int:
    """Number of trainable parameters (the tied embedding counted once)."""
    return sum(p.numel() for p in module.parameters() if p.requires_grad)


def parameter_breakdown(module: SOM) -> dict[str, int]:
    """Parameters per part: embedding (tied), output bias, memory cell, parsers, prediction RNN, norms."""
    return {"embedding": module.embedding.weight.numel(), "output_bias": module.output_bias.numel(),
            "input_norm": parameter_count(module.input_norm), "memory_cell": parameter_count(module.cell),
            "parser": parameter_count(module.parser),
            "zero_step_parser": 0 if module.zero_step is None else parameter_count(module.zero_step),
            "prediction_rnn": 0 if module.rnn_cell is None else parameter_count(module.rnn_cell)}


# -- segments ---------------------------------------------------------------------------------------------
class SegmentLinear(nn.Module):
    """y = W x + b on [semantic | syntactic] vectors with the block-triangular W of §3.4:
    y_sem = W_sem2sem x_sem + W_syn2sem x_syn, y_syn = W_syn2syn x_syn. With no syntactic segment (eSOM)
    it is a plain linear layer."""

    def __init__(self, inputs: tuple[int, int], outputs: tuple[int, int]):
        super().__init__()
        self.in_sem = inputs[0]
        self.to_sem = nn.Linear(sum(inputs), outputs[0])
        self.to_syn = nn.Linear(inputs[1], outputs[1]) if outputs[1] else None

    def forward(self, x: Tensor) -> Tensor:
        y = self.to_sem(x)
        return y if self.to_syn is None else torch.cat([y, self.to_syn(x[..., self.in_sem:])], dim=-1)


class SegmentNorm(nn.Module):
    """A layer norm per segment (dSOM), or one over the whole vector (eSOM)."""

    def __init__(self, segments: tuple[int, int]):
        super().__init__()
        self.sizes = [s for s in segments if s]
        self.norms = nn.ModuleList(nn.LayerNorm(s) for s in self.sizes)

    def forward(self, x: Tensor) -> Tensor:
        parts = x.split(self.sizes, dim=-1)
        return torch.cat([norm(p) for norm, p in zip(self.norms, parts)], dim=-1)


def join(a: Tensor, b: Tensor, segments: tuple[int, int]) -> Tensor:
    """[a; b] laid out as [a_sem, b_sem | a_syn, b_syn], itself a segmented vector."""
    sem = segments[0]
    return torch.cat([a[..., :sem], b[..., :sem], a[..., sem:], b[..., sem:]], dim=-1)


def gates(y: Tensor, segments: tuple[int, int]) -> list[Tensor]:
    """Split W_2's output [f_sem i_sem c_sem u_sem | f_syn i_syn c_syn u_syn] into [f, i, c, u]."""
    sem, syn = segments
    semantic = y[..., : 4 * sem].chunk(4, dim=-1)
    if not syn:
        return list(semantic)
    syntactic = y[..., 4 * sem:].chunk(4, dim=-1)
    return [torch.cat([a, b], dim=-1) for a, b in zip(semantic, syntactic)]


class Cell(nn.Module):
    """The composition / recurrence cell of Eq. 8–9 (OM's cell), block-triangular for dSOM."""

    def __init__(self, segments: tuple[int, int], dropout: float):
        super().__init__()
        self.segments = segments
        hidden = (4 * segments[0], 4 * segments[1])
        self.inner = SegmentLinear((2 * segments[0], 2 * segments[1]), hidden)
        self.outer = SegmentLinear(hidden, hidden)
        self.norm = SegmentNorm(segments)
        self.drop = nn.Dropout(dropout)

    def forward(self, h: Tensor, m: Tensor) -> Tensor:
        y = self.outer(self.drop(F.relu(self.inner(self.drop(join(h, m, self.segments))))))
        f, i, c, u = gates(y, self.segments)
        return self.norm(torch.sigmoid(f) * h + torch.sigmoid(i) * m + torch.sigmoid(c) * u)


# -- parsers ----------------------------------------------------------------------------------------------
def slot_mask(previous: Tensor, n_slots: int) -> Tensor:
    """Slots the memory mask allows after a decision (Eq. 4): j >= θ − 1, [B] -> bool [B, N]."""
    return torch.arange(n_slots, device=previous.device) >= (previous[:, None] - 1)


class OneStepParser(nn.Module):
    """p_t: x_t attends over the previous candidates M̂_{t−1} (OM's ``Distribution``)."""

    def __init__(self, d: int, dropout: float):
        super().__init__()
        self.query = nn.Sequential(nn.Dropout(dropout), nn.Linear(d, d), nn.LayerNorm(d))
        self.key = nn.Sequential(nn.Dropout(dropout), nn.Linear(d, d), nn.LayerNorm(d))
        self.score = nn.Sequential(nn.ReLU(), nn.Dropout(dropout), nn.Linear(d, 1))
        self.scale = 1.0 / math.sqrt(d)

    def forward(self, x: Tensor, candidates: Tensor, allowed: Tensor) -> Tensor:
        beta = self.score(self.query(x)[:, None] + self.key(candidates)).squeeze(-1) * self.scale
        return beta.masked_fill(~allowed, float("-inf")).log_softmax(-1)


class ZeroStepParser(nn.Module):
    """p'_t (Eq. 5–6): a score per candidate slot, before the next word is seen."""

    def __init__(self, d: int, dropout: float):
        super().__init__()
        self.score = nn.Sequential(nn.Dropout(dropout), nn.Linear(d, d), nn.ReLU(), nn.Dropout(dropout),
                                   nn.Linear(d, 1))
        self.scale = 1.0 / math.sqrt(d)

    def forward(self, candidates: Tensor, allowed: Tensor) -> Tensor:
        alpha = self.score(candidates).squeeze(-1) * self.scale
        return alpha.masked_fill(~allowed, float("-inf")).log_softmax(-1)


# -- the model --------------------------------------------------------------------------------------------
@dataclass
class Trace:
    """What a forward pass produced, per input position [B, T(, …)]."""

    logits: Tensor  # [B, T, V] next-word logits
    parser_logp: Tensor  # [B, T, N] log p_t (position 0, <s>, is not a decision: zeros)
    zero_step_logp: Tensor | None  # [B, T, N] log p'_t
    decisions: Tensor  # [B, T] θ_t (N at position 0)
    choices: Tensor | None  # [B, T] the slot c the prediction network read


class SOM(ScheduledClipping, pl.LightningModule):
    """eSOM / dSOM with the prediction network and the adaptive structural loss (module docstring)."""

    def __init__(self, config: SOMConfig | Mapping[str, Any]):
        super().__init__()
        cfg = config if isinstance(config, SOMConfig) else config_from_dict(config)
        self.config = cfg
        self.save_hyperparameters({"config": asdict(cfg)})
        self.segments = cfg.segments
        d = sum(self.segments)
        self.embedding = nn.Embedding(cfg.vocab_size, d)
        self.input_norm = SegmentNorm(self.segments)
        self.cell = Cell(self.segments, cfg.dropout)
        self.parser = OneStepParser(d, cfg.dropout)
        self.zero_step = ZeroStepParser(d, cfg.dropout) if cfg.prediction_network else None
        self.rnn_cell = Cell(self.segments, cfg.dropout) if cfg.prediction_network else None
        self.output_bias = nn.Parameter(torch.zeros(cfg.vocab_size))
        self.drop = nn.Dropout(cfg.dropout)
        self.drop_out = nn.Dropout(cfg.output_dropout)
        nn.init.uniform_(self.embedding.weight, -0.1, 0.1)

    # ---- pieces ---------------------------------------------------------------------------------------------
    def embed(self, inputs: Tensor) -> Tensor:
        """x_t = LN(E[w_t]) with word-type dropout in training."""
        weight = self.embedding.weight
        p = self.config.embedding_dropout
        if self.training and p > 0:
            keep = torch.empty(weight.shape[0], 1, device=weight.device).bernoulli_(1 - p) / (1 - p)
            weight = weight * keep
        return self.input_norm(F.embedding(inputs, weight))

    def parser_view(self, x: Tensor) -> Tensor:
        """What the parsers read: the semantic segment detached for dSOM (Eq. 15, 17)."""
        if not self.config.disentangled:
            return x
        sem = self.segments[0]
        return torch.cat([x[..., :sem].detach(), x[..., sem:]], dim=-1)

    def compose(self, x: Tensor, memory: Tensor, theta: Tensor) -> Tensor:
        """Candidates M̂_t (Eq. 2–3): x_t below θ_t, then the composition chain up to the top slot."""
        levels = [x] * memory.shape[1]
        h = x
        for j in range(int(theta.min()), memory.shape[1]):
            h = torch.where((j < theta)[:, None], x, self.cell(h, memory[:, j]))
            levels[j] = h
        return torch.stack(levels, dim=1)

    @staticmethod
    def decide(logp: Tensor, mode: str, gold: Tensor) -> Tensor:
        """A decision from log-probabilities: ``sample`` (Eq. 12), ``argmax`` (Eq. 13) or ``gold``."""
        if mode == "sample":
            return torch.multinomial(logp.exp(), 1).squeeze(-1)
        if mode == "argmax":
            return logp.argmax(-1)
        return gold

    def decision_mode(self) -> str:
        if self.training:
            return "gold" if self.config.structure == "teacher_forcing" else "sample"
        return "gold" if self.config.eval_decisions == "gold" else "argmax"

    # ---- the recurrence ------------------------------------------------------------------------------------
    def forward(self, inputs: Tensor, gold_slots: Tensor, mode: str | None = None) -> Trace:
        """Run SOM over ``inputs`` [B, T] (``<s> w_1 …``); ``gold_slots`` [B, T + 1] are read in ``gold``
        mode (and as the prediction network's choice there). ``mode``: sample | argmax | gold."""
        mode = mode or self.decision_mode()
        x = self.drop(self.embed(inputs))
        batch, steps, d = x.shape
        n = self.config.n_slots
        x_parse = self.parser_view(x)
        memory = x.new_zeros(batch, n, d)
        candidates = x.new_zeros(batch, n, d)
        rnn_states = x.new_zeros(batch, n + 1, d)  # R^j: the RNN after M^N … M^j; R^N (index n) = h_0
        theta = torch.full((batch,), n, dtype=torch.long, device=x.device)
        slots = torch.arange(n, device=x.device)
        outputs, parser_logp, zero_logp, decisions, choices = [], [], [], [], []
        for t in range(steps):
            if t == 0:  # <s> is written into the top slot: θ_1 = N, no decision
                logp = x.new_zeros(batch, n)
            else:
                logp = self.parser(x_parse[:, t], self.parser_view(candidates), slot_mask(theta, n))
                theta = self.decide(logp, mode, gold_slots[:, t])
            memory = torch.where((slots <= theta[:, None])[..., None], candidates, memory)
            candidates = self.compose(x[:, t], memory, theta)
            parser_logp.append(logp)
            decisions.append(theta)
            if self.zero_step is None:
                outputs.append(candidates[:, -1])
                continue
            # the RNN state over the memory down to slot θ_t (only that slot's input changed; index n is h_0)
            below = rnn_states.gather(1, (theta + 1).clamp(max=n)[:, None, None].expand(-1, 1, d))[:, 0]
            at_theta = theta.clamp(max=n - 1)
            fresh = self.rnn_cell(below, memory.gather(1, at_theta[:, None, None].expand(-1, 1, d))[:, 0])
            write = (slots == theta[:, None])[..., None]
            rnn_states = torch.cat([torch.where(write, fresh[:, None], rnn_states[:, :n]), rnn_states[:, n:]], 1)
            logp2 = self.zero_step(self.parser_view(candidates), slot_mask(theta, n))
            c = self.decide(logp2, mode, gold_slots[:, t + 1])
            state = rnn_states.gather(1, (c + 1)[:, None, None].expand(-1, 1, d))[:, 0]
            outputs.append(self.rnn_cell(state, candidates.gather(1, c[:, None, None].expand(-1, 1, d))[:, 0]))
            zero_logp.append(logp2)
            choices.append(c)
        h = torch.stack(outputs, dim=1)
        logits = F.linear(self.drop_out(h), self.embedding.weight, self.output_bias)
        return Trace(logits, _stack(parser_logp), _stack(zero_logp), _stack(decisions), _stack(choices))

    # ---- losses --------------------------------------------------------------------------------------------
    def loss_terms(self, batch: Any, mode: str | None = None) -> dict[str, Tensor]:
        """Summed NLLs, counts and parser hits of a batch (``data.som_data.SOMBatch``).

        Structure labels come from Algorithm 1 over the decisions taken; accuracies count every step but
        the forced ones (the first word's slot and its prediction at ``<s>``)."""
        trace = self(batch.inputs, batch.slots, mode)
        lengths = batch.lengths
        steps = batch.inputs.shape[1]
        valid = torch.arange(steps, device=lengths.device)[None] < lengths[:, None]
        lm = F.cross_entropy(trace.logits.transpose(1, 2), batch.targets, reduction="none")
        terms = {"lm_nll": torch.where(valid, lm, 0.0).sum(), "lm_count": valid.sum()}
        decisions = torch.cat([trace.decisions, trace.decisions[:, -1:]], dim=1).cpu().numpy()
        labels = torch.from_numpy(structure_labels(batch.first_sibling.cpu().numpy(), decisions,
                                                   self.config.n_slots)).to(lengths.device)
        # p_t at positions 1..n (words), label ξ_t; p'_t at positions 0..n, label ξ_{t+1}
        words = valid & (torch.arange(steps, device=lengths.device)[None] >= 1)
        scored = words & (torch.arange(steps, device=lengths.device)[None] >= 2)
        p_label = labels[:, :steps].clamp(max=self.config.n_slots - 1)
        p_nll = -trace.parser_logp.gather(2, p_label[..., None])[..., 0]
        terms.update(parser_nll=torch.where(words, p_nll, 0.0).sum(), parser_count=scored.sum(),
                     parser_correct=((trace.parser_logp.argmax(-1) == p_label) & scored).sum())
        if trace.zero_step_logp is not None:
            z_label = labels[:, 1:]
            z_nll = -trace.zero_step_logp.gather(2, z_label[..., None])[..., 0]
            z_scored = valid & (torch.arange(steps, device=lengths.device)[None] >= 1)
            terms.update(zero_step_nll=torch.where(valid, z_nll, 0.0).sum(), zero_step_count=z_scored.sum(),
                         zero_step_correct=((trace.zero_step_logp.argmax(-1) == z_label) & z_scored).sum())
        return terms

    def loss(self, terms: Mapping[str, Tensor]) -> Tensor:
        """(L_LM + L_S) / predicted tokens, without L_LM for the ``lm_loss: false`` ablation."""
        total = terms["parser_nll"] + terms.get("zero_step_nll", 0.0)
        if self.config.lm_loss:
            total = total + terms["lm_nll"]
        return total / terms["lm_count"].clamp(min=1)

    # ---- Lightning hooks -----------------------------------------------------------------------------------
    def training_step(self, batch: Any, batch_idx: int) -> Tensor:
        terms = self.loss_terms(batch)
        loss = self.loss(terms)
        tokens = int(terms["lm_count"])
        self.log("train/loss", loss, prog_bar=True, batch_size=tokens)
        self.log("train/lm_loss", terms["lm_nll"] / max(tokens, 1), batch_size=tokens)
        return loss

    def validation_step(self, batch: Any, batch_idx: int) -> None:
        terms = self.loss_terms(batch)
        tokens = int(terms["lm_count"])
        # weighted by tokens, the epoch mean is the exact per-token NLL (greedy structure); a run without the
        # LM loss (Table 2) selects its checkpoint by the structural NLL it is trained on
        selected = terms["lm_nll"] if self.config.lm_loss else terms["parser_nll"] + terms.get("zero_step_nll", 0.0)
        if tokens:
            self.log("val/loss", selected / tokens, prog_bar=True, batch_size=tokens, on_epoch=True)
        for key, value in terms.items():
            self.log(f"val/{key}", value.float(), reduce_fx="sum", on_epoch=True, batch_size=1)

    def configure_optimizers(self) -> dict[str, Any]:
        c = self.config
        optimizer = torch.optim.Adam(self.parameters(), lr=c.peak_lr, betas=(c.adam_beta1, c.adam_beta2),
                                     eps=c.adam_eps, weight_decay=c.weight_decay)
        return {"optimizer": optimizer, "lr_scheduler": stepwise_scheduler(optimizer, c)}


def _stack(steps: list[Tensor]) -> Tensor | None:
    return torch.stack(steps, dim=1) if steps else None


def slot_by_slot(model: SOM, inputs: Tensor, gold_slots: Tensor, mode: str) -> Trace:
    """Reference only (tests, ``benchmarks/som_recurrence.py``): the same network computed as the equations
    read and as OM's official code loops, one slot at a time: the memory update slot by slot, the
    composition chain over every slot, and the prediction RNN read from the top slot down to c for every
    step (Eq. 7), without ``SOM.forward``'s cached RNN states. Deterministic modes (argmax, gold) only."""
    x = model.drop(model.embed(inputs))
    batch, steps, d = x.shape
    n = model.config.n_slots
    memory = [x.new_zeros(batch, d) for _ in range(n)]
    candidates = [x.new_zeros(batch, d) for _ in range(n)]
    theta = torch.full((batch,), n, dtype=torch.long, device=x.device)
    outputs, parser_logp, zero_logp, decisions, choices = [], [], [], [], []
    for t in range(steps):
        logp = x.new_zeros(batch, n)
        if t > 0:
            logp = model.parser(model.parser_view(x[:, t]), model.parser_view(torch.stack(candidates, 1)),
                                slot_mask(theta, n))
            theta = SOM.decide(logp, mode, gold_slots[:, t])
        for j in range(n):
            memory[j] = torch.where((j <= theta)[:, None], candidates[j], memory[j])
        h = x[:, t]
        for j in range(n):
            h = torch.where((j < theta)[:, None], x[:, t], model.cell(h, memory[j]))
            candidates[j] = h
        parser_logp.append(logp)
        decisions.append(theta)
        if model.zero_step is None:
            outputs.append(candidates[-1])
            continue
        logp2 = model.zero_step(model.parser_view(torch.stack(candidates, 1)), slot_mask(theta, n))
        c = SOM.decide(logp2, mode, gold_slots[:, t + 1])
        h = x.new_zeros(batch, d)
        for j in range(n - 1, -1, -1):
            read = torch.where((j == c)[:, None], candidates[j], memory[j])
            h = torch.where((j >= c)[:, None], model.rnn_cell(h, read), h)
        outputs.append(h)
        zero_logp.append(logp2)
        choices.append(c)
    h = torch.stack(outputs, dim=1)
    logits = F.linear(model.drop_out(h), model.embedding.weight, model.output_bias)
    return Trace(logits, _stack(parser_logp), _stack(zero_logp), _stack(decisions), _stack(choices))
