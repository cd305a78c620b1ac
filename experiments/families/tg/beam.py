"""The word-synchronous beam search of TG and TXL (trees) on a key/value cache (Stern et al. 2017).

The search (which hypotheses it keeps, and every number it returns) is the one ``ReencodingBeamScorer``
defines in ``scorers.py``; this is how it runs fast. For word i, starting from the word beam, at each action
step every frontier hypothesis may generate word i (all its pieces, forced) — it then joins the *completed*
set — or take one nonterminal action that keeps the prefix a tree prefix (``cc_constraints``: open any label,
close the top constituent once it dominates a terminal, never the root while words remain); the best
``beam`` nonterminal extensions over the whole frontier form the next frontier (ties: frontier order, then
vocabulary order). At most ``max_actions`` nonterminal actions separate two words. Word i's prefix value is
the logsumexp over the completed set, which is then pruned to the best ``word_beam`` (ties: completion
order). After the last word every completed hypothesis closes its open constituents (forced) and ``total`` is
the logsumexp over those complete trees — a lower bound on log p(x). Under ``word_prob="corrected"`` (pieces;
``tree_marginal``'s definition) word i's value is the difference of successive logsumexps over the completed
sets of ``log p(prefix) + log P(B | prefix)``, B every token that does not continue a word; every completion's
last piece is then fed to read P(B | ·), not only the word beam's.

**The cache.** ``Decoder`` feeds one token per hypothesis through ``TransformerXL.step``: each token's keys
and values are computed once into a ``KeyValuePool`` row, and its query reads only the rows of its attend
list (``DecodingState``: TG's STACK/COMPOSE lists or TXL's causal window, restricted to chunk and memory as
the chunked forward pass restricts them). A hypothesis is its ``DecodingState`` and the pool rows of its
positions; branching copies those small lists, never keys or values. A word's probability is read from the
distribution its frontier hypothesis already has; a completed hypothesis feeds its word only if it survives
the word beam (or must close the sentence), and a nonterminal extension only if it enters the frontier. A TG
closing nonterminal is fed as its two tokens (COMPOSE, then STACK) in the same step, the output layer applied
to the second only. Every feed is one batched ``step`` over the hypotheses of all sentences in the batch.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np
import torch

from experiments.evaluate.scorer import Convention, SentenceScore, check_sentences
from experiments.evaluate.scorers import beams
from experiments.evaluate.word_prob import WORD_PROBS, check
from experiments.families.tg.methods import BEAM  # the method's defaults, the only ones
from experiments.families.tg.scorers import TGModel, action_tree
from lightning_modules.data.encodings.choe_charniak import BOS, TokenType
from lightning_modules.data.tree import Tree, to_bracketed
from lightning_modules.errors import InputError
from lightning_modules.families.tg.cc_constraints import ActionMasks, CCState
from lightning_modules.families.tg.data import RELPOS
from lightning_modules.families.tg.decoding import DecodingState
from lightning_modules.numeric import logsumexp


@contextmanager
def _no_cyclic_gc() -> Iterator[None]:
    """Python's cyclic collector paused: a search creates many small acyclic objects (freed by reference
    counting), and every collection would rescan all live hypotheses (~20% of a beam-50 search)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


