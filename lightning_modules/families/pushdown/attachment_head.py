"""The attachment head of Pushdown Transformers (Murty et al. 2023, Eq. 5, Fig. 8; official ``StackPredictor``).

While predicting word x_{t+1} from position t, the model also chooses the token r it reduces with, by
attention from a query for the new word over the final-layer states h_0..h_t plus the new word itself:

    q_t      = MLP_q([W_q h_t ; e(x_{t+1})])                   (3d -> 2d -> 2d, ReLU, dropout)
    k_self_t = MLP_k([q_t ; e(x_{t+1})])                        (the key of "shift only")
    k_tj     = MLP_c([W_k h_j ; E'[W_t[j]]])                    (2d + p -> 2d + p -> 2d, ReLU, dropout)
    logit[t, j]   = q_t · k_tj + q_t · r'(j - t - 1)            for j <= t (shift + reduce with j)
    logit[t, t+1] = q_t · k_self_t + q_t · r'(0)                (shift only)

with e the (unscaled) input embedding, W_t the depth tape row after token t, E' a depth embedding of size
p, and r' the interleaved sinusoid projected to 2d (no bias). As the official code (unlike Fig. 8) the
logits are not divided by a square root. Column 0 (``<s>``) stays in the softmax as in official training;
decoding masks reduced positions (``encodings.pushdown.StackStates.legal``).

The keys depend on (t, j) through a nonlinear MLP, so a [B, T, T, .] tensor is unavoidable. We keep one of
width 2d + p instead of the official several (repeated keys, depth embeddings, their concatenation, the
hidden and the 2d output): the first linear layer of MLP_c is split into its key and depth halves (computed
per token and per depth value, then summed by gather), and the second is folded into the query,
``q · (W2 a + b2) = (W2ᵀ q) · a + q · b2``. Exactly the same function.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from lightning_modules.families.pushdown.attention import interleaved_sinusoids


def _mlp(d_in: int, d_hidden: int, d_out: int, dropout: float) -> nn.Sequential:
    return nn.Sequential(nn.Linear(d_in, d_hidden), nn.ReLU(), nn.Dropout(dropout), nn.Linear(d_hidden, d_out))


class AttachmentHead(nn.Module):
    """Attachment logits [B, Tq, S + 1] over tokens 0..S-1 and column ``pos + 1`` (shift) per query."""

    def __init__(self, d_model: int, depth_vocab: int, depth_dim: int, dropout: float):
        super().__init__()
        width = 2 * d_model
        self.d_model = d_model
        self.query = nn.Linear(d_model, width, bias=False)
        self.key = nn.Linear(d_model, width, bias=False)
        self.position = nn.Linear(d_model, width, bias=False)
        self.depth = nn.Embedding(depth_vocab, depth_dim)
        self.query_mlp = _mlp(3 * d_model, width, width, dropout)
        self.self_key_mlp = _mlp(3 * d_model, width, width, dropout)
        self.compose = _mlp(width + depth_dim, width + depth_dim, width, dropout)

    def key_features(self, states: Tensor) -> Tensor:
        """The per-token half of MLP_c's first layer, ``W1[:, :2d] W_k h_j`` [B, S, h]: a token's share of every
        key it will ever take part in (cached per position when decoding)."""
        return nn.functional.linear(self.key(states), self.compose[0].weight[:, : 2 * self.d_model])

    def forward(self, states: Tensor, next_words: Tensor, tape: Tensor, lengths: Tensor,
                query_positions: Tensor | None = None, key_features: Tensor | None = None,
                segments: Tensor | None = None) -> Tensor:
        """Masked logits (-inf where no attachment is possible).

        ``states`` [B, S, D] final-layer states of tokens 0..S-1; ``next_words`` [B, Tq, D] embeddings of the
        words predicted at the query positions; ``tape`` [B, Tq, S] the tape row of each query;
        ``lengths`` [B] valid tokens per row; ``query_positions`` [Tq] (default 0..S-1, training);
        ``key_features`` [B, S, h] ``self.key_features(states)`` if already computed.
        Column c of query t is the attachment to token c (c <= t) or shift (c = t + 1). ``segments`` [B, S]
        (packed rows, training): token c is a column of query t only in t's segment (shift always is; an unused
        slot, 0, has the columns a padding position has).
        """
        batch, source, _ = states.shape
        if query_positions is None:
            query_positions = torch.arange(source, device=states.device)
        q, self_logits = self._queries(states[:, query_positions], next_words)  # [B, Tq, 2d], [B, Tq, 1]

        # compose(cat[k_j, E'[w]]) with the first layer split by input and the second folded into q
        _, act, drop, second = self.compose
        key_part = self.key_features(states) if key_features is None else key_features  # [B, S, h]
        index = tape.long().clamp(0, self.depth.num_embeddings - 1)
        hidden = drop(act(key_part[:, None, :, :] + self.depth_features()[index]))  # [B, Tq, S, h]
        folded = q @ second.weight  # [B, Tq, h]
        reduce_logits = torch.einsum("bqh,bqsh->bqs", folded, hidden) + (q @ second.bias)[..., None]
        return self._complete(q, reduce_logits, self_logits, query_positions, lengths, segments)

    def depth_features(self) -> Tensor:
        """The per-depth half of MLP_c's first layer with its bias, ``W1[:, 2d:] E'[w] + b1`` [V, h]."""
        first = self.compose[0]
        width = first.weight.shape[1] - self.depth.embedding_dim
        return nn.functional.linear(self.depth.weight, first.weight[:, width:], first.bias)

    def step(self, query_state: Tensor, next_words: Tensor, table: Tensor, rows: Tensor, tape_row: Tensor
             ) -> Tensor:
        """Decoding: the logits [N, t + 2] of the newest position t of N hypotheses (``forward`` at one query
        position, not masked: every column is visible), from its state [N, D] and the embeddings of the words
        it predicts [N, D]. ``table`` [V + R, h] holds ``depth_features()`` in its first V rows and the key
        features of the hypotheses' tokens in rows ``rows`` [N, t + 1]; ``tape_row`` [N, t + 1]. Each key's
        hidden layer (key features + depth features) is one ``embedding_bag`` over the two rows: the gather
        and the sum in one pass, no [N, t + 1, h] tensor of either half."""
        count, keys = rows.shape
        q, self_logits = self._queries(query_state[:, None], next_words[:, None])
        second = self.compose[3]
        depth = tape_row.long().clamp(0, self.depth.num_embeddings - 1)
        pairs = torch.stack([rows, depth], dim=-1).view(-1, 2)
        hidden = nn.functional.embedding_bag(pairs, table, mode="sum").relu_()  # [N (t + 1), h]
        folded = q @ second.weight  # [N, 1, h]
        reduce_logits = torch.bmm(folded, hidden.view(count, keys, -1).mT) + (q @ second.bias)[..., None]
        positions = torch.full((1,), keys - 1, device=q.device)  # not from a host list: no copy to the device
        lengths = torch.full((count,), keys, dtype=torch.long, device=q.device)
        return self._complete(q, reduce_logits, self_logits, positions, lengths)[:, 0]

    def _queries(self, query_states: Tensor, next_words: Tensor) -> tuple[Tensor, Tensor]:
        """q [B, Tq, 2d] and the shift column's logit q · k_self [B, Tq, 1]."""
        q = self.query_mlp(torch.cat([self.query(query_states), next_words], dim=-1))  # [B, Tq, 2d]
        self_key = self.self_key_mlp(torch.cat([q, next_words], dim=-1))
        return q, (q * self_key).sum(-1, keepdim=True)

    def _complete(self, q: Tensor, reduce_logits: Tensor, self_logits: Tensor, query_positions: Tensor,
                  lengths: Tensor, segments: Tensor | None = None) -> Tensor:
        """The reduce columns [B, Tq, S] and the shift column [B, Tq, 1] with their relative positions, masked."""
        batch, source = reduce_logits.shape[0], reduce_logits.shape[-1]
        device = q.device
        logits = torch.cat([reduce_logits, torch.zeros_like(self_logits)], dim=-1)  # [B, Tq, S + 1]
        columns = torch.arange(source + 1, device=device)
        is_self = columns[None, :] == (query_positions[:, None] + 1)  # [Tq, S + 1]
        logits = torch.where(is_self[None], self_logits, logits)

        # relative position of token c to the new word at t + 1: r'(c - t - 1), gathered by distance
        distances = -torch.arange(source + 1, device=device)
        rel = self.position(interleaved_sinusoids(distances, self.d_model).to(q.dtype))  # [S + 1, 2d]
        distance = (query_positions[:, None] + 1 - columns[None, :]).clamp(min=0)  # [Tq, S + 1]
        position_logits = torch.gather(q @ rel.t(), -1, distance.expand(batch, *distance.shape))
        logits = logits + position_logits

        visible = (columns[None, :] <= query_positions[:, None] + 1)[None] & (
            columns[None, None, :] <= lengths[:, None, None])
        if segments is not None:  # an unused slot (0) keeps the rule above, as padding does
            keys = nn.functional.pad(segments, (0, 1), value=-1)  # [B, S + 1]
            own = segments[:, query_positions, None]
            visible = visible & ((own == keys[:, None, :]) | is_self[None] | (own == 0))
        return logits.masked_fill(~visible, float("-inf"))
