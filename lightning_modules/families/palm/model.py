"""AWD-LSTM (Merity et al. 2018) and PaLM (Peng et al. 2019) as one LightningModule.

The network, read top to bottom (the official AWD-LSTM ``RNNModel`` and PaLM's fork of it):
``x = locked_drop(embedding_drop(E)[w], dropout_input)``; three LSTM layers, each hidden-to-hidden matrix
weight-dropped (DropConnect, ``weight_drop``) and every layer's output but the last locked-dropped with
``dropout_hidden``; the last layer has the embedding size, its output is locked-dropped with ``dropout`` and
decoded with the tied embedding matrix plus a bias. Families:
  * ``awd-lstm``: exactly that;
  * ``palm-u``: span attention (``layers.span_attention``, §2.1) on the output of the second-to-last layer, its
    context mixed in before the last layer by Eq. 6, ``ĥ = g ⊙ tanh(W_m [h; a] + b_m) + (1 − g) ⊙ h`` with
    ``g = σ(W_g [h; a] + b_g)`` (the context locked-dropped with ``dropout_hidden`` first, as the official code).
    The official network (Noahs-ARK/PaLM ``model.py``, ``span_parser.py``, ``rrnn.py``) differs from these
    equations; each difference is a config key (``PalmConfig``, ``CHOICES``), set to the official network by
    the presets and by imported official checkpoints: ``mix_input`` (its MLP reads the context alone,
    ``tanh(W_m a + b_m)``), ``span_dropouts`` (it also drops the RRNN states, ``tanh(W_m a + b_m)`` and the
    mixed state, and the undropped LSTM output is what passes the gate), ``rrnn_input``, ``span_repr`` and
    ``span_start`` (``span_attention``). Its gate multiplies h where ours multiplies the MLP: the same
    function with the gate's weights negated (σ(−z) = 1 − σ(z)), which the converter does;
  * ``palm-s``: palm-u plus λ × the cross-entropy of the attention to the normalised gold span selections
    (Eq. 5), averaged over every token of the batch (rows without a gold span add 0);
  * ``palm-rb``: palm-u with the scores fixed to m, …, 1 (§3): the attention prefers the longest span.

Loss: mean next-word cross-entropy + AR (``ar_alpha`` × mean square of the dropped last-layer output) + TAR
(``tar_beta`` × mean square of the difference of consecutive raw last-layer outputs) [+ Eq. 5]. Training reads
a stream in consecutive windows of variable length (``StreamBatch``): the LSTM states and the span memory are
carried from window to window (detached: truncated BPTT) and reset where the stream restarts; the learning
rate of a step is scaled by its length / ``bptt``. Validation is stream-level: the whole split read in windows
with the state carried, as the papers report perplexity.

The stages (the official ``main.py`` of PaLM and of AWD-LSTM, and AWD-LSTM's ``finetune.py``), counted in
validations — with ``epochs`` > 0 the run validates once at the end of every pass over the stream, as the
official loops do, so a validation is an epoch:
  1. SGD (Merity) or Adam (PaLM) until the switch to averaged SGD (``NTASGD``): at the validation where the
     non-monotone trigger fires (``nonmono``), or with ``switch_after`` > 0 after that many validations, or
     with ``switch_after_epochs`` > 0 at the first window of that epoch (PaLM: "Adam ... for 40 epochs, and
     then switch to ASGD"). With ``reload_at_switch`` the weights of the best validation so far are put back
     first (PaLM's ``main.py`` loads its ``.sgd`` file there; Merity's ``main.py`` switches from the current
     weights). From then on validation uses the averaged weights and every checkpoint's ``state_dict`` holds
     them (the raw weights go under ``training_state_dict`` and are put back when a run resumes).
  2. Finetuning, with ``finetune_at`` > 0: at that validation the weights of the best validation so far are
     put back and averaged SGD starts afresh from them (a new average and a new NT history: PaLM's
     ``--finetuning 400``; Merity's ``finetune.py`` after ``main.py``'s epochs). In this stage the
     non-monotone trigger ends the run, once the stage has had ``finetune_min`` validations (PaLM: ``epoch >
     finetuning + 100``; ``finetune.py``: none) — or ``epochs`` does. The history of the stage is its own
     validations (``finetune.py``'s; PaLM's ``main.py`` also keeps the validation at which the stage started).
The model a run keeps and evaluates is that of its best validation over all stages (``best.ckpt``), as both
official codes keep the file of their lowest validation loss and test it; ``validated_in`` records its stage.

Initialisation (the official PaLM code's ``init_weights``, ``initialisation``): the tied embedding uniform in
±√(3 / d_embedding) and the output bias 0; every LSTM matrix orthogonal gate by gate and every LSTM bias 0;
Eq. 6's MLP and gate Xavier-uniform with zero biases; the span attention as its own module says (rational RNNs
Xavier with gain 5/3 and zero biases, the score MLP Xavier with ``b1`` = 0). With ``initialisation:
awd-lstm`` (the AWD-LSTM presets), the official AWD-LSTM ``init_weights`` instead: the tied embedding uniform
in ±0.1, the output bias 0, and the LSTMs as PyTorch initialises them (every weight and bias uniform in
±1/√d_out).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

import pytorch_lightning as pl
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from lightning_modules.errors import InputError
from lightning_modules.families.palm.awd_dropout import WeightDroppedLSTM, embedding_dropout, locked_dropout
from lightning_modules.families.palm.bptt import StreamBatch
from lightning_modules.families.palm.initialisation import init_linear_, init_lstm_
from lightning_modules.families.palm.nt_asgd import NTASGD, nonmonotone_trigger
from lightning_modules.families.palm.span_attention import SpanAttention, SpanMemory
from lightning_modules.models.config_fields import checked_values

FAMILIES = ("awd-lstm", "palm-u", "palm-s", "palm-rb")
# the settings of the official networks' differences from the paper: the official PaLM value first
CHOICES = {"rrnn_input": ("linear", "tanh"), "span_repr": ("gated", "raw"), "span_start": ("zeros", "masked"),
           "mix_input": ("context", "both"), "span_dropouts": ("official", "context"),
           "initialisation": ("palm", "awd-lstm")}


@dataclass(frozen=True)
class PalmConfig:
    """Architecture and optimisation (defaults: PaLM on PTB, Table 5 and Appendix A)."""

    vocab_size: int = 10000
    d_embedding: int = 400
    d_hidden: int = 1020  # Table 5 (AWD-LSTM: 1150)
    n_layers: int = 3
    dropout: float = 0.4  # the last layer's output
    dropout_input: float = 0.4  # the embeddings (locked)
    dropout_hidden: float = 0.2  # between layers ("vertical", Table 5)
    dropout_embedding: float = 0.1  # word types
    weight_drop: float = 0.45  # DropConnect on the hidden-to-hidden matrices
    max_span: int = 20  # m
    d_rrnn: int = 200  # each direction; the context has 2 × d_rrnn = 400 (Table 5)
    d_span_mlp: int = 100  # the span-score MLP's hidden size (official parser_size)
    span_loss_weight: float = 0.01  # λ of Eq. 5 (palm-s)
    ar_alpha: float = 2.0
    tar_beta: float = 1.0
    optimizer: str = "adam"  # before averaging: "sgd" (Merity) or "adam" (PaLM)
    lr: float = 1e-3
    asgd_lr: float = 0.0  # learning rate of averaged SGD; 0 keeps ``lr``
    weight_decay: float = 1.2e-6
    grad_clip_norm: float = 0.25
    nonmono: int = 15  # the non-monotone interval (official PaLM train.sh; AWD-LSTM: 5)
    switch_after: int = 0  # > 0: switch to averaged SGD after this many validations instead of the trigger
    switch_after_epochs: int = 0  # > 0: switch at the first window of this epoch (0-based) instead (PaLM: 40)
    reload_at_switch: bool = True  # the best validated weights are put back at the switch (PaLM's main.py)
    finetune_at: int = 400  # > 0: the finetuning stage starts at this validation (PaLM's --finetuning; 0: none)
    finetune_min: int = 100  # validations of the finetuning stage before its NT trigger may end the run
    epochs: int = 4000  # > 0: passes over the stream, all stages, each validated at its end (PaLM's --epochs
    # default); 0: the step schedule of train.max_steps and train.val_every
    bptt: int = 70
    # where the official code (Noahs-ARK/PaLM, salesforce/awd-lstm-lm) differs from the paper's equations: the
    # presets set the official network (``lightning_modules.families.palm.official`` converts its checkpoints);
    # these defaults are the paper's, which runs trained before the keys existed used (their checkpoints load)
    rrnn_input: str = "tanh"  # "linear": u = (1 − f) ⊙ W_u h (official rrnn.py); "tanh": Eq. 1b
    span_repr: str = "raw"  # "gated": tanh(σ(W_q h + b_q) ⊙ [c→; c←]) (official); "raw": Alg. 1's [c→; c←]
    span_start: str = "masked"  # "zeros": m zero inputs before a stream count as tokens (official); "masked"
    mix_input: str = "both"  # "context": Eq. 6's tanh(W_m a + b_m) (official); "both": tanh(W_m [h; a] + b_m)
    span_dropouts: str = "context"  # "official": also the RRNN states, tanh(W_m ·) and the mixed state
    # locked-dropped with dropout_hidden (the undropped LSTM output passing the gate); "context": only a
    initialisation: str = "palm"  # "palm": Noahs-ARK/PaLM's init_weights; "awd-lstm": salesforce/awd-lstm-lm's

    def validate(self, prefix: str = "model.", family: str | None = None) -> PalmConfig:
        """Raise ``InputError`` naming the key at the first impossible value; return self."""

        def bad(key: str, message: str) -> InputError:
            return InputError(f"{message} (got {getattr(self, key)!r})", f"{prefix}{key}")

        for key in ("vocab_size", "d_embedding", "d_hidden", "max_span", "d_rrnn", "d_span_mlp", "bptt", "nonmono"):
            if getattr(self, key) < 1:
                raise bad(key, "must be positive")
        if self.n_layers < 2:
            raise bad("n_layers", "needs at least 2 layers (the span attention sits before the last one)")
        for key in ("dropout", "dropout_input", "dropout_hidden", "dropout_embedding", "weight_drop"):
            if not 0.0 <= getattr(self, key) < 1.0:
                raise bad(key, "must be in [0, 1)")
        for key in ("span_loss_weight", "ar_alpha", "tar_beta", "asgd_lr", "weight_decay", "grad_clip_norm",
                    "switch_after", "switch_after_epochs", "finetune_at", "finetune_min", "epochs"):
            if getattr(self, key) < 0:
                raise bad(key, "must be >= 0")
        if self.switch_after and self.switch_after_epochs:
            raise bad("switch_after_epochs", "the switch is counted in validations (switch_after) or in epochs, "
                      "not both: set the other to 0")
        if self.epochs and self.finetune_at >= self.epochs:
            raise bad("finetune_at", f"the finetuning stage must start before the last of the {self.epochs} "
                      "epochs (model.epochs)")
        if self.lr <= 0:
            raise bad("lr", "must be positive")
        if self.optimizer not in ("sgd", "adam"):
            raise bad("optimizer", "must be 'sgd' or 'adam'")
        for key, values in CHOICES.items():
            if getattr(self, key) not in values:
                raise bad(key, f"must be {' or '.join(repr(v) for v in values)}")
        if family is not None and family not in FAMILIES:
            raise InputError(f"unknown family {family!r} (known: {', '.join(FAMILIES)})", "family")
        return self


def config_from_dict(config: Mapping[str, Any], prefix: str = "model.", family: str | None = None) -> PalmConfig:
    """A validated config from a flat mapping (a YAML preset); unknown keys and wrong types are errors."""
    return PalmConfig(**checked_values(PalmConfig, config, prefix)).validate(prefix, family)


def parameter_count(module: nn.Module) -> int:
    """Number of trainable parameters (tied embeddings counted once)."""
    return sum(p.numel() for p in module.parameters() if p.requires_grad)


@dataclass
class StreamState:
    """What a window hands to the next: every LSTM layer's (h, c) and the span attention's memory."""

    lstm: list[tuple[Tensor, Tensor]]
    span: SpanMemory | None

    def detach(self) -> StreamState:
        return StreamState([(h.detach(), c.detach()) for h, c in self.lstm],
                           None if self.span is None else self.span.detach())


@dataclass
class Forward:
    logits: Tensor  # [B, T, V]
    raw_last: Tensor  # [B, T, d_embedding] the last LSTM layer's output (TAR)
    dropped_last: Tensor  # the same after the output dropout (AR)
    log_weights: Tensor | None  # [B, T, m] log ω (PaLM)
    state: StreamState


class PalmLM(pl.LightningModule):
    """AWD-LSTM / PaLM-U / PaLM-S / PaLM-RB: forward, losses, NT-ASGD, stream training and validation."""

    def __init__(self, config: PalmConfig | Mapping[str, Any], family: str = "palm-u"):
        super().__init__()
        self.config = c = (config if isinstance(config, PalmConfig)
                           else config_from_dict(config, family=family)).validate(family=family)
        self.family = family
        self.save_hyperparameters({"config": asdict(c), "family": family})
        self.embedding = nn.Embedding(c.vocab_size, c.d_embedding)
        sizes = [c.d_embedding] + [c.d_hidden] * (c.n_layers - 1) + [c.d_embedding]
        self.lstms = nn.ModuleList(WeightDroppedLSTM(sizes[k], sizes[k + 1], c.weight_drop)
                                   for k in range(c.n_layers))
        self.output_bias = nn.Parameter(torch.zeros(c.vocab_size))
        self.span_attention: SpanAttention | None = None
        if family != "awd-lstm":
            self.span_attention = SpanAttention(
                c.d_hidden, c.d_rrnn, c.d_span_mlp, c.max_span, right_branching=family == "palm-rb",
                rrnn_input=c.rrnn_input, span_repr=c.span_repr, start=c.span_start,
                repr_dropout=c.dropout_hidden if c.span_dropouts == "official" else 0.0)
            mix_in = 2 * c.d_rrnn + (c.d_hidden if c.mix_input == "both" else 0)
            self.mix = nn.Linear(mix_in, c.d_hidden)  # Eq. 6's MLP
            self.mix_gate = nn.Linear(c.d_hidden + 2 * c.d_rrnn, c.d_hidden)  # Eq. 6's g_r
        # the official uniform initialisation of the tied matrix (PaLM's, or AWD-LSTM's ±0.1)
        init = (3.0 / c.d_embedding) ** 0.5 if c.initialisation == "palm" else 0.1
        nn.init.uniform_(self.embedding.weight, -init, init)
        for lstm in self.lstms:
            if c.initialisation == "palm":  # AWD-LSTM keeps nn.LSTM's own initialisation
                init_lstm_(lstm.lstm)
        if self.span_attention is not None:
            init_linear_(self.mix)
            init_linear_(self.mix_gate, gain=nn.init.calculate_gain("sigmoid"))
        self.nt_history: list[float] = []
        self.switched_at: int | None = None  # validations before the switch to averaged SGD
        self.finetune_history: list[float] | None = None  # None: not finetuning
        self._best: tuple[float, dict[str, Tensor]] | None = None  # before finetuning: the best validation
        self._validating_in = "base"  # the stage of the running validation (``stage``)
        self._train_state: StreamState | None = None
        self._val_state: StreamState | None = None
        self._raw_weights: dict[str, Tensor] | None = None
        self._val_sums: list[float] = [0.0, 0.0]  # summed NLL and tokens of the running validation

    # ---- forward -------------------------------------------------------------------------------------------
    def forward(self, inputs: Tensor, state: StreamState | None = None) -> Forward:
        """One window [B, T] of token ids, continuing ``state`` (None: the streams start here)."""
        c, train = self.config, self.training
        h = locked_dropout(embedding_dropout(self.embedding, inputs, c.dropout_embedding, train),
                           c.dropout_input, train)
        lstm_states, log_weights, span_memory = [], None, None
        for k, lstm in enumerate(self.lstms):
            h, lstm_state = lstm(h, None if state is None else state.lstm[k])
            lstm_states.append(lstm_state)
            raw = h
            if k < c.n_layers - 1:
                h = locked_dropout(h, c.dropout_hidden, train)
            if k == c.n_layers - 2 and self.span_attention is not None:
                attended = self.span_attention(h, None if state is None else state.span)
                log_weights, span_memory = attended.log_weights, attended.memory
                context = locked_dropout(attended.context, c.dropout_hidden, train)
                both = torch.cat([h, context], dim=-1)
                gate = torch.sigmoid(self.mix_gate(both))
                mixed = torch.tanh(self.mix(both if c.mix_input == "both" else context))
                if c.span_dropouts == "official":  # the undropped LSTM output passes the gate, dropped after
                    mixed = locked_dropout(mixed, c.dropout_hidden, train)
                    h = locked_dropout(gate * mixed + (1.0 - gate) * raw, c.dropout_hidden, train)
                else:
                    h = gate * mixed + (1.0 - gate) * h
        dropped = locked_dropout(h, c.dropout, train)
        logits = F.linear(dropped, self.embedding.weight, self.output_bias)
        return Forward(logits, h, dropped, log_weights, StreamState(lstm_states, span_memory))

    def losses(self, batch: StreamBatch, out: Forward) -> dict[str, Tensor]:
        """Mean LM cross-entropy, AR, TAR and (palm-s) the mean span cross-entropy of Eq. 5."""
        c = self.config
        steps = out.raw_last[:, 1:] - out.raw_last[:, :-1]  # none in a one-token window (an epoch's last)
        terms = {"lm": F.cross_entropy(out.logits.flatten(0, 1).float(), batch.targets.flatten()),
                 "ar": c.ar_alpha * out.dropped_last.pow(2).mean(),
                 "tar": c.tar_beta * steps.pow(2).mean() if steps.shape[1] else steps.new_zeros(())}
        if self.family == "palm-s":
            if batch.span_targets is None or out.log_weights is None:
                raise InputError("palm-s trains on gold span targets: the batch has none", "data")
            # −Σ_i y log ω over the spans that exist: a gold span cut by the start of a stream row (batchify)
            # does not exist in that row and is left out
            y = batch.span_targets.to(out.log_weights.dtype)
            exists = torch.isfinite(out.log_weights)
            entropy = -torch.where((y > 0) & exists, y * out.log_weights, torch.zeros_like(y)).sum(-1)
            terms["span"] = c.span_loss_weight * entropy.mean()
        return terms

    # ---- scoring -------------------------------------------------------------------------------------------
    @torch.no_grad()
    def token_logprobs(self, inputs: Tensor, targets: Tensor) -> Tensor:
        """log p(targets | inputs so far) [B, T] for streams that start at ``inputs`` [B, T] (eval mode)."""
        return self(inputs).logits.float().log_softmax(-1).gather(-1, targets[..., None]).squeeze(-1)

    @torch.no_grad()
    def all_span_scores(self, inputs: Tensor) -> Tensor:
        """Scores [B, T, T] of spans of every length (``SpanAttention.all_span_scores``) for streams that start
        at ``inputs`` [B, T]: what the parser reads (§2.2)."""
        if self.span_attention is None:
            raise InputError(f"a {self.family} model has no span attention to parse with", "family")
        c = self.config
        h = self.embedding(inputs)
        for lstm in self.lstms[: c.n_layers - 1]:
            h, _ = lstm(h)
        return self.span_attention.all_span_scores(h)

    # ---- NT-ASGD -------------------------------------------------------------------------------------------
    def nt_asgd(self) -> NTASGD:
        optimizer = self.optimizers()
        return getattr(optimizer, "optimizer", optimizer)  # type: ignore[return-value]

    def averaged_weights(self) -> dict[str, Tensor]:
        """Parameter name -> averaged value (empty before the switch to averaged SGD)."""
        averages = self.nt_asgd().averages() if self._trainer is not None else {}
        return {name: averages[p] for name, p in self.named_parameters() if p in averages}

    def _use_averaged_weights(self) -> None:
        averaged = self.averaged_weights()
        if averaged:
            params = dict(self.named_parameters())
            self._raw_weights = {name: params[name].detach().clone() for name in averaged}
            with torch.no_grad():
                for name, value in averaged.items():
                    params[name].copy_(value)

    def _restore_raw_weights(self) -> None:
        if self._raw_weights is not None:
            params = dict(self.named_parameters())
            with torch.no_grad():
                for name, value in self._raw_weights.items():
                    params[name].copy_(value)
            self._raw_weights = None

    def stage(self) -> str:
        """``base`` (SGD or Adam), ``averaged`` (averaged SGD) or ``finetune`` (the finetuning stage)."""
        return ("finetune" if self.finetune_history is not None
                else "averaged" if self.nt_asgd().averaging else "base")

    def _remember_if_best(self, loss: float) -> None:
        """Keep the weights just validated when they are the best so far (a later stage starts there)."""
        c = self.config
        if ((c.reload_at_switch or c.finetune_at) and self.finetune_history is None
                and (self._best is None or loss < self._best[0])):
            self._best = (loss, {name: p.detach().clone() for name, p in self.named_parameters()})

    def _load_best(self) -> None:
        """The weights of the best validation so far back into the model."""
        assert self._best is not None
        params = dict(self.named_parameters())
        with torch.no_grad():
            for name, value in self._best[1].items():
                params[name].copy_(value)

    def _switch(self, validations: int) -> None:
        """Start averaged SGD (from the best validated weights with ``reload_at_switch``, PaLM's main.py)."""
        if self.config.reload_at_switch and self._best is not None:
            self._load_best()
        self.nt_asgd().start_averaging(self.config.asgd_lr or None)
        self.switched_at = validations

    def _after_validation(self, loss: float) -> None:
        """The switch to averaged SGD, decided on the validation loss (Merity et al.'s NT condition); the start
        of the finetuning stage; in that stage, the end of the run when the NT condition holds again."""
        optimizer, c = self.nt_asgd(), self.config
        if self.finetune_history is not None:
            if (len(self.finetune_history) >= c.finetune_min
                    and nonmonotone_trigger(self.finetune_history, loss, c.nonmono)):
                self.trainer.should_stop = True
            self.finetune_history.append(loss)
            return
        validations = len(self.nt_history) + 1
        if c.finetune_at and validations >= c.finetune_at:
            self._start_finetuning()
        elif not optimizer.averaging:
            due = (validations >= c.switch_after if c.switch_after
                   else not c.switch_after_epochs and nonmonotone_trigger(self.nt_history, loss, c.nonmono))
            if due:
                self._switch(validations)
        self.nt_history.append(loss)

    def _start_finetuning(self) -> None:
        """AWD-LSTM's finetune: the best validated weights back, and a fresh averaged SGD from them."""
        self._load_best()
        self.nt_asgd().restart_averaging(self.config.asgd_lr or None)
        self.finetune_history, self._best = [], None

    # ---- Lightning hooks -----------------------------------------------------------------------------------
    def training_step(self, batch: StreamBatch, batch_idx: int) -> Tensor:
        c, optimizer = self.config, self.nt_asgd()
        if c.switch_after_epochs and batch.epoch >= c.switch_after_epochs and not optimizer.averaging:
            self._switch(len(self.nt_history))  # PaLM: Adam for exactly that many epochs
        state = None if batch.reset else self._train_state
        out = self(batch.inputs, state)
        self._train_state = out.state.detach()
        terms = self.losses(batch, out)
        loss = sum(terms.values())
        for group in optimizer.param_groups:
            group["lr_scale"] = batch.inputs.shape[1] / c.bptt
        tokens = batch.targets.numel()
        self.log("train/loss", loss, prog_bar=True, batch_size=tokens)
        for key, value in terms.items():
            self.log(f"train/{key}", value, batch_size=tokens)
        self.log("train/averaging", float(optimizer.averaging), batch_size=tokens)
        if self.span_attention is not None and (self.global_step + 1) % max(self.trainer.log_every_n_steps, 1) == 0:
            for key, norm in self.span_attention_gradient_norms(terms).items():
                self.log(f"train/grad_norm_span_attention_{key}", norm, batch_size=tokens)
        return loss  # type: ignore[return-value]

    def span_attention_gradient_norms(self, terms: Mapping[str, Tensor]) -> dict[str, float]:
        """L2 norm of the gradient of the LM loss (``lm``) and of the span loss (``span``, λ included; palm-s)
        on the span attention's weights, each term alone, before clipping: what λ weighs against (logged at
        the logging steps, as ``train/grad_norm_span_attention_{lm,span}``)."""
        assert self.span_attention is not None
        params = [p for p in self.span_attention.parameters() if p.requires_grad]
        out = {}
        for key in ("lm", "span"):
            if key in terms and terms[key].requires_grad:
                grads = torch.autograd.grad(terms[key], params, retain_graph=True, allow_unused=True)
                norms = [g.float().norm() for g in grads if g is not None]
                out[key] = float(torch.linalg.vector_norm(torch.stack(norms))) if norms else 0.0
        return out

    def on_validation_epoch_start(self) -> None:
        self._validating_in = self.stage()
        self._use_averaged_weights()
        self._val_state = None
        self._val_sums = [0.0, 0.0]

    def validation_step(self, batch: StreamBatch, batch_idx: int) -> None:
        out = self(batch.inputs, None if batch.reset else self._val_state)
        self._val_state = out.state
        nll = F.cross_entropy(out.logits.flatten(0, 1).float(), batch.targets.flatten(), reduction="sum")
        tokens = batch.targets.numel()
        self._val_sums[0] += float(nll)
        self._val_sums[1] += tokens
        self.log("val/loss", nll / tokens, prog_bar=True, batch_size=tokens, on_epoch=True)

    def on_validation_epoch_end(self) -> None:
        validated = bool(self._val_sums[1]) and not self.trainer.sanity_checking
        if validated:
            self._remember_if_best(self._val_sums[0] / self._val_sums[1])
        self._restore_raw_weights()
        if validated:
            self._after_validation(self._val_sums[0] / self._val_sums[1])

    def configure_optimizers(self) -> NTASGD:
        c = self.config
        return NTASGD(self.parameters(), lr=c.lr, weight_decay=c.weight_decay, base=c.optimizer)

    def configure_gradient_clipping(self, optimizer: torch.optim.Optimizer, gradient_clip_val: float | None = None,
                                    gradient_clip_algorithm: str | None = None) -> None:
        """Always clip by global norm to ``config.grad_clip_norm`` (AWD-LSTM: 0.25)."""
        self.clip_gradients(optimizer, gradient_clip_val=self.config.grad_clip_norm, gradient_clip_algorithm="norm")

    def on_save_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        """The averaged weights are the checkpoint's model; the raw ones and the carried state allow resuming."""
        checkpoint["nt_asgd_history"] = list(self.nt_history)
        checkpoint["nt_asgd_stage"] = {"switched_at": self.switched_at, "finetune_history": self.finetune_history,
                                       "best": None if self._best is None else [self._best[0], self._best[1]],
                                       "validated_in": self._validating_in}
        if self._train_state is not None:
            checkpoint["stream_state"] = {"lstm": self._train_state.lstm, "span": None if self._train_state.span
                                          is None else [self._train_state.span.inputs, self._train_state.span.valid]}
        averaged = self.averaged_weights()
        if averaged:
            checkpoint["training_state_dict"] = dict(checkpoint["state_dict"])
            checkpoint["state_dict"] = {**checkpoint["state_dict"], **{k: v.detach().clone()
                                                                        for k, v in averaged.items()}}

    def on_load_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        """Resuming training: the raw weights, the NT history and the state carried into the next window."""
        self.nt_history = list(checkpoint.get("nt_asgd_history", []))
        stage = checkpoint.get("nt_asgd_stage") or {}
        self.switched_at = stage.get("switched_at")
        self.finetune_history = stage.get("finetune_history")
        self._best = None if stage.get("best") is None else (float(stage["best"][0]), dict(stage["best"][1]))
        self._validating_in = stage.get("validated_in", "base")
        if "training_state_dict" in checkpoint:
            checkpoint["state_dict"] = checkpoint["training_state_dict"]
        saved = checkpoint.get("stream_state")
        if saved is not None:
            span = None if saved["span"] is None else SpanMemory(*saved["span"])
            self._train_state = StreamState([tuple(s) for s in saved["lstm"]], span)  # type: ignore[misc]


def build(config: Mapping[str, Any] | PalmConfig, family: str = "palm-u") -> PalmLM:
    """The LightningModule of ``family`` for a config (a ``PalmConfig`` or a flat dict of its fields)."""
    return PalmLM(config, family)