class Decoder:
    """A TG-family network decoding token by token for many hypotheses at once, over one key/value pool."""

    def __init__(self, model: TGModel, capacity: int = 4096, slack: int = 1024):
        self.model = model
        self.slack = slack  # ``compact`` waits until the pool holds this many rows beyond twice the live ones
        self.network = model.module.network
        self.pool = self.network.new_pool(capacity)
        self.causal = model.family != "tg"
        self.relpos = RELPOS[model.config["model"]["relpos"]]
        with torch.no_grad():
            self.rel_keys = self.network.relative_key_tables()

    def start(self) -> DecodingState:
        return DecodingState(self.causal, self.relpos, self.model.length, self.model.memory)

    @torch.no_grad()
    def feed(self, states: Sequence[DecodingState], rows: Sequence[list[int]], tokens: Sequence[int],
             types: Sequence[int], predict: Sequence[bool] | None = None) -> torch.Tensor | None:
        """Advance each hypothesis (its state and row list, both updated) over one token of the given id and
        ``TokenType``; returns the log-probabilities [n, V] of the token that follows each entry where
        ``predict`` (default: every entry), None where none is.

        A hypothesis may come several times in a row (its next tokens in order, e.g. a TG closing
        nonterminal's COMPOSE and STACK tokens): a later token attends the earlier ones, whose keys and values
        every layer writes to the pool before any of its queries reads it — one step, same numbers."""
        attention = [state.step(t) for state, t in zip(states, types)]
        count = len(states)
        new_rows = self.pool.allocate(count)
        first = self.pool.size - count
        for k, row_list in enumerate(rows):
            row_list.append(first + k)
        width = max(len(keys) for keys, _, _ in attention)
        key_rows = np.full((count, width), -1, dtype=np.int64)
        relpos = np.zeros((count, width), dtype=np.int64)
        for b, (row_list, (keys, rel, _)) in enumerate(zip(rows, attention)):
            key_rows[b, : len(keys)] = [row_list[k] for k in keys]
            relpos[b, : len(rel)] = rel
        outputs: torch.Tensor | bool = True
        if predict is not None and not all(predict):
            wanted = [b for b, p in enumerate(predict) if p]
            outputs = torch.tensor(wanted, dtype=torch.long, device=self.model.device) if wanted else False
        device = self.model.device
        logits = self.network.step(
            torch.tensor(tokens, dtype=torch.long, device=device), self.pool, new_rows,
            torch.from_numpy(key_rows).to(device), torch.from_numpy(relpos).to(device),
            torch.tensor([c for _, _, c in attention], device=device), self.rel_keys, outputs)
        return None if logits is None else logits.float().log_softmax(-1)

    def compact(self, hypotheses: Sequence[_Hypothesis]) -> None:
        """Drop the pool rows none of ``hypotheses`` can attend any more, once they are most of the pool."""
        live = sorted({h.rows[p] for h in hypotheses for p in h.state.live()})
        if self.pool.size < 2 * len(live) + self.slack:
            return
        remap = self.pool.compact(torch.tensor(live, dtype=torch.long, device=self.pool.device)).tolist()
        for h in hypotheses:
            h.rows = [remap[r] if r >= 0 else -1 for r in h.rows]


@dataclass(eq=False, slots=True)
class _Hypothesis:
    """An action prefix: its Choe–Charniak tokens, log-prob, constraint and decoding state, pool rows.

    ``next`` is the distribution of the token after the fed ones (``source``: the feed's [B, V] matrix and
    its row there, so a frontier's rows are read as one slice); ``pending`` a terminal piece counted in
    ``logprob`` but not fed yet (-1: none). ``shared``: state and rows are the parent's (copied before a feed).
    """

    tokens: tuple[str, ...]
    types: tuple[int, ...]
    word_index: tuple[int, ...]
    logprob: float
    cc: CCState
    state: DecodingState
    rows: list[int]
    next: torch.Tensor | None = None
    pending: int = -1
    shared: bool = True
    source: tuple[torch.Tensor, int] | None = None

    def own(self) -> None:
        if self.shared:
            self.state, self.rows, self.shared = self.state.copy(), self.rows[:], False


# a sentence's search: its prefix values, its corrected values (None: sum-pieces), its final hypotheses
Search = tuple[np.ndarray, np.ndarray | None, list[_Hypothesis]]


def _next_rows(hypotheses: Sequence[_Hypothesis]) -> torch.Tensor:
    """The ``next`` distributions of ``hypotheses`` as one [n, V] tensor: a view when they are consecutive
    rows of one feed (a frontier always is), else a copy."""
    first = hypotheses[0].source
    if first is not None and all(h.source is not None and h.source[0] is first[0]
                                 and h.source[1] == first[1] + k for k, h in enumerate(hypotheses)):
        return first[0][first[1] : first[1] + len(hypotheses)]
    return torch.stack([h.next for h in hypotheses])


