"""The hypotheses of a TG / TXL (trees) beam as rows of tensors, decoded over one key/value pool.

A hypothesis is one row of every field of ``Hypotheses``: its sentence, log-prob, Choe–Charniak actions, the
``cc_constraints`` state (open constituents as their closing ids, how many innermost are empty), the pool row
of each position, and its ``decoding.DecodingRows`` (depths, memory, TG stack). Branching is an
``index_select`` of the rows; nothing is per-hypothesis Python. ``Decoder.feed`` advances many rows over one
token each (a TG closing nonterminal: its COMPOSE and STACK tokens, both in the same ``TransformerXL.step``),
each token attending what ``decoding.AttentionRule`` gives it.

Widths (positions, stack, open constituents, actions) grow with host-side upper bounds (each fed token adds
at most one), so no feed needs a tensor read back to size them; ``tighten`` (between words) trims them to
the real maxima.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace

import torch
from torch import Tensor

from experiments.families.tg.scorers import TGModel
from lightning_modules.data.encodings.choe_charniak import TokenType
from lightning_modules.families.tg.data import RELPOS
from lightning_modules.families.tg.decoding import AttentionRule, DecodingRows

_WIDE = ("actions", "words", "rows", "depths", "memory", "stack", "open_at", "cc_close")
_FILL = {"actions": -1, "words": -1, "rows": -1, "depths": 0, "memory": False, "stack": 0, "open_at": 0,
         "cc_close": 0}


@dataclass
class Hypotheses(DecodingRows):
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
    pending: Tensor  # [H] long
    bounds: tuple[int, int, int, int]
    next: Tensor | None = None

    @classmethod
    def start(cls, sentences: int, bos: int, device: torch.device | str) -> Hypotheses:
        """One empty hypothesis per sentence, ``<s>`` its first action (not fed yet: ``pending``)."""
        ones = torch.ones((sentences, 1), dtype=torch.long, device=device)
        return cls(**DecodingRows.empty(sentences, device), sentence=torch.arange(sentences, device=device),
                   logprob=torch.zeros(sentences, dtype=torch.float64, device=device), actions=ones * bos,
                   words=-ones, n_actions=ones[:, 0], cc_close=ones * 0, cc_open=ones[:, 0] * 0,
                   cc_empty=ones[:, 0] * 0, rows=-ones, pending=ones[:, 0] * bos, bounds=(0, 0, 0, 1))

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

    def append(self, index: Tensor | None, actions: Tensor, words: Tensor) -> None:
        """Record one more action of the rows ``index`` (distinct, written in place; None: every row, the
        fields replaced, so rows may share them with the hypotheses they were copied from)."""
        if index is None:
            self.actions = self.actions.scatter(1, self.n_actions[:, None], actions[:, None])
            self.words = self.words.scatter(1, self.n_actions[:, None], words[:, None])
            self.n_actions = self.n_actions + 1
            return
        flat = index * self.actions.shape[1] + self.n_actions[index]
        self.actions.view(-1)[flat] = actions
        self.words.view(-1)[flat] = words
        self.n_actions[index] += 1


class Decoder:
    """A TG-family network decoding ``Hypotheses`` rows over one key/value pool (``TransformerXL.step``)."""

    def __init__(self, model: TGModel, capacity: int = 4096, slack: int = 1024):
        self.model = model
        self.slack = slack  # ``compact`` waits until the pool holds this many rows beyond twice the live ones
        self.network = model.module.network
        self.pool = self.network.new_pool(capacity)
        self.causal = model.family != "tg"
        # each feed's keys trimmed to its widest attend list read back (free on a CPU), else to the host's bound
        self.read_widths = torch.device(model.device).type == "cpu"
        self.rule = AttentionRule(self.causal, RELPOS[model.config["model"]["relpos"]], model.length, model.memory)
        types = torch.from_numpy(model.vocab.token_types(torch.arange(len(model.vocab)).numpy()))
        self.types = types.long().to(model.device)
        with torch.no_grad():
            self.parameters = self.network.step_parameters()

    @torch.no_grad()
    def feed(self, h: Hypotheses, index: Tensor | None, tokens: Tensor, types: Tensor | None = None,
             twice: Tensor | None = None) -> Tensor:
        """Feed each row ``index`` (distinct; None: every row, in order) the token ``tokens`` of ``TokenType``
        ``types`` (default: the vocabulary's; at position 0 SOS); the entries where ``twice`` [n] bool (a TG
        closing nonterminal) then the same token again as CNT2 in the same step. Returns the log-probabilities
        [n, V] of the token after each row's last one, in ``index`` order; the COMPOSE copies predict nothing."""
        count = len(tokens)
        position = h.position if index is None else h.position[index]
        ttype = torch.where(position == 0, int(TokenType.SOS), self.types[tokens] if types is None else types)
        first_chunk = h.bounds[0] <= self.rule.length  # every position below the bound
        entries = [self.rule.advance(h, index, ttype, first_chunk)]
        where = None if twice is None else twice.nonzero()[:, 0]  # how many close: the one count read
        new_rows = self.pool.allocate(count + (0 if where is None else len(where)))
        _write_rows(h, index, new_rows[:count])
        feeds, fed = [tokens], [index]
        last = torch.arange(count, device=tokens.device)
        if where is not None and len(where):
            second = where if index is None else index[where]
            entries.append(self.rule.advance(h, second, torch.full_like(second, int(TokenType.CNT2)), first_chunk))
            _write_rows(h, second, new_rows[count:])
            feeds.append(tokens[where])
            fed.append(second)
            last[where] = count + torch.arange(len(second), device=tokens.device)
        limit = h.bounds[0] if self.causal else h.bounds[1] + 1  # no attend list is longer
        entries = [_packed(*entry, None if self.read_widths else limit) for entry in entries]
        width = max(keys.shape[1] for keys, _, _ in entries)
        key_rows = torch.cat([_rows_at(h, rows, keys, width) for rows, (keys, _, _) in zip(fed, entries)])
        relpos = torch.cat([torch.nn.functional.pad(rel, (0, width - rel.shape[1])) for _, rel, _ in entries])
        compose = torch.cat([c for _, _, c in entries])
        logits = self.network.step(torch.cat(feeds), self.pool, new_rows, key_rows, relpos, compose,
                                   self.parameters, last)
        return logits.float().log_softmax(-1)

    def compact(self, h: Hypotheses) -> None:
        """Drop the pool rows none of ``h`` can attend any more, once they are most of the pool."""
        rows = torch.unique(h.rows[self.rule.live(h) & (h.rows >= 0)])
        if self.pool.size < 2 * len(rows) + self.slack:
            return
        remap = self.pool.compact(rows)
        h.rows = torch.where(h.rows >= 0, remap[h.rows.clamp(min=0)], -1)


