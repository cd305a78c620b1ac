"""The batched fixed-stack RNNG (Dyer et al. 2016 as Noji & Oseki 2021 batch it), a LightningModule.

The stack is a fixed-size tensor on the device: per sentence, ``stack_size`` element vectors (words,
nonterminal embeddings, composed constituents), the stack LSTM's states after each (index 0: the state after
the start embedding), the stack positions of the open nonterminals, and pointers (words shifted, elements on
the stack, open nonterminals). Every step advances all sentences of the batch by one action at once:
``SHIFT`` pushes the next word's embedding, ``NT(X)`` pushes X's embedding and records it as open, ``REDUCE``
composes the open nonterminal and its children with a bidirectional LSTM (forward over ``X c1 .. cn``,
backward over ``X cn .. c1``; a linear layer and ReLU over both ends) and replaces them by the result; then
the stack LSTM reads the pushed vector from the state below it. Before each action, the top state through a
linear layer and ReLU gives the action distribution and, for ``SHIFT``, the word distribution (its output
layer tied to the word embeddings).

The loss is the official one: the NLL of every action (over all actions, valid or not) plus that of every
shifted word, summed, divided by the batch's sentences (``loss_normalize: batch``, the official default) or
its actions, words or nothing. ``val/loss`` is the NLL per action and word (the log of the official
validation perplexity). Parameter names differ from the official ones; ``official_state_dict`` maps theirs.
In-order (``strategy: in_order``), ``NT(X)`` puts X under the left corner on the stack (the composition reads
``X c1 .. cn``) while the stack LSTM reads X after the left corner, as the official ``FixedInOrderStack``;
``FINISH`` ends the sentence. Only the LSTM composition is built (not the official attention composition).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import pytorch_lightning as pl
import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from lightning_modules.errors import InputError
from lightning_modules.families.rnng.encoding import STRATEGIES, TOP_DOWN
from lightning_modules.models.config_fields import checked_values

LOSS_NORMALIZE = ("batch", "action", "token", "sum")
COMPOSITIONS = ("lstm",)
SHIFT_ID, REDUCE_ID = 1, 2


@dataclass(frozen=True)
class RNNGConfig:
    """Architecture and optimisation (defaults: the official train.py's)."""

    vocab_size: int = 10000
    num_nts: int = 26
    strategy: str = TOP_DOWN
    w_dim: int = 256
    h_dim: int = 256
    num_layers: int = 2
    dropout: float = 0.3
    composition: str = "lstm"
    stack_size: int = 100  # the fixed stack of evaluation (the official beam's stack_size_bound)
    max_open_nts: int = 100
    max_cons_nts: int = 8
    lr: float = 0.001
    grad_clip_norm: float = 5.0
    loss_normalize: str = "batch"
    param_init: float = 0.0  # > 0: every parameter uniform in [-param_init, param_init] (official --param_init)

    @property
    def nt_begin(self) -> int:
        """The id of the first NT(X) action (the official action dictionaries')."""
        return 4 if self.strategy != TOP_DOWN else 3

    @property
    def num_actions(self) -> int:
        return self.nt_begin + self.num_nts

    def validate(self, prefix: str = "model.") -> RNNGConfig:
        """Raise ``InputError`` naming the key of the first impossible value; return self."""
        def bad(key: str, message: str) -> InputError:
            return InputError(f"{message} (got {getattr(self, key)!r})", f"{prefix}{key}")

        for key in ("vocab_size", "num_nts", "w_dim", "h_dim", "num_layers", "max_open_nts", "max_cons_nts"):
            if getattr(self, key) < 1:
                raise bad(key, "must be positive")
        if self.stack_size < 3:
            raise bad("stack_size", "must be at least 3")
        if not 0.0 <= self.dropout < 1.0:
            raise bad("dropout", "must be in [0, 1)")
        for key, allowed in (("strategy", STRATEGIES), ("composition", COMPOSITIONS),
                             ("loss_normalize", LOSS_NORMALIZE)):
            if getattr(self, key) not in allowed:
                raise bad(key, f"must be one of {', '.join(allowed)}")
        for key in ("lr", "grad_clip_norm", "param_init"):
            if getattr(self, key) < 0:
                raise bad(key, "must be >= 0")
        return self


def config_from_dict(config: Mapping[str, Any], prefix: str = "model.") -> RNNGConfig:
    """A validated config from a flat mapping (a YAML preset); unknown keys and wrong types are errors."""
    return RNNGConfig(**checked_values(RNNGConfig, config, prefix)).validate(prefix)


def build(config: Mapping[str, Any] | RNNGConfig) -> RNNG:
    """The LightningModule for a config (an ``RNNGConfig`` or a flat dict of its fields)."""
    return RNNG(config if isinstance(config, RNNGConfig) else config_from_dict(config))


@dataclass
class Batch:
    """Sentences as padded tensors: word ids [B, N] and action ids [B, T] (0 pads), and the stack they need."""

    token_ids: Tensor
    action_ids: Tensor
    stack_size: int

    def to(self, device: Any) -> Batch:
        return Batch(self.token_ids.to(device), self.action_ids.to(device), self.stack_size)


def collate(examples: Sequence[Any]) -> Batch:
    """Pad ``encoding.Example``s into a ``Batch`` (the stack: the largest need, at least 3)."""
    words = max(1, max(len(e.token_ids) for e in examples))
    actions = max(len(e.action_ids) for e in examples)
    return Batch(torch.tensor([list(e.token_ids) + [0] * (words - len(e.token_ids)) for e in examples]),
                 torch.tensor([list(e.action_ids) + [0] * (actions - len(e.action_ids)) for e in examples]),
                 max(3, max(e.stack_size for e in examples)))


class StackLSTM(nn.Module):
    """A multi-layer LSTM advanced one step at a time from given states ([B, layers, h])."""

    def __init__(self, input_size: int, hidden_size: int, num_layers: int, dropout: float):
        super().__init__()
        self.cells = nn.ModuleList(nn.LSTMCell(input_size if i == 0 else hidden_size, hidden_size)
                                   for i in range(num_layers))
        self.drop = nn.Dropout(dropout)

    def forward(self, x: Tensor, h: Tensor, c: Tensor) -> tuple[Tensor, Tensor]:
        hs, cs = [], []
        for i, cell in enumerate(self.cells):
            h_i, c_i = cell(x if i == 0 else self.drop(x), (h[:, i], c[:, i]))
            hs.append(h_i)
            cs.append(c_i)
            x = h_i
        return torch.stack(hs, 1), torch.stack(cs, 1)


class Composition(nn.Module):
    """A constituent's vector: a bidirectional LSTM over ``X c1 .. cn X``, its forward state after cn and
    backward state after c1, through a linear layer and ReLU (Dyer et al. 2016 §4.1)."""

    def __init__(self, dim: int, dropout: float):
        super().__init__()
        self.dim = dim
        self.lstm = nn.LSTM(dim, dim, bidirectional=True, batch_first=True)
        self.drop = nn.Dropout(dropout)
        self.out = nn.Linear(2 * dim, dim)

    def forward(self, label: Tensor, children: Tensor, n_children: Tensor) -> Tensor:
        """label [R, d], children [R, C, d] (the first n_children[r] real), n_children [R] -> [R, d]."""
        rows = torch.arange(len(label), device=label.device)
        seq = torch.cat([label[:, None], children, torch.zeros_like(label)[:, None]], 1)
        closing = torch.arange(seq.size(1), device=label.device)[None] == (n_children + 1)[:, None]
        seq = torch.where(closing[..., None], label[:, None], seq)
        packed = pack_padded_sequence(seq, (n_children + 2).cpu(), batch_first=True, enforce_sorted=False)
        states, _ = pad_packed_sequence(self.lstm(packed)[0], batch_first=True)
        both = torch.cat([states[rows, n_children, : self.dim], states[:, 1, self.dim:]], -1)
        return F.relu(self.out(self.drop(both)))


class FixedStack:
    """The per-sentence stacks of a batch as tensors (module doc); ``push``/``reduce`` act on row subsets."""

    def __init__(self, h0: Tensor, c0: Tensor, size: int, dim: int):
        batch, layers, hidden = h0.shape
        self.size = size
        self.rows = torch.arange(batch, device=h0.device)
        self.trees = h0.new_zeros(batch, size, dim)
        self.hiddens = h0.new_zeros(batch, size + 1, layers, hidden)
        self.cells = h0.new_zeros(batch, size + 1, layers, hidden)
        self.hiddens[:, 0], self.cells[:, 0] = h0, c0
        self.top = torch.zeros(batch, dtype=torch.long, device=h0.device)  # elements on the stack
        self.pointer = torch.zeros_like(self.top)  # words shifted
        self.open = torch.zeros(batch, size, dtype=torch.long, device=h0.device)  # positions of open NTs
        self.n_open = torch.zeros_like(self.top)

    def select(self, index: Tensor) -> FixedStack:
        """A new stack whose row i is a copy of row ``index[i]`` (beam search: hypotheses kept or extended)."""
        out = FixedStack.__new__(FixedStack)
        out.size = self.size
        out.rows = torch.arange(len(index), device=index.device)
        for name in ("trees", "hiddens", "cells", "top", "pointer", "open", "n_open"):
            setattr(out, name, getattr(self, name)[index])
        return out

    @staticmethod
    def concat(stacks: Sequence[FixedStack]) -> FixedStack:
        """The rows of several stacks (of one size) as one stack."""
        out = FixedStack.__new__(FixedStack)
        out.size = stacks[0].size
        for name in ("trees", "hiddens", "cells", "top", "pointer", "open", "n_open"):
            setattr(out, name, torch.cat([getattr(s, name) for s in stacks]))
        out.rows = torch.arange(len(out.top), device=out.top.device)
        return out

    def push(self, rows: Tensor, vectors: Tensor, opens: bool) -> None:
        if opens:
            self.open[rows, self.n_open[rows]] = self.top[rows]
            self.n_open[rows] += 1
        self.trees[rows, self.top[rows]] = vectors
        self.top[rows] += 1

    def open_under_top(self, rows: Tensor, vectors: Tensor) -> None:
        """In-order ``NT(X)``: X goes under the top element (its left corner), which stays on top."""
        at = self.top[rows] - 1
        self.trees[rows, at + 1] = self.trees[rows, at]
        self.trees[rows, at] = vectors
        self.open[rows, self.n_open[rows]] = at
        self.n_open[rows] += 1
        self.top[rows] += 1

    def children(self, rows: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """The open nonterminal's vector, its children (padded) and their count, for each row."""
        at = self.open[rows, self.n_open[rows] - 1]
        count = self.top[rows] - at - 1
        index = (at + 1)[:, None] + torch.arange(int(count.max()), device=at.device)[None]
        return self.trees[rows, at], self.trees[rows[:, None], index.clamp(max=self.size - 1)], count

    def replace(self, rows: Tensor, vectors: Tensor) -> None:
        """Close the open nonterminal of each row: its children and it become ``vectors``."""
        at = self.open[rows, self.n_open[rows] - 1]
        self.trees[rows, at] = vectors
        self.top[rows] = at + 1
        self.n_open[rows] -= 1

    def state(self) -> tuple[Tensor, Tensor]:
        """The states below the top element (what the stack LSTM reads the top from)."""
        return self.hiddens[self.rows, self.top - 1], self.cells[self.rows, self.top - 1]

    def set_state(self, h: Tensor, c: Tensor) -> None:
        top = self.top.clone()  # autograd keeps the index; the pointers change in place later
        self.hiddens[self.rows, top] = h
        self.cells[self.rows, top] = c


class RNNG(pl.LightningModule):
    """The generative RNNG p(x, y) over top-down actions, batched on fixed-size stacks (module doc)."""

    def __init__(self, config: RNNGConfig | Mapping[str, Any]):
        super().__init__()
        self.config = config if isinstance(config, RNNGConfig) else config_from_dict(config)
        self.save_hyperparameters({"config": asdict(self.config)})
        c = self.config
        self.drop = nn.Dropout(c.dropout)
        self.word_emb = nn.Embedding(c.vocab_size, c.w_dim, padding_idx=0)
        self.nt_emb = nn.Embedding(c.num_nts, c.w_dim)
        self.start_emb = nn.Embedding(1, c.w_dim)
        self.stack_lstm = StackLSTM(c.w_dim, c.h_dim, c.num_layers, c.dropout)
        self.composition = Composition(c.w_dim, c.dropout)
        self.state_out = nn.Linear(c.h_dim, c.w_dim)
        self.action_out = nn.Linear(c.w_dim, c.num_actions)
        self.word_out = nn.Linear(c.w_dim, c.vocab_size)
        self.word_out.weight = self.word_emb.weight  # tied
        if c.param_init > 0:
            for p in self.parameters():
                nn.init.uniform_(p, -c.param_init, c.param_init)

    # -- the network -----------------------------------------------------------------------------------------
    def initial_state(self, batch: int) -> tuple[Tensor, Tensor]:
        """The stack LSTM's state after reading the start embedding from zeros ([B, layers, h] each)."""
        c = self.config
        start = self.drop(self.start_emb.weight).expand(batch, -1)
        zeros = start.new_zeros(batch, c.num_layers, c.h_dim)
        return self.stack_lstm(start, zeros, zeros)

    def states(self, token_ids: Tensor, action_ids: Tensor, stack_size: int) -> Tensor:
        """The top stack state (top layer) before each action, [B, T, h]: teacher forcing over the batch."""
        batch, steps = action_ids.shape
        c = self.config
        words = self.drop(self.word_emb(token_ids))
        stack = FixedStack(*self.initial_state(batch), stack_size, c.w_dim)
        out = [stack.hiddens[:, 0, -1]]
        for t in range(steps - 1):
            out.append(self.advance(stack, action_ids[:, t], words))
        return torch.stack(out, 1)

    def advance(self, stack: FixedStack, action: Tensor, words: Tensor) -> Tensor:
        """Apply one action per stack row (0: none) and run the stack LSTM; the new top states [B, h].
        ``words`` [B, N, w] are the rows' word vectors (a SHIFT pushes the one at the row's pointer)."""
        c = self.config
        pushed = words.new_zeros(len(action), c.w_dim)
        shift = (action == SHIFT_ID).nonzero().squeeze(1)
        if len(shift):
            vectors = words[shift, stack.pointer[shift]]
            stack.push(shift, vectors, opens=False)
            stack.pointer[shift] += 1
            pushed[shift] = vectors
        opening = (action >= c.nt_begin).nonzero().squeeze(1)
        if len(opening):
            vectors = self.drop(self.nt_emb(action[opening] - c.nt_begin))
            if c.strategy == TOP_DOWN:
                stack.push(opening, vectors, opens=True)
            else:  # the stack LSTM still reads X after the left corner (the official fixed in-order stack)
                stack.open_under_top(opening, vectors)
            pushed[opening] = vectors
        reduce = (action == REDUCE_ID).nonzero().squeeze(1)
        if len(reduce):
            vectors = self.composition(*stack.children(reduce))
            stack.replace(reduce, vectors)
            pushed[reduce] = vectors
        h, cell = self.stack_lstm(pushed, *stack.state())
        stack.set_state(h, cell)
        return h[:, -1]

    def top_logits(self, stack: FixedStack) -> tuple[Tensor, Tensor]:
        """Action and word logits from each row's top state ([B, A], [B, V]; float32)."""
        state = F.relu(self.state_out(self.drop(stack.hiddens[stack.rows, stack.top][:, -1])))
        return self.action_out(state).float(), self.word_out(state).float()

    def logprobs(self, batch: Batch) -> tuple[Tensor, Tensor]:
        """Per action: log p(action) [B, T] and log p(word) on SHIFT steps (0 elsewhere) [B, T]; 0 on pads."""
        states = F.relu(self.state_out(self.drop(self.states(batch.token_ids, batch.action_ids, batch.stack_size))))
        actions = batch.action_ids
        real = actions != 0
        action_lp = self.action_out(states).float().log_softmax(-1).gather(-1, actions[..., None]).squeeze(-1)
        word_lp = torch.zeros_like(action_lp)
        shift = actions == SHIFT_ID
        if shift.any():
            words = batch.token_ids[batch.token_ids != 0]  # row-major, as the SHIFT steps are
            word_lp[shift] = self.word_out(states[shift]).float().log_softmax(-1).gather(
                -1, words[:, None]).squeeze(-1)
        return action_lp.masked_fill(~real, 0.0), word_lp

    def action_logprobs(self, batch: Batch) -> Tensor:
        """log p(action) + log p(word) for SHIFT, per action [B, T] (0 on pads): each sums to log p(x, y)."""
        action_lp, word_lp = self.logprobs(batch)
        return action_lp + word_lp

    def loss_terms(self, batch: Batch) -> dict[str, Tensor]:
        action_lp, word_lp = self.logprobs(batch)
        return {"action_nll": -action_lp.sum(), "word_nll": -word_lp.sum(),
                "actions": (batch.action_ids != 0).sum(), "words": (batch.token_ids != 0).sum(),
                "sentences": torch.tensor(len(batch.action_ids))}

    def loss(self, terms: Mapping[str, Tensor]) -> Tensor:
        total = terms["action_nll"] + terms["word_nll"]
        divisor = {"batch": terms["sentences"], "action": terms["actions"], "token": terms["words"],
                   "sum": torch.tensor(1)}[self.config.loss_normalize]
        return total / divisor.clamp(min=1)

    # -- Lightning hooks -------------------------------------------------------------------------------------
    def training_step(self, batch: Batch, batch_idx: int) -> Tensor:
        terms = self.loss_terms(batch)
        loss = self.loss(terms)
        self.log("train/loss", loss, prog_bar=True, batch_size=len(batch.action_ids))
        return loss

    def validation_step(self, batch: Batch, batch_idx: int) -> None:
        terms = self.loss_terms(batch)
        count = int(terms["actions"] + terms["words"])
        self.log("val/loss", (terms["action_nll"] + terms["word_nll"]) / max(count, 1), prog_bar=True,
                 batch_size=count, on_epoch=True)
        for key in ("action_nll", "word_nll", "actions", "words"):
            self.log(f"val/{key}", terms[key].float(), reduce_fx="sum", on_epoch=True, batch_size=1)

    def transfer_batch_to_device(self, batch: Batch, device: torch.device, dataloader_idx: int) -> Batch:
        return batch.to(device)

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.Adam(self.parameters(), lr=self.config.lr)

    def configure_gradient_clipping(self, optimizer: torch.optim.Optimizer, gradient_clip_val: float | None = None,
                                    gradient_clip_algorithm: str | None = None) -> None:
        """Clip by global norm to ``config.grad_clip_norm`` (the official --max_grad_norm 5)."""
        if self.config.grad_clip_norm > 0:
            self.clip_gradients(optimizer, gradient_clip_val=self.config.grad_clip_norm,
                                gradient_clip_algorithm="norm")


OFFICIAL_NAMES = (  # official state_dict prefix -> ours
    ("emb.0.", "word_emb."), ("rnng.nt_emb.0.", "nt_emb."), ("rnng.initial_emb.0.", "start_emb."),
    ("rnng.stack_rnn.lstm.", "stack_lstm.cells."), ("rnng.output.1.", "state_out."),
    ("rnng.composition.rnn.", "composition.lstm."), ("rnng.composition.output.1.", "composition.out."),
    ("vocab_mlp.", "word_out."), ("action_mlp.", "action_out."),
)


def official_state_dict(state: Mapping[str, Tensor], location: str = "checkpoint",
                        num_nts: int | None = None) -> dict[str, Tensor]:
    """An official ``FixedStackRNNG`` state_dict (LSTM composition) under our parameter names. The official
    in-order model sizes its nonterminal table by ``TopDownActionDict.num_nts`` (one row more than it has
    nonterminals, never read): with ``num_nts`` the table keeps its first ``num_nts`` rows."""
    out = {}
    for key, value in state.items():
        for theirs, ours in OFFICIAL_NAMES:
            if key.startswith(theirs):
                out[ours + key[len(theirs):]] = value
                break
        else:
            raise InputError(f"not a parameter of the official FixedStackRNNG with LSTM composition: {key}",
                             location)
    if num_nts is not None and "nt_emb.weight" in out:
        out["nt_emb.weight"] = out["nt_emb.weight"][:num_nts]
    return out
