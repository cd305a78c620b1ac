"""The hypotheses of a TG / TXL (trees) beam as rows of tensors, decoded over one key/value pool.

A hypothesis is one row of every field of ``Hypotheses``: its sentence, log-prob, Choe–Charniak actions, the
``cc_constraints`` state (open constituents as their closing ids, how many innermost are empty), and the
decoding state that ``lightning_modules.families.tg.decoding.DecodingState`` keeps as Python lists — the pool
row, depth and memory flag of each position, the TG stack (positions) and its open constituents (stack
indices, the root ``<s>`` first). Branching is an ``index_select`` of the rows; nothing is per-hypothesis
Python. ``Decoder.feed`` advances many rows over one token each (a TG closing nonterminal: its COMPOSE and
STACK tokens, both in the same ``TransformerXL.step``), computing each token's attend list — STACK: the whole
stack; COMPOSE: the innermost open constituent's part of it; causal TXL: every earlier position — restricted
to its chunk and that chunk's memory as the chunked forward pass restricts it, with tensor operations.

Widths (positions, stack, open constituents, actions) grow with host-side upper bounds (each fed token adds
at most one), so no feed reads a tensor back; ``tighten`` (between words) trims them to the real maxima.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace

import torch
from torch import Tensor

from experiments.families.tg.scorers import TGModel
from lightning_modules.data.encodings.choe_charniak import TokenType
from lightning_modules.families.tg.data import RELPOS

_WIDE = ("actions", "words", "rows", "depths", "memory", "stack", "open_at", "cc_close")
_FILL = {"actions": -1, "words": -1, "rows": -1, "depths": 0, "memory": False, "stack": 0, "open_at": 0,
         "cc_close": 0}


@dataclass
class Hypotheses:
    """Hypotheses as tensor rows (module docstring); ``next`` [H, V] the log-probs of the token after the fed
    ones (set by a feed, dropped by ``select`` unless asked), ``pending`` a counted but unfed token (-1: none).

    ``bounds``: host-side upper bounds of (positions, stack size, open constituents, actions) over the rows.
    """

    sentence: Tensor  # [H] long
    logprob: Tensor  # [H] float64
    actions: Tensor  # [H, A] vocabulary ids of the actions (<s> first), -1 past the end
    words: Tensor  # [H, A] the word of each terminal action, -1 for the others
    n_actions: Tensor  # [H]
    cc_close: Tensor  # [H, O] closing id of each open constituent, outermost first
    cc_open: Tensor  # [H] open constituents
    cc_empty: Tensor  # [H] innermost ones still without a terminal
    rows: Tensor  # [H, P] pool row of each position (-1: none, or dropped by compaction)
    depths: Tensor  # [H, P]
    memory: Tensor  # [H, P] bool: held in the memory of the current chunk
    position: Tensor  # [H] of the next token
    stack: Tensor  # [H, S] TG stack (positions, ascending)
    stack_len: Tensor  # [H]
    open_at: Tensor  # [H, O] stack index of each open TG constituent (<s> first)
    open_len: Tensor  # [H]
    pending: Tensor  # [H] long
    bounds: tuple[int, int, int, int]
    next: Tensor | None = None

    @classmethod
    def start(cls, sentences: int, bos: int, device: torch.device | str) -> Hypotheses:
        """One empty hypothesis per sentence, ``<s>`` its first action (not fed yet: ``pending``)."""
        def zeros(*shape: int, dtype: torch.dtype = torch.long) -> Tensor:
            return torch.zeros(shape, dtype=dtype, device=device)

        long = torch.full((sentences, 1), -1, dtype=torch.long, device=device)
        return cls(torch.arange(sentences, device=device), zeros(sentences, dtype=torch.float64),
                   torch.full_like(long, bos), long.clone(), torch.ones_like(long[:, 0]), zeros(sentences, 1),
                   zeros(sentences), zeros(sentences), long.clone(), zeros(sentences, 1),
                   zeros(sentences, 1, dtype=torch.bool), zeros(sentences), zeros(sentences, 1),
                   zeros(sentences), zeros(sentences, 1), zeros(sentences), torch.full_like(long[:, 0], bos),
                   (0, 0, 0, 1))

    def __len__(self) -> int:
        return self.sentence.shape[0]

    def select(self, index: Tensor, keep_next: bool = False) -> Hypotheses:
        """The rows ``index`` (a copy; a row may come several times: branches)."""
        out = {f.name: getattr(self, f.name).index_select(0, index) for f in fields(self)
               if f.name not in ("bounds", "next")}
        nxt = self.next.index_select(0, index) if keep_next and self.next is not None else None
        return Hypotheses(**out, bounds=self.bounds, next=nxt)

    @staticmethod
    def cat(parts: list[Hypotheses]) -> Hypotheses:
        """The rows of all ``parts`` in order (``next`` dropped)."""
        bounds = tuple(max(b) for b in zip(*(p.bounds for p in parts)))
        widths = {name: max(getattr(p, name).shape[1] for p in parts) for name in _WIDE}
        parts = [p.widened(widths) for p in parts]
        out = {f.name: torch.cat([getattr(p, f.name) for p in parts]) for f in fields(Hypotheses)
               if f.name not in ("bounds", "next")}
        return Hypotheses(**out, bounds=bounds)  # type: ignore[arg-type]

    def widened(self, widths: dict[str, int]) -> Hypotheses:
        """The same rows with the wide fields at least ``widths`` columns (padded)."""
        changes = {}
        for name, width in widths.items():
            t = getattr(self, name)
            if t.shape[1] < width:
                pad = t.new_full((t.shape[0], width - t.shape[1]), _FILL[name])
                changes[name] = torch.cat([t, pad], dim=1)
        return replace(self, **changes) if changes else self

    def grown(self, tokens: int) -> Hypotheses:
        """Room for ``tokens`` more tokens (and actions) in every row (bounds raised, widths doubled
        when short)."""
        pos, stack, opened, actions = self.bounds
        self.bounds = (pos + tokens, stack + tokens, opened + 1, actions + tokens)
        need = {"rows": pos + tokens, "depths": pos + tokens, "memory": pos + tokens, "stack": stack + tokens + 1,
                "open_at": opened + 2, "cc_close": opened + 2, "actions": actions + tokens,
                "words": actions + tokens}
        short = {n: max(w, 2 * getattr(self, n).shape[1]) for n, w in need.items() if getattr(self, n).shape[1] < w}
        return self.widened(short) if short else self

    def tighten(self) -> None:
        """Bounds set to the rows' real maxima and widths trimmed to them (reads the device: between words)."""
        if not len(self):
            return
        maxima = torch.stack([self.position.max(), self.stack_len.max(), torch.maximum(self.open_len.max(),
                              self.cc_open.max()), self.n_actions.max()]).tolist()
        self.bounds = tuple(maxima)
        pos, stack, opened, actions = maxima
        for name, width in (("rows", pos), ("depths", pos), ("memory", pos), ("stack", stack + 1),
                            ("open_at", opened + 1), ("cc_close", opened + 1), ("actions", actions),
                            ("words", actions)):
            setattr(self, name, getattr(self, name)[:, : max(1, width)].contiguous())

    def append(self, index: Tensor, actions: Tensor, words: Tensor) -> None:
        """Record one more action of the rows ``index`` (distinct)."""
        column = self.n_actions[index, None]
        self.actions[index] = self.actions[index].scatter(1, column, actions[:, None])
        self.words[index] = self.words[index].scatter(1, column, words[:, None])
        self.n_actions[index] += 1


