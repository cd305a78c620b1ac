"""A step-by-step port of the official DTG word-synchronous beam, re-encoding every prefix: the reference of
``beam.DTGBeamScorer`` (the tests hold the two equal) and of ``benchmarks/dtg_beam.py``.

Ported from reading ``word_sync_beam_search`` (zhaoyd1/Dep_Transformer_Grammars ``beam_search_standard.py``
for DTG, ``beam_search_txl.py`` for TXL (trans)) and kept in its shape: ``beam`` slots with scores (-inf:
empty), ``finished`` (generated the current terminal) flags, per-slot ``action_count``, a ``word_count``, and a
``prev_compose`` flag that alternates at every step for DTG (the step after an arc's first token is its forced
duplicate, log-prob 0) and stays False for TXL (trans). The terminals are the words' pieces (one per word for a
word-level checkpoint), then ``pop_root`` and ``</s>``, as the official sentence ends; ``word_count`` counts the
terminals that begin a word (``is_subtoken_begin``), and a piece that begins none is selected with
``shift_size`` = ``beam`` (only its terminal column is ever taken: the piece is forced). Per terminal,
``for k in range(max_actions)``: stop when every live slot is finished; the candidates of each slot are
[left_arc, right_arc, terminal] (a finished slot: only the terminal column, +0; arcs masked where
``action_count > word_count - 2``); the official selection (``find_selected_indices_cpu`` with ``shift_size`` =
``fast_track``) over the stable-sorted scores; the gather; after the last step every unfinished slot's score is
-inf. After each terminal: the logsumexp of the scores, then every score below the ``word_beam``-th best set to
-inf. A terminal no slot reaches leaves every score -inf: its prefix and every later one are -inf (each later group
stops at once, every slot being empty).

Where it departs from the official code, and why:

- The next-token log-probs come from the checkpoint's full forward pass over each slot's whole prefix
  (``DTGModel.distributions``), not from a key/value cache; the tokens' attention from ``DTGState`` (the
  official ``TGAgent``) through ``beam.token_records``.
- An action or terminal is taken only where ``DTGState.check`` also allows it, under the ``pop_root`` rule
  (``encoding.POP_ROOT_RULES``). Between words that is the official mask itself (two words on the stack).
  ``official`` (the default): ``pop_root`` on any stack with a word and arcs after it, as the official mask,
  less the two arcs it lets through that compose no two words (over a single unit; the root as a dependent;
  ``encoding``'s module docstring). ``single-word``: ``pop_root`` on a one-word stack only, nothing after it,
  and its terminal gets ``2 * max_actions - 1`` token steps (the same 14 arcs, all before it), as ``beam.py``'s
  closing groups.
- Ties in the sort go by flat index (a stable sort; CUDA's sort is not stable).

Arc-standard only (the official code's system). It scores one slot prefix per forward pass row, so it is slow:
O(words x max_actions) passes over ``beam`` prefixes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import torch

from experiments.families.dtg.beam import Record, token_records, word_pieces
from lightning_modules.families.dtg import encoding as dtg
from lightning_modules.families.dtg.data import DTGExample
from lightning_modules.numeric import logsumexp


@dataclass(frozen=True)
class PortScore:
    """The log-prob of each terminal's prefix (each word's, at its last piece, then ``pop_root``'s and ``</s>``'s)
    and the total."""

    prefix: tuple[float, ...]
    total: float


@dataclass
class _Slot:
    state: dtg.DTGState
    records: list[Record]
    action_count: int = 0
    last_action: int = -1  # the column of the arc whose duplicate comes next
    pieces: list[Record] = field(default_factory=list)  # the records of the current word's later pieces


class OfficialBeamPort:
    """The official ``word_sync_beam_search`` over a DTG (arc-standard) or TXL (trans) checkpoint (module
    docstring); ``score`` gives each sentence's ``PortScore``."""

    def __init__(self, model: object, beam: int, word_beam: int, max_actions: int, fast_track: int,
                 pop_root: str = dtg.POP_ROOT_RULES[0]):
        if model.system != "standard":  # type: ignore[attr-defined]
            raise ValueError("the port of the official beam is for arc-standard checkpoints (the official system)")
        self.model, self.beam, self.word_beam = model, beam, word_beam
        self.max_actions, self.shift_size, self.pop_root_rule = max_actions, fast_track, pop_root
        self.compose = model.family == "dtg"  # type: ignore[attr-defined]
        vocab = model.vocab  # type: ignore[attr-defined]
        self.actions = [(vocab.id(dtg.LEFT_ARC), dtg.Transition(dtg.LEFT_ARC)),
                        (vocab.id(dtg.RIGHT_ARC), dtg.Transition(dtg.RIGHT_ARC))]
        self.pop_root, self.eos = vocab.id(dtg.POP_ROOT), vocab.id(dtg.EOS)

    def score(self, sentences: Sequence[Sequence[str]]) -> list[PortScore]:
        with torch.no_grad():
            return [self._sentence(list(words)) for words in sentences]

    def _sentence(self, words: list[str]) -> PortScore:
        model = self.model
        terminals = [(piece, k == 0, word) for word in word_pieces(model, words) for k, piece in enumerate(word)]
        terminals += [(self.pop_root, True, [self.pop_root]), (self.eos, True, [self.eos])]
        start = _Slot(dtg.DTGState("standard", self.pop_root_rule), [])
        start.records = token_records(model, [], start.state, None)
        slots: list[_Slot | None] = [start] + [None] * (self.beam - 1)
        scores = np.full(self.beam, -np.inf)
        scores[0] = 0.0
        word_count, prefix = 0, []
        width = len(self.actions) + 1  # the official columns: the actions, then the terminal
        for terminal, begin, word in terminals:
            finished = np.zeros(self.beam, dtype=bool)
            prev_compose = False
            closing = terminal == self.pop_root and self.pop_root_rule == "single-word"
            steps = 2 * self.max_actions - 1 if closing else self.max_actions
            shift_size = self.shift_size if begin else self.beam  # a later piece: only the piece is taken
            for k in range(steps):
                completed = finished | (scores == -np.inf)
                if finished.all() or completed.all():
                    break
                step = np.full((self.beam, width), -np.inf)
                live = [b for b in range(self.beam) if not completed[b]]
                if prev_compose:  # the forced duplicate of each live slot's arc
                    for b in live:
                        step[b, slots[b].last_action] = 0.0  # type: ignore[union-attr]
                else:
                    rows = self._distributions([slots[b] for b in live])  # type: ignore[misc]
                    for b, logprobs in zip(live, rows):
                        slot = slots[b]
                        assert slot is not None
                        if slot.action_count <= word_count - 2:  # the official action mask
                            for a, (column, t) in enumerate(self.actions):
                                if slot.state.check(t) is None:
                                    step[b, a] = float(logprobs[column])
                        if not begin or self._reaches(slot.state, terminal):
                            step[b, -1] = float(logprobs[terminal])
                step[finished] = -np.inf
                step[finished, -1] = 0.0
                candidates = (scores[:, None] + step).reshape(-1)
                chosen = select(candidates, width, shift_size, self.beam)
                new_slots: list[_Slot | None] = []
                new_scores = np.full(self.beam, -np.inf)
                new_finished = np.zeros(self.beam, dtype=bool)
                for j, index in enumerate(chosen):
                    if index < 0:
                        new_slots.append(None)
                        continue
                    b, column = divmod(index, width)
                    slot = slots[b]
                    assert slot is not None
                    new_finished[j] = column == width - 1
                    if finished[b]:  # carried: unchanged
                        new_slots.append(slot)
                        new_scores[j] = scores[b]
                        continue
                    new_scores[j] = candidates[index]
                    if prev_compose:  # the duplicate: already in the records
                        new_slots.append(slot)
                        continue
                    child = _Slot(slot.state.copy(), slot.records[:], slot.action_count, slot.last_action,
                                  slot.pieces[:])
                    if column == width - 1:
                        self._apply_terminal(child, terminal, begin, word)
                    else:
                        child.records += token_records(model, [r[0] for r in child.records], child.state,
                                                       self.actions[column][1])
                        child.action_count += 1
                        child.last_action = column
                    new_slots.append(child)
                slots, scores, finished = new_slots + [None] * (self.beam - len(new_slots)), new_scores, new_finished
                if self.compose:
                    prev_compose = not prev_compose
                if k == steps - 1:
                    scores[~finished] = -np.inf
            word_count += begin
            prefix.append(logsumexp(scores[np.isfinite(scores)].tolist()) if np.isfinite(scores).any() else -np.inf)
            if np.isfinite(scores).sum() >= self.word_beam:
                scores[scores < np.sort(scores)[::-1][self.word_beam - 1]] = -np.inf
        words_end = [k for k, (_, begin, word) in enumerate(terminals) if begin and len(word) == 1 or
                     not begin and terminals[k + 1][1]]  # each word's last piece, then pop_root and </s>
        return PortScore(tuple(prefix[k] for k in words_end), prefix[-1])

    def _reaches(self, state: dtg.DTGState, terminal: int) -> bool:
        if terminal == self.eos:
            return state.can_end()
        return state.check(dtg.Transition(dtg.POP_ROOT) if terminal == self.pop_root else dtg.GEN) is None

    def _apply_terminal(self, slot: _Slot, terminal: int, begin: bool, word: list[int]) -> None:
        """Take the terminal: ``</s>`` adds nothing; a word's first piece applies its GEN (the records of all its
        pieces made at once, the later ones queued), a later piece feeds its queued record."""
        if terminal == self.eos:
            return
        if not begin:
            slot.records.append(slot.pieces.pop(0))
            return
        t = dtg.Transition(dtg.POP_ROOT) if terminal == self.pop_root else dtg.GEN
        made = token_records(self.model, [r[0] for r in slot.records], slot.state, t, word)
        slot.records.append(made[0])
        slot.pieces = made[1:]

    def _distributions(self, slots: list[_Slot]) -> list[torch.Tensor]:
        """The next-token log-probs after each slot's whole prefix (one full forward pass)."""
        examples = [_prefix_example(s.records, not self.compose) for s in slots]
        rows = self.model.distributions(examples, [[len(e) - 1] for e in examples])  # type: ignore[attr-defined]
        return [row[0] for row in rows]


