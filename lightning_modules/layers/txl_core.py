"""The generalised Transformer-XL of Transformer Grammars: embeddings, post-LN blocks, memory, tied output.

Per chunk (TG §2.2): ``h⁰ = drop(drop_emb(E[x]))``; for each layer k,
``h = LN(h + drop(SelfAttn(h, m_k)))``, ``h = LN(h + drop(FFN(h)))``; logits ``= drop_out(h^K) Eᵀ + b``.
No final LayerNorm. The memory of layer k holds that layer's *inputs*; after a chunk, slot m of the next
memory is ``concat(memory_k, layer-k inputs)[mem_src[m]]`` (-1: empty, zeros), detached (stop-gradient, as
TXL). A plain TXL memory is ``mem_src = [L, ..., L+M-1]`` (with L = M); TG's smart memory gathers the stack.

With ``n_attention_fns = 2`` each layer has a second set of attention parameters used at COMPOSE positions
(the official ``attn_indicator`` / ``num_attns=2``); both are evaluated and selected per position, as there.
Two options of the Dependency TG port: ``shared_relative_bias`` (one u, v for all layers) and
``scale_embeddings`` (input embeddings times sqrt(d), the PyTorch Transformer-XL convention); and ``added``
token ids whose embeddings are added to the inputs' (DTG §3.3's arc representation: arc + head word).

``step`` decodes one token per hypothesis against a ``KeyValuePool`` (beam search): a token's keys and values
are computed once, and a new token costs O(its attended keys) per layer instead of a pass over the prefix.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from lightning_modules.layers.kv_cache import KeyValuePool
from lightning_modules.layers.relative_attention import (
    AttentionPattern,
    RelativeMultiHeadAttention,
    position_index,
    sinusoid_table,
)


class FeedForward(nn.Module):
    """``Linear(d, f) -> GELU (tanh approximation, JAX's default) -> dropout -> Linear(f, d)``."""

    def __init__(self, d_model: int, d_ff: int, dropout: float):
        super().__init__()
        self.inner = nn.Linear(d_model, d_ff)
        self.outer = nn.Linear(d_ff, d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: Tensor) -> Tensor:
        return self.outer(self.dropout(F.gelu(self.inner(x), approximate="tanh")))


class TransformerXLLayer(nn.Module):
    """One post-LN block; ``compose`` picks the second attention function where it is on."""

    def __init__(self, d_model: int, n_heads: int, d_ff: int, dropout: float, attention_dropout: float,
                 relative: bool, n_attention_fns: int):
        super().__init__()
        self.attentions = nn.ModuleList(
            RelativeMultiHeadAttention(d_model, n_heads, attention_dropout, relative)
            for _ in range(n_attention_fns)
        )
        self.ffn = FeedForward(d_model, d_ff, dropout)
        self.ln1 = nn.LayerNorm(d_model, eps=1e-5)
        self.ln2 = nn.LayerNorm(d_model, eps=1e-5)
        self.dropout = nn.Dropout(dropout)

    def forward(self, h: Tensor, memory: Tensor | None, pattern: AttentionPattern, table: Tensor | None,
                compose: Tensor | None, flex: bool, compiled_flex: bool) -> Tensor:
        outs = [attn(h, memory, pattern, table, flex, compiled_flex) for attn in self.attentions]
        attn_out = outs[0] if len(outs) == 1 else torch.where(compose[..., None], outs[1], outs[0])
        h = self.ln1(h + self.dropout(attn_out))
        return self.ln2(h + self.dropout(self.ffn(h)))


class TransformerXL(nn.Module):
    """Embedding, ``n_layers`` blocks with memory, tied output projection with an output bias.

    ``min_rel``/``max_rel`` give the relative positions the sinusoid table covers (raw relative positions are
    clipped to it); ``relative=False`` removes position information (no relative keys, u or v).
    """

    def __init__(self, *, vocab_size: int, d_model: int, n_layers: int, n_heads: int, d_ff: int,
                 embedding_dropout: float, core_dropout: float, core_output_dropout: float,
                 attention_dropout: float, memory_length: int, min_rel: int, max_rel: int,
                 relative: bool = True, n_attention_fns: int = 1, shared_relative_bias: bool = False,
                 scale_embeddings: bool = False):
        super().__init__()
        if n_attention_fns not in (1, 2):
            raise ValueError(f"n_attention_fns must be 1 or 2, got {n_attention_fns}")
        if min_rel > max_rel:
            raise ValueError(f"min_rel={min_rel} > max_rel={max_rel}")
        self.d_model = d_model
        self.n_layers = n_layers
        self.memory_length = memory_length
        self.min_rel, self.max_rel = min_rel, max_rel
        self.relative = relative
        self.shortcuts = True  # Python branches on tensor values (off where the forward runs under vmap)
        self.embedding_scale = math.sqrt(d_model) if scale_embeddings else 1.0
        self.embedding = nn.Embedding(vocab_size, d_model)
        self.output_bias = nn.Parameter(torch.zeros(vocab_size))
        self.embedding_dropout = nn.Dropout(embedding_dropout)
        self.core_dropout = nn.Dropout(core_dropout)
        self.output_dropout = nn.Dropout(core_output_dropout)
        self.layers = nn.ModuleList(
            TransformerXLLayer(d_model, n_heads, d_ff, core_dropout, attention_dropout, relative,
                               n_attention_fns)
            for _ in range(n_layers)
        )
        if relative:
            self.register_buffer("table", sinusoid_table(max_rel, min_rel, d_model), persistent=False)
        else:
            self.table = None
        self.reset_parameters()
        if shared_relative_bias and relative:  # every layer's u, v become the first layer's parameters
            first = self.layers[0].attentions
            for layer in self.layers[1:]:
                for attn, shared in zip(layer.attentions, first, strict=True):
                    attn.r_w_bias, attn.r_r_bias = shared.r_w_bias, shared.r_r_bias

    @torch.no_grad()
    def reset_parameters(self) -> None:
        """The official initialisers (Haiku): embeddings uniform with variance 1/d; every core linear
        truncated-normal (±2σ) with variance (2 / n_layers) / fan_in; u, v variance 1/(H·d_head); biases 0."""

        def truncated_normal(w: Tensor, variance: float) -> None:
            std = math.sqrt(variance) / 0.87962566103423978  # Haiku's correction for the truncation
            nn.init.trunc_normal_(w, std=std, a=-2 * std, b=2 * std)

        limit = math.sqrt(3.0 / self.d_model)
        nn.init.uniform_(self.embedding.weight, -limit, limit)
        nn.init.zeros_(self.output_bias)
        scale = 2.0 / self.n_layers
        for module in self.layers.modules():
            if isinstance(module, nn.Linear):
                truncated_normal(module.weight, scale / module.in_features)
                if module.bias is not None:
                    nn.init.zeros_(module.bias)
            elif isinstance(module, nn.LayerNorm):
                nn.init.ones_(module.weight)
                nn.init.zeros_(module.bias)
            elif isinstance(module, RelativeMultiHeadAttention) and module.relative:
                truncated_normal(module.r_w_bias, 1.0 / module.r_w_bias.numel())
                truncated_normal(module.r_r_bias, 1.0 / module.r_r_bias.numel())

    def initial_memory(self, batch_size: int) -> Tensor | None:
        """Zeros [n_layers, B, M, D], or None without memory."""
        if self.memory_length == 0:
            return None
        return self.embedding.weight.new_zeros(self.n_layers, batch_size, self.memory_length, self.d_model)

    def forward(self, inputs: Tensor, attn_mask: Tensor, relpos: Tensor | None, mem_src: Tensor | None,
                reset: Tensor | None, memory: Tensor | None, compose: Tensor | None = None, flex: bool = False,
                compiled_flex: bool = False, added: Tensor | None = None,
                logits: bool = True) -> tuple[Tensor, Tensor | None]:
        """One chunk -> (logits [B, L, V], next memory [n_layers, B, M, D] or None): ``project`` of ``hidden``;
        ``logits=False``: the final hidden states instead (the loss projects the labelled rows alone), through
        the module's call, so a compiled network (``runtime.compile``) runs compiled either way."""
        h, memory = self.hidden(inputs, attn_mask, relpos, mem_src, reset, memory, compose, flex, compiled_flex,
                                added)
        return (self.project(h, *self.head_parameters()) if logits else h), memory

    def head_parameters(self) -> tuple[Tensor, ...]:
        """The parameters of the output head, in ``project``'s order: the tied embedding and the output bias."""
        return self.embedding.weight, self.output_bias

    def project(self, h: Tensor, weight: Tensor, bias: Tensor) -> Tensor:
        """Final hidden states [..., D] (after the output dropout) -> logits [..., V], with the head's parameters
        given (``head_parameters``; explicit so the loss can differentiate the head chunk by chunk)."""
        return F.linear(h, weight, bias)

    def hidden(self, inputs: Tensor, attn_mask: Tensor, relpos: Tensor | None, mem_src: Tensor | None,
               reset: Tensor | None, memory: Tensor | None, compose: Tensor | None = None, flex: bool = False,
               compiled_flex: bool = False, added: Tensor | None = None) -> tuple[Tensor, Tensor | None]:
        """One chunk -> (final hidden states [B, L, D] after the output dropout, next memory [n_layers, B, M, D]
        or None); ``added`` [B, L]: ids whose embeddings are added to the inputs' (0: none). ``mem_src`` None: a
        chunk whose sequences start and end in it (a seed group's packed rows,
        ``lightning_modules.models.packing``): no memory in or out, and ``attn_mask``/``relpos`` have no memory
        columns ([B, L, L])."""
        batch, length = inputs.shape
        if mem_src is None:
            memory = None
        keys = length if mem_src is None else self.memory_length + length
        if attn_mask.shape != (batch, length, keys):
            raise ValueError(f"attn_mask has shape {tuple(attn_mask.shape)}, "
                             f"expected {(batch, length, keys)}")
        if self.relative and relpos is None:
            raise ValueError("this model uses relative positions: relpos is required")
        if self.memory_length and memory is None and mem_src is not None:
            memory = self.initial_memory(batch)
        if memory is not None:
            memory = memory.masked_fill(reset[None, :, None, None], 0.0)
        # When every row starts a sequence (always so in sentence-level training), the memory is empty and
        # masked: attend over the chunk alone. Exact (masked keys carry zero weight) and saves M key columns.
        # A branch on tensor values, so skipped under vmap (``shortcuts`` off: seed groups).
        attend_memory = memory is not None and not (self.shortcuts and bool(reset.all()))
        if memory is not None and not attend_memory:
            attn_mask = attn_mask[..., self.memory_length :]
            relpos = None if relpos is None else relpos[..., self.memory_length :]
        pattern = AttentionPattern.build(attn_mask, relpos if self.relative else None,
                                         self.min_rel, self.max_rel, flex)

        embedded = self.embedding(inputs)
        if added is not None:
            embedded = embedded + self.embedding(added) * (added > 0)[..., None].to(embedded.dtype)
        h = self.core_dropout(self.embedding_dropout(embedded * self.embedding_scale))
        new_memory = []
        for k, layer in enumerate(self.layers):
            layer_memory = None if memory is None else memory[k]
            if layer_memory is not None:
                new_memory.append(gather_memory(layer_memory, h, mem_src))
            h = layer(h, layer_memory if attend_memory else None, pattern, self.table, compose, flex,
                      compiled_flex)
        return self.output_dropout(h), (torch.stack(new_memory) if new_memory else None)


    def new_pool(self, capacity: int = 256) -> KeyValuePool:
        """An empty key/value pool for ``step``."""
        attention = self.layers[0].attentions[0]
        return KeyValuePool(self.n_layers, len(self.layers[0].attentions), attention.n_heads, attention.d_head,
                            capacity, self.embedding.weight.dtype, self.embedding.weight.device)

    def step_parameters(self) -> StepParameters:
        """The weights ``step`` reads, rearranged once for a search (each layer's projected position tables
        among them)."""
        attention = self.layers[0].attentions[0]
        scale = 1.0 / math.sqrt(attention.d_head)
        qkv, out_w, out_b, u, v, rel = [], [], [], [], [], []
        for layer in self.layers:
            fns = layer.attentions
            qkv.append(torch.cat([w for a in fns for w in (a.query.weight, a.key.weight, a.value.weight)]))
            out_w.append(torch.cat([a.output.weight for a in fns]))
            out_b.append(None if fns[0].output.bias is None else torch.cat([a.output.bias for a in fns]))
            if self.relative:
                u.append(torch.stack([a.r_w_bias for a in fns]))
                v.append(torch.stack([a.r_r_bias for a in fns]))
                table = torch.cat([a.relative_key_table(self.table)[0] for a in fns]) * scale  # [F·H, R, d]
                rel.append(F.pad(table, (0, 0, 0, 1)).transpose(1, 2).contiguous())  # the zero row: below min_rel
        return StepParameters(len(self.layers[0].attentions), attention.n_heads, attention.d_head, scale, qkv,
                              out_w, out_b, u, v, rel if self.relative else None)

    def step(self, tokens: Tensor, pool: KeyValuePool, rows: Tensor, key_rows: Tensor, relpos: Tensor | None,
             compose: Tensor | None = None, params: StepParameters | None = None,
             predict: bool | Tensor = True, added: Tensor | None = None) -> Tensor | None:
        """Incremental decoding: one new token per hypothesis -> its logits [B, V] (None if ``predict`` is
        False: the token's keys and values are all a caller may need, e.g. TG's COMPOSE token before its STACK
        copy; only the rows ``predict`` [n] when it is an index tensor). No dropout (decoding).

        ``tokens`` [B]; ``rows`` [B] the pool rows allocated for them; ``key_rows`` [B, K] the rows of the
        keys each attends (itself included, -1 = padding); ``relpos`` [B, K] raw relative positions;
        ``params`` ``step_parameters()`` (computed here when not given: a search prepares them once);
        ``added`` [B] ids whose embeddings are added to the tokens' (0: none), as in ``forward``. A row may
        attend rows of the same step (several next tokens of one sequence): every layer writes all rows' keys
        and values before any query reads them. Equal to ``forward`` at that position when the keys are the
        token's attend list restricted to its chunk and memory (a memory slot
        holds the layer inputs its token had, so its keys are the cached ones).

        Few, large operations (a CPU decodes small batches at a fixed cost per operation): per layer one
        product for every attention function's q, k, v, one slice write and one gather of the keys and values
        (each query those of its own attention function: COMPOSE rows the second), the position logits of all
        heads as one batched product read through one flat index built once per step, one SDPA call over the
        gathered rows' strided views, and one output product of the attention functions side by side.
        """
        p = params if params is not None else self.step_parameters()
        batch, width = key_rows.shape
        heads, d_head = p.heads, p.d_head
        fn = compose.long() if p.fns == 2 else None
        index = pool.key_index(key_rows, fn)
        mask = torch.zeros(key_rows.shape, dtype=pool.data.dtype, device=key_rows.device)
        mask = mask.masked_fill_(key_rows < 0, float("-inf"))[:, None, None]  # [B, 1, 1, K]
        take = None
        if p.rel is not None:  # flat index of (row, head, key) into the position logits [F·H, B, R+1]
            columns = p.rel[0].shape[-1]
            base = (torch.arange(heads, device=key_rows.device)[None, :] * batch
                    + torch.arange(batch, device=key_rows.device)[:, None]) * columns
            if fn is not None:
                base = base + (fn * (heads * batch * columns))[:, None]
            take = base[:, :, None] + position_index(relpos.long(), self.min_rel, self.max_rel)[:, None]
        h = F.embedding(tokens, self.embedding.weight)
        if added is not None:
            h = h + F.embedding(added, self.embedding.weight) * (added > 0)[:, None].to(h.dtype)
        if self.embedding_scale != 1.0:
            h = h * self.embedding_scale
        for k, layer in enumerate(self.layers):
            qkv = F.linear(h, p.qkv[k]).view(batch, p.fns, 3, heads, d_head)
            pool.write(k, rows, qkv[:, :, 1:])
            kv = pool.gather(k, index).view(batch, width, 2, heads, d_head)
            q = qkv[:, :, 0]  # [B, F, H, d]
            bias = mask
            if take is not None:
                logits = torch.bmm((q + p.v[k]).permute(1, 2, 0, 3).reshape(p.fns * heads, batch, d_head),
                                   p.rel[k])  # [F·H, B, R+1]
                bias = logits.take(take)[:, :, None] + mask  # [B, H, 1, K]
                q = q + p.u[k]
            q = q[:, 0] if fn is None else torch.where(compose[:, None, None], q[:, 1], q[:, 0])
            attended = F.scaled_dot_product_attention(q[:, :, None], kv[:, :, 0].transpose(1, 2),
                                                      kv[:, :, 1].transpose(1, 2), attn_mask=bias, scale=p.scale)
            out = F.linear(attended.view(batch, heads * d_head), p.out_w[k], p.out_b[k])
            if fn is not None:
                out = out.view(batch, 2, -1)
                out = torch.where(compose[:, None], out[:, 1], out[:, 0])
            h = layer.ln1(h + out)
            h = layer.ln2(h + layer.ffn(h))
        if isinstance(predict, bool):
            if not predict:
                return None
        else:
            h = h[predict]
        return self.project(h, *self.head_parameters())


@dataclass(frozen=True)
class StepParameters:
    """``TransformerXL.step_parameters``: per layer, each attention function's weights side by side."""

    fns: int  # attention functions per layer (F)
    heads: int
    d_head: int
    scale: float  # 1 / sqrt(d_head)
    qkv: list[Tensor]  # [F·3·D, D]: query, key, value of each function
    out_w: list[Tensor]  # [F·D, D]
    out_b: list[Tensor | None]  # [F·D] (None: no output bias, a DTG option)
    u: list[Tensor]  # [F, H, d] (empty lists without position information)
    v: list[Tensor]  # [F, H, d]
    rel: list[Tensor] | None  # [F·H, d, R+1]: the projected position table, scaled, a zero column appended


def gather_memory(memory: Tensor, h: Tensor, mem_src: Tensor) -> Tensor:
    """Next memory ``concat(memory, h)[mem_src]`` (-1 -> zeros), detached; shapes [B,M,D], [B,L,D], [B,M]."""
    pool = torch.cat([memory, h], dim=1).detach()
    index = mem_src.clamp(min=0)[..., None].expand(-1, -1, pool.shape[-1])
    return torch.gather(pool, 1, index) * (mem_src >= 0)[..., None].to(pool.dtype)
