"""The Pushdown-LM's incremental decoding state in preallocated buffers (beam search over attachments).

A word-synchronous beam reorders its N hypotheses after every token. Kept as tensors of their own, every
block's keys and values, the attachment head's key features and the final-layer states were copied twice
per step (a concatenation to append the position, an indexing to reorder), each copy into a freshly
allocated tensor, and the head's [N, t, h] hidden layer went through three more fresh tensors: at length 40,
beam 32 most of a step (``benchmarks/pushdown_beam.py``'s profile). Here nothing is allocated per position:

- **keys and values** sit in buffers ``[capacity, H, max_length, d]`` per block, indexed by hypothesis, a
  step writing its position in place. A reorder gathers the prefixes ``[:t]`` of the surviving hypotheses
  into the second of two buffer sets (one ``index_select`` per buffer, no allocation), so the attention's
  batched matmuls read each hypothesis's keys contiguously, as before;
- **key features and states** are written once, position p's N rows in slots 0..N-1 of position p, and a
  hypothesis is the slot of each of its positions, ``slots`` [N, t] (shared prefixes share slots). A reorder
  reorders ``slots`` only. The attachment head gathers the features by slot in the same pass that adds the
  depth features (``AttachmentHead.step``: one ``embedding_bag`` over a table whose first rows are the
  depth features); the states are gathered only when asked (``DecodingState.states``).

A state stays valid until a state sharing its buffers is stepped or selected: the beam steps each state once
and selects the result; the official sentence end (``experiments.families.pushdown.scorers``) selects and
steps the hypotheses that end before the others are selected.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor


class DecodingBuffers:
    """The buffers of one decoding: two sets of per-block keys and values ``[capacity, H, max_length, d]``
    (the live one and the one a reorder fills), the key-feature table ``[V + max_length * capacity, h]``
    (its first V rows the head's depth features) and the states ``[max_length, capacity, D]``. The
    hypothesis capacity doubles when a step or a reorder needs more."""

    def __init__(self, max_length: int, n_blocks: int, n_heads: int, d_head: int, d_model: int,
                 depth_features: Tensor, like: Tensor):
        self.max_length = max_length
        self.kv = [[like.new_empty((0, n_heads, max_length, d_head)) for _ in range(2 * n_blocks)] for _ in range(2)]
        self.depth_rows = depth_features.shape[0]
        self.features = depth_features.to(like.dtype).clone()  # no key rows yet
        self.states = like.new_empty((max_length, 0, d_model))

    @property
    def capacity(self) -> int:
        return self.states.shape[1]

    def reserve(self, count: int, live: int) -> None:
        """Room for ``count`` hypotheses, the ``live`` key/value set's contents and every written row kept."""
        old = self.capacity
        if count <= old:
            return
        size = max(count, 2 * old)
        for which, buffers in enumerate(self.kv):
            for k, buffer in enumerate(buffers):
                grown = buffer.new_empty((size, *buffer.shape[1:]))
                if which == live:
                    grown[:old] = buffer
                buffers[k] = grown
        features = self.features.new_empty((self.depth_rows + self.max_length * size, self.features.shape[1]))
        features[: self.depth_rows] = self.features[: self.depth_rows]
        self._positions(features, size)[:, :old] = self._positions(self.features, old)
        self.features = features
        states = self.states.new_empty((self.max_length, size, self.states.shape[2]))
        states[:, :old] = self.states
        self.states = states

    def _positions(self, features: Tensor, capacity: int) -> Tensor:
        return features[self.depth_rows :].view(self.max_length, capacity, features.shape[1])

    def extend_keys(self, live: int, block: int, position: int, k: Tensor, v: Tensor) -> tuple[Tensor, Tensor]:
        """Write block ``block``'s keys and values k, v [N, H, 1, d] at ``position`` of the ``live`` set;
        returns the N hypotheses' keys and values [N, H, position + 1, d] (views of the buffers)."""
        count = k.shape[0]
        keys, values = self.kv[live][2 * block], self.kv[live][2 * block + 1]
        keys[:count, :, position : position + 1], values[:count, :, position : position + 1] = k, v
        return keys[:count, :, : position + 1], values[:count, :, : position + 1]

    def reorder(self, live: int, count: int, length: int, origins: Tensor) -> int:
        """Hypothesis i of the other key/value set := hypothesis ``origins[i]`` of the ``live`` set's ``count``
        (positions ``[:length]``); returns the other set's number."""
        target = 1 - live
        self.reserve(origins.shape[0], live)
        for source, buffer in zip(self.kv[live], self.kv[target]):
            torch.index_select(source[:count, :, :length], 0, origins, out=buffer[: origins.shape[0], :, :length])
        return target

    def write(self, position: int, state: Tensor, features: Tensor | None) -> None:
        """The N hypotheses' final-layer states [N, D] (and key features [N, h]) at ``position``, slots 0..N-1."""
        self.states[position, : state.shape[0]] = state
        if features is not None:
            self._positions(self.features, self.capacity)[position, : features.shape[0]] = features

    def feature_rows(self, slots: Tensor) -> Tensor:
        """[N, t] the ``features`` row of each hypothesis's position j."""
        return self.depth_rows + self._flat(slots)

    def gather_states(self, slots: Tensor) -> Tensor:
        """[N, t, D] the states at each hypothesis's slots."""
        flat = self.states.view(-1, self.states.shape[2]).index_select(0, self._flat(slots).flatten())
        return flat.view(*slots.shape, -1)

    def _flat(self, slots: Tensor) -> Tensor:
        return torch.arange(slots.shape[1], device=slots.device) * self.capacity + slots


@dataclass
class DecodingState:
    """One decoding's buffers, the key/value set holding this state's hypotheses (``live``), each
    hypothesis's slots ``[N, t]`` (None before the first position) and each block's relative-position keys
    for the whole sequence (shared). ``select`` reorders hypotheses as the beam does."""

    buffers: DecodingBuffers
    live: int
    slots: Tensor | None
    rel_keys: list[Tensor]

    @property
    def length(self) -> int:
        """Positions read so far."""
        return 0 if self.slots is None else self.slots.shape[1]

    @property
    def states(self) -> Tensor | None:
        """The final-layer states [N, t, D] of the positions read so far (gathered on demand)."""
        return None if self.slots is None else self.buffers.gather_states(self.slots)

    def select(self, origins: Tensor) -> DecodingState:
        """Hypothesis i of the result is hypothesis ``origins[i]`` of this state (origins may repeat)."""
        if self.slots is None:
            return self
        live = self.buffers.reorder(self.live, self.slots.shape[0], self.length, origins)
        return DecodingState(self.buffers, live, self.slots[origins], self.rel_keys)

    def extended(self, count: int) -> DecodingState:
        """This state with one more position for its ``count`` hypotheses, in slots 0..count-1 (``step``)."""
        if self.length >= self.buffers.max_length:
            raise ValueError(f"the decoding state holds {self.buffers.max_length} positions (``start``)")
        self.buffers.reserve(count, self.live)
        new = torch.arange(count, device=self.buffers.states.device)[:, None]
        slots = new if self.slots is None else torch.cat([self.slots, new], dim=1)
        return DecodingState(self.buffers, self.live, slots, self.rel_keys)