def _packed(keys: Tensor, rel: Tensor, compose: Tensor, limit: int | None) -> tuple[Tensor, Tensor, Tensor]:
    """Each row's keys (and relative positions) moved to the front in order, the padding after them, and the
    columns no row uses dropped: those past ``limit`` (the host-side bound of an attend list), or with
    ``limit`` None those past the widest row's (a read back)."""
    order = torch.sort((keys < 0).to(torch.uint8), dim=1, stable=True).indices
    keys, rel = keys.gather(1, order), rel.gather(1, order)
    width = max(1, int((keys >= 0).sum(1).max())) if limit is None else limit
    return keys[:, :width], rel[:, :width], compose


def _write_rows(h: Hypotheses, index: Tensor | None, rows: Tensor) -> None:
    """The pool rows of the tokens just attended (at each row's previous position), written in place."""
    if index is None:
        h.rows.scatter_(1, (h.position - 1)[:, None], rows[:, None])
    else:
        h.rows.view(-1)[index * h.rows.shape[1] + h.position[index] - 1] = rows


def _rows_at(h: Hypotheses, index: Tensor | None, keys: Tensor, width: int) -> Tensor:
    """Pool rows [n, width] of key positions ``keys`` [n, W] (-1: padding) of rows ``index`` (None: all)."""
    rows = (h.rows if index is None else h.rows[index]).gather(1, keys.clamp(min=0)).masked_fill(keys < 0, -1)
    return torch.nn.functional.pad(rows, (0, width - rows.shape[1]), value=-1)