def select(candidates: np.ndarray, width: int, shift_size: int, beam: int) -> list[int]:
    """The official ``find_selected_indices_cpu`` over the flat candidate scores: in descending order (stable),
    the first ``shift_size`` terminal-column candidates go to the front (swapping), the others fill up to
    ``beam - shift_size``; -1 marks an empty place."""
    order = torch.sort(torch.from_numpy(candidates), descending=True, stable=True)
    out = [-1] * beam
    s_cursor = t_cursor = 0
    for value, index in zip(order.values.tolist(), order.indices.tolist()):
        if value == -np.inf:
            continue
        if index % width == width - 1 and s_cursor < shift_size:
            out[t_cursor] = out[s_cursor]
            out[s_cursor] = index
            s_cursor += 1
            t_cursor += 1
        elif t_cursor - s_cursor < beam - shift_size:
            out[t_cursor] = index
            t_cursor += 1
        if t_cursor == beam:
            break
    return out


def _prefix_example(records: list[Record], causal: bool) -> DTGExample:
    """A slot's whole prefix as one example: DTG's attend lists, or TXL (trans)'s causal linear attention."""
    n = len(records)
    compose = np.array([r[3] for r in records], dtype=bool)
    ptr = np.zeros(n + 1, dtype=np.int64)
    if not causal:
        np.cumsum([len(r[1]) for r in records], out=ptr[1:])
    return DTGExample(
        tokens=np.array([r[0] for r in records], dtype=np.int64),
        labels=np.zeros(n, dtype=np.int64),
        types=np.where(compose, dtg.DTGType.LA, dtg.DTGType.W).astype(np.int8),  # read by nothing for one chunk
        depth=np.zeros(n, dtype=np.int32),
        compose=compose,
        word_index=np.full(n, -1, dtype=np.int32),
        attend_ptr=ptr,
        attend_key=np.array([] if causal else [k for r in records for k in r[1]], dtype=np.int32),
        attend_rel=np.array([] if causal else [v for r in records for v in r[2]], dtype=np.int32),
        relpos="linear" if causal else "depth",
        causal=causal,
        added=np.array([r[4] for r in records], dtype=np.int64),
    )