class Decoder:
    """A TG-family network decoding ``Hypotheses`` rows over one key/value pool (``TransformerXL.step``)."""

    def __init__(self, model: TGModel, capacity: int = 4096, slack: int = 1024):
        self.model = model
        self.slack = slack  # ``compact`` waits until the pool holds this many rows beyond twice the live ones
        self.network = model.module.network
        self.pool = self.network.new_pool(capacity)
        self.causal = model.family != "tg"
        self.relpos = RELPOS[model.config["model"]["relpos"]]
        self.length = model.length
        self.smart = model.memory == "smart" and not self.causal
        types = torch.from_numpy(model.vocab.token_types(torch.arange(len(model.vocab)).numpy()))
        self.types = types.long().to(model.device)
        with torch.no_grad():
            self.rel_keys = self.network.relative_key_tables()

    def _attend(self, h: Hypotheses, index: Tensor, ttype: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """Advance the decoding state of rows ``index`` (distinct) over one token each of ``TokenType``
        ``ttype``: (key positions [n, W] with -1 padding, raw relative positions [n, W], compose [n])."""
        pos = h.position[index]
        size = self.length
        start = pos - pos % size
        width = h.rows.shape[1]
        columns = torch.arange(width, device=pos.device)
        if self.causal:
            first = (start - size).clamp(min=0)
            keys = first[:, None] + torch.arange(min(h.bounds[0] + 1, 2 * size), device=pos.device)
            keys = keys.masked_fill(keys > pos[:, None], -1)
            rel = (pos[:, None] - keys) if self.relpos == "linear" else torch.zeros_like(keys)
            h.position[index] = pos + 1
            return keys, rel.masked_fill(keys < 0, 0), torch.zeros_like(pos, dtype=torch.bool)
        stack, stack_len = h.stack[index], h.stack_len[index]
        open_at, open_len = h.open_at[index], h.open_len[index]
        depths, memory = h.depths[index], h.memory[index]
        slots = torch.arange(stack.shape[1], device=pos.device)
        in_stack = slots < stack_len[:, None]
        new_chunk = (pos > 0) & (pos == start)
        if self.smart:  # the stack's items from the last chunk or its memory, the newest L of them
            keep = in_stack & ((stack >= (start - size)[:, None]) | memory.gather(1, stack))
            keep &= keep.flip(1).cumsum(1).flip(1) <= size
            fresh = _scatter_true(memory.shape, stack, keep)
        else:
            fresh = (columns >= (start - size)[:, None]) & (columns < start[:, None])
        memory = torch.where(new_chunk[:, None], fresh, memory)
        compose = (ttype == TokenType.CNT) & (pos > 0)
        top = open_at.gather(1, (open_len - 1).clamp(min=0)[:, None])[:, 0]  # innermost open constituent
        valid = in_stack & (slots >= torch.where(compose, top, 0)[:, None])
        valid &= (start[:, None] == 0) | (stack >= start[:, None]) | memory.gather(1, stack)
        top_depth = depths.gather(1, stack.gather(1, top[:, None]))[:, 0]
        depth = torch.where(compose, top_depth, open_len)
        keys = torch.cat([stack.masked_fill(~valid, -1), pos[:, None]], dim=1)
        if self.relpos == "depth":
            rel = depth[:, None] - depths.gather(1, keys.clamp(min=0))
            rel[:, -1] = 0
        elif self.relpos == "linear":
            rel = pos[:, None] - keys
        else:
            rel = torch.zeros_like(keys)
        # the state after the token: COMPOSE pops the constituent and pushes itself; STACK pushes itself
        # (not CNT2), an opening one (or <s>) also opens a constituent
        depths = depths.scatter(1, pos[:, None], depth[:, None])
        pushes = ttype != TokenType.CNT2
        slot = torch.where(compose, top, stack_len)
        stack = torch.where(pushes[:, None] & (slots == slot[:, None]), pos[:, None], stack)
        opens = ((ttype == TokenType.ONT) | (pos == 0)) & ~compose
        open_slots = torch.arange(open_at.shape[1], device=pos.device)
        open_at = torch.where(opens[:, None] & (open_slots == open_len[:, None]), stack_len[:, None], open_at)
        h.open_len[index] = open_len + opens.long() - compose.long()
        h.stack_len[index] = torch.where(compose, top + 1, stack_len + pushes.long())
        h.stack[index], h.open_at[index], h.depths[index], h.memory[index] = stack, open_at, depths, memory
        h.position[index] = pos + 1
        return keys, rel.masked_fill(keys < 0, 0), compose

    @torch.no_grad()
    def feed(self, h: Hypotheses, index: Tensor, tokens: Tensor, types: Tensor | None = None,
             twice: Tensor | None = None) -> Tensor:
        """Feed each row ``index`` (distinct) the token ``tokens`` of ``TokenType`` ``types`` (default: the
        vocabulary's; at position 0 SOS); the entries where ``twice`` [n] bool (a TG closing nonterminal) then the same
        token again as CNT2 in the same step. Returns the log-probabilities [n, V] of the token after
        each row's last one, in ``index`` order; the COMPOSE copies predict nothing."""
        ttype = torch.where(h.position[index] == 0, int(TokenType.SOS), self.types[tokens] if types is None else types)
        entries = [self._attend(h, index, ttype)]
        where = None if twice is None else twice.nonzero()[:, 0]  # how many close: the one count read
        new_rows = self.pool.allocate(len(index) + (0 if where is None else len(where)))
        _write_rows(h, index, new_rows[: len(index)])
        feeds, fed = [tokens], [index]
        last = torch.arange(len(index), device=index.device)
        if where is not None and len(where):
            second = index[where]
            entries.append(self._attend(h, second, torch.full_like(second, int(TokenType.CNT2))))
            _write_rows(h, second, new_rows[len(index):])
            feeds.append(tokens[where])
            fed.append(second)
            last[where] = len(index) + torch.arange(len(second), device=index.device)
        entries = [_packed(*entry) for entry in entries]
        width = max(keys.shape[1] for keys, _, _ in entries)
        key_rows = torch.cat([_rows_at(h, rows, keys, width) for rows, (keys, _, _) in zip(fed, entries)])
        relpos = torch.cat([torch.nn.functional.pad(rel, (0, width - rel.shape[1])) for _, rel, _ in entries])
        compose = torch.cat([c for _, _, c in entries])
        logits = self.network.step(torch.cat(feeds), self.pool, new_rows, key_rows, relpos, compose,
                                   self.rel_keys, last)
        return logits.float().log_softmax(-1)

    def compact(self, h: Hypotheses) -> None:
        """Drop the pool rows none of ``h`` can attend any more, once they are most of the pool."""
        columns = torch.arange(h.rows.shape[1], device=h.rows.device)
        start = h.position - h.position % self.length
        if self.causal:
            live = (columns >= (start - self.length)[:, None]) & (columns < h.position[:, None])
        else:
            slots = torch.arange(h.stack.shape[1], device=h.rows.device)
            live = h.memory | _scatter_true(h.memory.shape, h.stack, slots < h.stack_len[:, None])
        rows = torch.unique(h.rows[live & (h.rows >= 0)])
        if self.pool.size < 2 * len(rows) + self.slack:
            return
        remap = self.pool.compact(rows)
        h.rows = torch.where(h.rows >= 0, remap[h.rows.clamp(min=0)], -1)


def _packed(keys: Tensor, rel: Tensor, compose: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """Each row's keys (and relative positions) moved to the front in order, the padding after them, and the
    columns no row uses dropped: on a CPU by counting them (reading a count costs nothing there), on an
    accelerator only past the host-side bound (no read back)."""
    order = torch.sort((keys < 0).to(torch.uint8), dim=1, stable=True).indices
    keys, rel = keys.gather(1, order), rel.gather(1, order)
    if keys.device.type == "cpu":
        width = max(1, int((keys >= 0).sum(1).max()))
        keys, rel = keys[:, :width], rel[:, :width]
    return keys, rel, compose


def _scatter_true(shape: torch.Size, index: Tensor, flags: Tensor) -> Tensor:
    """A bool tensor of ``shape`` true at columns ``index`` [n, k] where ``flags`` [n, k]."""
    out = torch.zeros((shape[0], shape[1] + 1), dtype=torch.bool, device=index.device)
    out.scatter_(1, torch.where(flags, index, shape[1]), True)
    return out[:, : shape[1]]


def _write_rows(h: Hypotheses, index: Tensor, rows: Tensor) -> None:
    """The pool rows of the tokens just attended (at each row's previous position)."""
    h.rows[index] = h.rows[index].scatter(1, (h.position[index] - 1)[:, None], rows[:, None])


def _rows_at(h: Hypotheses, index: Tensor, keys: Tensor, width: int) -> Tensor:
    """Pool rows [n, width] of key positions ``keys`` [n, W] (-1: padding) of rows ``index``."""
    rows = h.rows[index].gather(1, keys.clamp(min=0)).masked_fill(keys < 0, -1)
    return torch.nn.functional.pad(rows, (0, width - rows.shape[1]), value=-1)
