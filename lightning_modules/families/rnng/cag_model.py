"""Composition Attention Grammars (Yoshida & Oseki 2022, osekilab/CAG), batched on fixed-size stacks.

A CAG is the batched fixed-stack RNNG (``lightning_modules.families.rnng.model``: the same actions, stack,
bidirectional-LSTM composition, output layers and official loss) whose stack LSTM is replaced by
self-attention over the stack: a GPT-2 decoder (learned position embeddings over stack positions, pre-norm
blocks of causal multi-head attention and a ``gelu_new`` MLP, a final layer norm) reads each element as it is
pushed, attending to the keys and values cached for the elements below it. A ``REDUCE`` replaces the open
constituent by its composed vector at the nonterminal's position, which the decoder reads afresh; the keys
and values below stay valid because a stack never changes below its top.

The official ``FixedStack`` keeps keys and values per stack position; here they live in the RNNG stack's state
tensors: ``hiddens[b, p]`` holds, for stack position p (0: the start embedding), the keys of every layer and,
in its last slot, the decoder's output (what the action and word layers read), ``cells[b, p]`` the values.
So the RNNG's teacher-forced unrolling, loss and word-synchronous beam run on a CAG unchanged.

Deviations, all inert in the golden runs and the presets: a single ``embd_dropout`` serves the embeddings
and the output layer (officially the output layer uses ``dropout``; the paper sets both to 0.1); ``h_dim``
must equal ``w_dim`` (the official decoder adds its position embeddings to the element vectors and fails
otherwise); only the top-down order is built (the official in-order CAG is commented out of its ``train.py``);
masked attention scores are -inf (GPT-2's are -1e4, which softmax makes the same to float32 precision).
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from lightning_modules.errors import InputError
from lightning_modules.families.rnng.encoding import TOP_DOWN
from lightning_modules.families.rnng.model import RNNG, SHIFT_ID, FixedStack, RNNGConfig
from lightning_modules.models.config_fields import checked_values


@dataclass(frozen=True)
class CAGConfig(RNNGConfig):
    """The RNNG's fields (``RNNGConfig``) with the stack decoder's heads and the embeddings' dropout; defaults:
    the official README's training command (top-down, LSTM composition)."""

    num_layers: int = 3
    num_heads: int = 4
    dropout: float = 0.1
    embd_dropout: float = 0.1
    stack_size: int = 100  # the official --max_stack_size: the decoder's positions are 0 .. stack_size

    def validate(self, prefix: str = "model.") -> CAGConfig:
        """The RNNG's checks, then the CAG's: top-down only, the decoder's width and heads."""
        super().validate(prefix)
        checks = (("strategy", self.strategy == TOP_DOWN, "the official CAG is top-down only"),
                  ("num_heads", self.num_heads >= 1, "must be positive"),
                  ("h_dim", self.h_dim == self.w_dim, f"must equal w_dim ({self.w_dim}): the stack decoder reads "
                                                      "the element vectors"),
                  ("num_heads", self.h_dim % self.num_heads == 0, f"must divide h_dim ({self.h_dim})"),
                  ("embd_dropout", 0.0 <= self.embd_dropout < 1.0, "must be in [0, 1)"))
        for key, ok, message in checks:
            if not ok:
                raise InputError(f"{message} (got {getattr(self, key)!r})", f"{prefix}{key}")
        return self


def config_from_dict(config: Mapping[str, Any], prefix: str = "model.") -> CAGConfig:
    """A validated config from a flat mapping (a YAML preset); unknown keys and wrong types are errors."""
    return CAGConfig(**checked_values(CAGConfig, config, prefix)).validate(prefix)


def build(config: Mapping[str, Any] | CAGConfig) -> CAG:
    """The LightningModule for a config (a ``CAGConfig`` or a flat dict of its fields)."""
    return CAG(config)