def _next_values(hypotheses: Sequence[_Hypothesis], tokens: Sequence[int]) -> list[float]:
    """``h.next[token]`` for each hypothesis and token, read in one indexing when they share a feed."""
    first = hypotheses[0].source
    if first is not None and all(h.source is not None and h.source[0] is first[0] for h in hypotheses):
        rows = torch.tensor([h.source[1] for h in hypotheses])
        return first[0][rows, torch.tensor(tokens, device=rows.device)].tolist()
    rows = torch.stack([h.next for h in hypotheses])
    return rows.gather(1, torch.tensor(tokens, device=rows.device)[:, None])[:, 0].tolist()


class BeamScorer:
    """Word-synchronous beam search over the joint model's actions, on a key/value cache (module docstring).

    ``fast_track`` (default None: every completion is kept, the search above) switches to Stern et al.'s
    rule, in which completions compete with nonterminal extensions for the action beam and the best
    ``fast_track`` completions of each step are kept regardless (see ``_select``). The defaults are the
    family's beam method's (``methods.BEAM``).

    ``batch_size`` sentences are searched together (their hypotheses share every batched step); the numbers
    do not depend on it.
    """

    def __init__(self, model: TGModel, beam: int = BEAM.options["beam"],
                 word_beam: int = BEAM.options["word_beam"], max_actions: int = BEAM.options["max_actions"],
                 batch_size: int = 8, fast_track: int | None = BEAM.options["fast_track"],
                 word_prob: str = WORD_PROBS[0]):
        if not model.joint:
            raise InputError(f"{model.family} is a string model: score it with method=exact", "method")
        beams.check_beam_settings(beam, word_beam, max_actions, batch_size, fast_track)
        self.model, self.beam, self.word_beam, self.max_actions = model, beam, word_beam, max_actions
        self.batch_size, self.fast_track = batch_size, fast_track
        self.name = model.family
        boundary = None if check(word_prob) == WORD_PROBS[0] else model.word_boundary_ids()
        if word_prob != WORD_PROBS[0] and boundary is None:
            raise InputError(f"a vocabulary of {model.vocab_kind} has one token per word: --word-prob {word_prob} "
                             "needs SentencePiece terminals", "--word-prob")
        self.boundary = None if boundary is None else torch.tensor(boundary, device=model.device)
        self.convention = Convention(method="beam", bound=True, beam=beam, word_beam=word_beam,
                                     max_actions=max_actions, fast_track=fast_track, incremental="beam",
                                     end_of_sentence=True, word_prob=word_prob)
        vocab = model.vocab
        masks = ActionMasks(vocab)
        self.masks = masks
        types = vocab.token_types(np.arange(len(vocab)))
        self.nonterminal_ids = np.flatnonzero(masks.opening | (types == TokenType.CNT))  # ascending
        self.nonterminal_index = torch.from_numpy(self.nonterminal_ids)
        self.opening_columns = masks.opening[self.nonterminal_ids]
        self.column = {int(a): c for c, a in enumerate(self.nonterminal_ids)}
        self.types = types

    def score(self, sentences: Sequence[Sequence[str]]) -> list[SentenceScore]:
        return [self._result(words, *search) for words, search in zip(sentences, self._searches(sentences))]

    def final_trees(self, sentences: Sequence[Sequence[str]]) -> list[list[Tree]]:
        """Each sentence's complete trees at the end of the search (distinct, as the model reads trees: a
        ``TreeSource`` of model views, e.g. for the union with proposals, ``tree_marginal.UnionScorer``)."""
        return [[action_tree(h.tokens, h.types, h.word_index, words) for h in final]
                for words, (_, _, final) in zip(sentences, self._searches(sentences))]

    def _searches(self, sentences: Sequence[Sequence[str]]) -> list[Search]:
        """Each sentence's ``Search``, ``batch_size`` sentences of similar length searched together."""
        check_sentences(sentences)
        order = sorted(range(len(sentences)), key=lambda k: -len(sentences[k]))  # similar lengths together
        out: list[Search | None] = [None] * len(sentences)
        with _no_cyclic_gc():
            for lo in range(0, len(order), self.batch_size):
                batch = order[lo : lo + self.batch_size]
                for k, result in zip(batch, self._search([sentences[k] for k in batch])):
                    out[k] = result
        return out  # type: ignore[return-value]

    # -- the search ------------------------------------------------------------------------------------------
    def _search(self, sentences: Sequence[Sequence[str]]) -> list[Search]:
        model, vocab = self.model, self.model.vocab
        decoder = Decoder(model)
        pieces = [[model.terminals(w) for w in words] for words in sentences]
        piece_ids = [[vocab.ids(p, model.unknown_token).tolist() for p in ps] for ps in pieces]
        starts = [_Hypothesis((BOS,), (int(TokenType.SOS),), (-1,), 0.0, CCState(), decoder.start(), [])
                  for _ in sentences]
        self._feed(decoder, starts, [vocab.id(BOS)] * len(starts), [int(TokenType.SOS)] * len(starts))
        word_beams = [[h] for h in starts]
        prefixes = [np.empty(len(words)) for words in sentences]
        # corrected: the start's boundary mass, then each word's (module doc)
        corrected = [None if self.boundary is None else np.empty(len(words) + 1) for words in sentences]
        for s, h in enumerate(starts):
            if self.boundary is not None:
                corrected[s][0] = self._with_boundary([h])
        results: list[Search | None] = [None] * len(sentences)
        for i in range(max(len(words) for words in sentences)):
            active = [s for s, words in enumerate(sentences) if i < len(words)]
            completed = self._word(decoder, {s: word_beams[s] for s in active},
                                   {s: (pieces[s][i], piece_ids[s][i]) for s in active}, i)
            ending, going_on = [], []
            if self.boundary is not None:
                self._feed_pending(decoder, [h for s in active for h in completed[s]])
            for s in active:
                prefixes[s][i] = logsumexp([h.logprob for h in completed[s]])
                if self.boundary is not None:
                    corrected[s][i + 1] = self._with_boundary(completed[s])
                if i + 1 == len(sentences[s]):
                    ending.append(s)
                else:
                    word_beams[s] = sorted(completed[s], key=lambda h: -h.logprob)[: self.word_beam]
                    going_on.append(s)
            self._feed_pending(decoder, [h for s in going_on for h in word_beams[s]])
            finals = self._close(decoder, [completed[s] for s in ending])
            for s, final in zip(ending, finals):
                results[s] = (prefixes[s], corrected[s], final)
            decoder.compact([h for s in going_on for h in word_beams[s]])
        return results  # type: ignore[return-value]

    def _with_boundary(self, hypotheses: list[_Hypothesis]) -> float:
        """logsumexp over ``hypotheses`` (fed up to their last token) of log p(prefix) + log P(B | prefix)."""
        masses = _next_rows(hypotheses)[:, self.boundary].logsumexp(-1).double().cpu().numpy()
        return logsumexp(np.array([h.logprob for h in hypotheses]) + masses)

    def _word(self, decoder: Decoder, frontiers: dict[int, list[_Hypothesis]],
              words: dict[int, tuple[tuple[str, ...], list[int]]], i: int) -> dict[int, list[_Hypothesis]]:
        """Every hypothesis that generates word i from each sentence's frontier within ``max_actions``."""
        completed: dict[int, list[_Hypothesis]] = {s: [] for s in frontiers}
        for step in range(self.max_actions + 1):
            if not any(frontiers.values()):
                break
            candidates: dict[int, list[_Hypothesis | None]] = {}  # per frontier hypothesis: it + word i
            fresh: list[tuple[_Hypothesis, list[int]]] = []
            for s, frontier in frontiers.items():
                pieces, ids = words[s]
                candidates[s] = []
                for h in frontier:
                    word = None
                    if h.cc.open:  # inside the root: the word may come now
                        word = _Hypothesis(h.tokens + pieces, h.types + (int(TokenType.T),) * len(pieces),
                                           h.word_index + (i,) * len(pieces), h.logprob, h.cc.advance(
                                               TokenType.T, pieces[0]), h.state, h.rows, h.next,
                                           source=h.source)
                        fresh.append((word, ids))
                    candidates[s].append(word)
            self._read_word(decoder, fresh)
            last = step == self.max_actions
            selected = {s: self._select(frontier, candidates[s], last) for s, frontier in frontiers.items()}
            for s, (_, kept) in selected.items():
                completed[s] += kept
            if last:
                break
            frontiers = {s: children for s, (children, _) in selected.items()}
            self._feed_actions(decoder, [h for children in frontiers.values() for h in children])
        return completed

    def _read_word(self, decoder: Decoder, fresh: list[tuple[_Hypothesis, list[int]]]) -> None:
        """Add the word's log-prob (its pieces' ids given) to each new completion; the pieces before the
        last are fed now, the last one pends until the hypothesis needs it."""
        if fresh:
            first = _next_values([h for h, _ in fresh], [ids[0] for _, ids in fresh])
            for (h, _), value in zip(fresh, first):
                h.logprob += value
        for k in range(1, max((len(ids) for _, ids in fresh), default=0)):
            more = [(h, ids) for h, ids in fresh if len(ids) > k]
            self._feed(decoder, [h for h, _ in more], [ids[k - 1] for _, ids in more],
                       [int(TokenType.T)] * len(more))
            for h, ids in more:
                h.logprob += float(h.next[ids[k]])
        for h, ids in fresh:
            h.pending, h.next, h.source = ids[-1], None, None

    def _select(self, frontier: list[_Hypothesis], words: list[_Hypothesis | None], last: bool
                ) -> tuple[list[_Hypothesis], list[_Hypothesis]]:
        """One action step of one sentence: (the next frontier, not fed yet; the completions kept).

        ``fast_track=None``: every completion is kept and the best ``beam`` nonterminal extensions form the
        frontier. Otherwise (Stern et al. 2017) completions and nonterminal extensions compete for the
        ``beam`` places — the completions among the winners are kept — and the best ``fast_track``
        completions are kept whatever their rank. Ties: frontier order, a hypothesis's completion before its
        extensions, extensions in vocabulary order. At the last step only completions remain.
        """
        if not frontier:
            return [], []
        rows = _next_rows(frontier)
        scores = rows[:, self.nonterminal_index.to(rows.device)].double().cpu()
        scores += torch.tensor([h.logprob for h in frontier], dtype=torch.float64)[:, None]
        allowed = np.zeros(scores.shape, dtype=bool)
        if not last:
            allowed[:] = self.opening_columns
            for b, h in enumerate(frontier):
                if h.cc.can_close and len(h.cc.open) > 1:  # never the root while words remain
                    allowed[b, self.column[self.masks.closing_id(h.cc.open[-1])]] = True
        scores = scores.masked_fill(~torch.from_numpy(allowed), float("-inf"))
        if self.fast_track is None:
            kept = [w for w in words if w is not None]
            return self._children(frontier, scores, self.beam), kept
        word_scores = torch.tensor([float("-inf") if w is None else w.logprob for w in words],
                                   dtype=torch.float64)
        joint = torch.cat([word_scores[:, None], scores], dim=1)
        best = beams.best(joint.flatten(), self.beam)
        width = joint.shape[1]
        kept_rows = {index // width for index in best if index % width == 0}
        kept_rows.update(beams.best(word_scores, self.fast_track))
        extensions = [(index // width, index % width - 1) for index in best if index % width]
        return self._make_children(frontier, extensions, scores), [words[b] for b in sorted(kept_rows)]

    def _children(self, frontier: list[_Hypothesis], scores: torch.Tensor, count: int) -> list[_Hypothesis]:
        width = scores.shape[1]
        best = beams.best(scores.flatten(), count)
        return self._make_children(frontier, [divmod(index, width) for index in best], scores)

    def _make_children(self, frontier: list[_Hypothesis], extensions: list[tuple[int, int]],
                       scores: torch.Tensor) -> list[_Hypothesis]:
        """The hypotheses ``frontier[b]`` + nonterminal column c, for each (b, c), scored by ``scores``."""
        children = []
        for b, c in extensions:
            h, action = frontier[b], int(self.nonterminal_ids[c])
            token, ttype = self.model.vocab.tokens[action], int(self.types[action])
            children.append(_Hypothesis(h.tokens + (token,), h.types + (ttype,), h.word_index + (-1,),
                                        float(scores[b, c]), h.cc.advance(ttype, token), h.state, h.rows,
                                        pending=action))
        return children

    def _feed_actions(self, decoder: Decoder, children: list[_Hypothesis]) -> None:
        """Feed each new nonterminal, all in one step; a TG closing nonterminal is two tokens (COMPOSE CNT1,
        then CNT2), fed together, nothing predicted after the first (its keys and values suffice)."""
        if not children:
            return
        entries: list[tuple[_Hypothesis, int, int, bool]] = []  # hypothesis, token, type, predict
        for h in children:
            action, ttype = h.pending, int(self.types[h.pending])
            if ttype == TokenType.CNT and not decoder.causal:
                entries.append((h, action, int(TokenType.CNT), False))
                ttype = int(TokenType.CNT2)
            entries.append((h, action, ttype, True))
            h.pending = -1
        hypotheses, tokens, types, predict = (list(column) for column in zip(*entries))
        self._feed(decoder, hypotheses, tokens, types, predict)

    def _feed_pending(self, decoder: Decoder, hypotheses: list[_Hypothesis]) -> None:
        """Feed the pending last piece of each hypothesis's word (those with one: corrected word probabilities
        feed every completion's at once)."""
        hypotheses = [h for h in hypotheses if h.pending >= 0]
        if hypotheses:
            self._feed(decoder, hypotheses, [h.pending for h in hypotheses], [int(TokenType.T)] * len(hypotheses))
            for h in hypotheses:
                h.pending = -1

    @staticmethod
    def _feed(decoder: Decoder, hypotheses: list[_Hypothesis], tokens: list[int], types: list[int],
              predict: list[bool] | None = None) -> None:
        """``Decoder.feed`` for hypotheses (one may come several times in a row: its next tokens); each gets
        the distribution after its last token fed (None if not predicted)."""
        for h in hypotheses:
            h.own()
        logprobs = decoder.feed([h.state for h in hypotheses], [h.rows for h in hypotheses], tokens, types,
                                predict)
        k = 0
        for b, h in enumerate(hypotheses):
            if predict is None or predict[b]:
                h.next, h.source = logprobs[k], (logprobs, k)
                k += 1
            else:
                h.next, h.source = None, None

    def _close(self, decoder: Decoder, groups: list[list[_Hypothesis]]) -> list[list[_Hypothesis]]:
        """Each completed hypothesis with its open constituents closed (innermost first), all batched."""
        hypotheses = [h for group in groups for h in group]
        self._feed_pending(decoder, hypotheses)
        vocab = self.model.vocab
        closings = [[self.masks.closing_id(label) for label in reversed(h.cc.open)] for h in hypotheses]
        for k in range(max((len(c) for c in closings), default=0)):
            closing = [(h, c[k]) for h, c in zip(hypotheses, closings) if k < len(c)]
            values = _next_values([h for h, _ in closing], [a for _, a in closing])
            for (h, _), value in zip(closing, values):
                h.logprob += value
            more = [(h, c[k]) for h, c in zip(hypotheses, closings) if k + 1 < len(c)]
            for h, action in more:
                h.pending = action
            self._feed_actions(decoder, [h for h, _ in more])
        for h, c in zip(hypotheses, closings):
            tokens = tuple(vocab.tokens[a] for a in c)
            h.tokens, h.types = h.tokens + tokens, h.types + (int(TokenType.CNT),) * len(c)
            h.word_index = h.word_index + (-1,) * len(c)
        out, k = [], 0
        for group in groups:
            out.append(hypotheses[k : k + len(group)])
            k += len(group)
        return out

    def _result(self, words: Sequence[str], prefix: np.ndarray, corrected: np.ndarray | None,
                final: list[_Hypothesis]) -> SentenceScore:
        scores = [h.logprob for h in final]
        total = logsumexp(scores)
        best = final[int(np.argmax(scores))]
        word_logprobs = np.diff(prefix, prepend=0.0) if corrected is None else np.diff(corrected)
        return SentenceScore(
            words=tuple(words), word_logprobs=tuple(float(v) for v in word_logprobs),
            total=total, end_logprob=total - float(prefix[-1]),
            best_tree=to_bracketed(action_tree(best.tokens, best.types, best.word_index, words)),
            unknown_words=sum(self.model.is_unknown(w) for w in words),
            extra={"trees": len(final), "best_logprob": best.logprob},
        )