class Block(nn.Module):
    """One GPT-2 decoder block (pre-norm attention and MLP, residual dropout), one query position per row."""

    def __init__(self, dim: int, heads: int, dropout: float):
        super().__init__()
        self.heads = heads
        self.ln_1 = nn.LayerNorm(dim)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.attn_out = nn.Linear(dim, dim)
        self.ln_2 = nn.LayerNorm(dim)
        self.fc = nn.Linear(dim, 4 * dim)
        self.fc_out = nn.Linear(4 * dim, dim)
        self.drop = nn.Dropout(dropout)

    def forward(self, x: Tensor, past_k: Tensor, past_v: Tensor, visible: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """x [R, d]; past keys/values [R, P, d] of which ``visible`` [R, P] are below the row's top -> the new
        x, and this position's key and value [R, d]."""
        rows, dim = x.shape
        hd = dim // self.heads
        q, k, v = self.qkv(self.ln_1(x)).split(dim, -1)
        keys = torch.cat([past_k, k[:, None]], 1).view(rows, -1, self.heads, hd)
        values = torch.cat([past_v, v[:, None]], 1).view(rows, -1, self.heads, hd)
        scores = torch.einsum("rhd,rphd->rhp", q.view(rows, self.heads, hd), keys) / math.sqrt(hd)
        mask = torch.cat([visible, visible.new_ones(rows, 1)], 1)
        weights = self.drop(scores.masked_fill(~mask[:, None], -math.inf).softmax(-1))
        attended = torch.einsum("rhp,rphd->rhd", weights, values).reshape(rows, dim)
        x = x + self.drop(self.attn_out(attended))
        x = x + self.drop(self.fc_out(F.gelu(self.fc(self.ln_2(x)), approximate="tanh")))
        return x, k, v


class StackAttention(nn.Module):
    """The GPT-2 decoder over stack positions with its per-position key/value cache (module doc).

    Called as the RNNG calls its stack LSTM, ``(pushed, h_below, c_below) -> (h, c)``, while ``reading`` a
    stack: the new top's state ``h`` [B, layers + 1, d] is its keys and the decoder output, ``c`` its values.
    """

    def __init__(self, dim: int, layers: int, heads: int, positions: int, dropout: float):
        super().__init__()
        self.position = nn.Embedding(positions, dim)
        self.drop = nn.Dropout(dropout)
        self.blocks = nn.ModuleList(Block(dim, heads, dropout) for _ in range(layers))
        self.ln_f = nn.LayerNorm(dim)
        self.stack: FixedStack | None = None

    @contextmanager
    def reading(self, stack: FixedStack) -> Iterator[None]:
        """Within the block, calls read the cache of ``stack`` (whose top is the pushed element)."""
        self.stack = stack
        try:
            yield
        finally:
            self.stack = None

    def read(self, pushed: Tensor, position: Tensor, past_h: Tensor, past_c: Tensor) -> tuple[Tensor, Tensor]:
        """Elements [R, d] at stack positions [R], the states of the positions below ([R, P, layers + 1, d],
        those at or above ``position`` ignored) -> their states (class doc)."""
        x = self.drop(pushed + self.position(position))
        visible = torch.arange(past_h.size(1), device=pushed.device)[None] < position[:, None]
        keys, values = [], []
        for i, block in enumerate(self.blocks):
            x, k, v = block(x, past_h[:, :, i], past_c[:, :, i], visible)
            keys.append(k)
            values.append(v)
        out = self.ln_f(x)
        return torch.stack([*keys, out], 1), torch.stack([*values, torch.zeros_like(out)], 1)

    def forward(self, pushed: Tensor, h_below: Tensor, c_below: Tensor) -> tuple[Tensor, Tensor]:
        if self.stack is None:
            raise RuntimeError("StackAttention is called while reading a stack (CAG.advance)")
        top = self.stack.top.clone()  # autograd keeps the index; the pointers change in place later
        window = int(top.max())
        return self.read(pushed, top, self.stack.hiddens[:, :window], self.stack.cells[:, :window])


class CAG(RNNG):
    """The generative CAG p(x, y) over top-down actions, batched on fixed-size stacks (module doc): the RNNG
    with ``StackAttention`` in place of its stack LSTM."""

    def __init__(self, config: CAGConfig | Mapping[str, Any]):
        config = config if isinstance(config, CAGConfig) else config_from_dict(config)
        super().__init__(config)  # the RNNG's embeddings, composition and output layers
        del self._modules["stack_lstm"]  # replaced by the stack attention
        c = self.config
        self.drop = nn.Dropout(c.embd_dropout)
        self.stack_attention = StackAttention(c.h_dim, c.num_layers, c.num_heads, c.stack_size + 1, c.dropout)
        for name, p in self.stack_attention.named_parameters():
            if c.param_init > 0:
                nn.init.uniform_(p, -c.param_init, c.param_init)
            elif name.endswith("weight") and p.dim() == 2:  # GPT-2's initialisation (the official GPT2Model's)
                scaled = name.endswith(("attn_out.weight", "fc_out.weight"))
                nn.init.normal_(p, 0.0, 0.02 / math.sqrt(2 * c.num_layers) if scaled else 0.02)
            elif name.endswith("bias") and "ln_" not in name:
                nn.init.zeros_(p)

    @property
    def stack_lstm(self) -> StackAttention:
        """What the inherited RNNG steps call: the stack attention (read within ``advance``)."""
        return self.stack_attention

    def initial_state(self, batch: int) -> tuple[Tensor, Tensor]:
        """The decoder's state at position 0, the start embedding ([B, layers + 1, d] each)."""
        c = self.config
        start = self.drop(self.start_emb.weight).expand(batch, -1)
        empty = start.new_zeros(batch, 0, c.num_layers + 1, c.h_dim)
        return self.stack_attention.read(start, torch.zeros(batch, dtype=torch.long, device=start.device),
                                         empty, empty)

    def advance(self, stack: FixedStack, action: Tensor, words: Tensor) -> Tensor:
        """The RNNG's action step (push, open or compose), the stack attention reading the new top."""
        pushes = (action == SHIFT_ID) | (action >= self.config.nt_begin)
        if bool((pushes & (stack.top >= self.config.stack_size)).any()):
            raise InputError(f"an action would push past the fixed stack of {self.config.stack_size} elements",
                             "model.stack_size")
        with self.stack_attention.reading(stack):
            return super().advance(stack, action, words)


def _stack_decoder_name(key: str) -> str:
    """An official GPT-2 decoder parameter name -> ours."""
    key = key.replace("wpe.", "position.").replace(".attn.c_attn.", ".qkv.").replace(".attn.c_proj.", ".attn_out.")
    key = key.replace(".mlp.c_fc.", ".fc.").replace(".mlp.c_proj.", ".fc_out.")
    return key.replace("h.", "blocks.", 1) if key.startswith("h.") else key


OFFICIAL_NAMES = (  # official state_dict prefix -> ours
    ("emb.0.", "word_emb."), ("transformer.nonterminal_emb.0.", "nt_emb."),
    ("transformer.initial_emb.0.", "start_emb."), ("transformer.output.1.", "state_out."),
    ("transformer.composition.rnn.", "composition.lstm."), ("transformer.composition.output.1.", "composition.out."),
    ("vocab_mlp.", "word_out."), ("action_mlp.", "action_out."),
)
DECODER = "transformer.stack_transformer."


def official_state_dict(state: Mapping[str, Tensor], location: str = "checkpoint") -> dict[str, Tensor]:
    """An official ``FixedStackCompositionAttentionGrammar`` state_dict under our names: GPT-2's ``Conv1D``
    weights ([in, out]) transposed to ``Linear``; its causal-mask buffers (``attn.bias``, ``attn.masked_bias``)
    dropped (our mask is the stack's top)."""
    out = {}
    for key, value in state.items():
        if key.startswith(DECODER):
            name = key[len(DECODER):]
            if name.endswith((".attn.bias", ".attn.masked_bias")):
                continue
            ours = "stack_attention." + _stack_decoder_name(name)
            conv = name.endswith(("c_attn.weight", "c_proj.weight", "c_fc.weight"))
            out[ours] = value.t().contiguous() if conv else value
            continue
        for theirs, ours in OFFICIAL_NAMES:
            if key.startswith(theirs):
                out[ours + key[len(theirs):]] = value
                break
        else:
            raise InputError(f"not a parameter of the official FixedStackCompositionAttentionGrammar: {key}",
                             location)
    return out
