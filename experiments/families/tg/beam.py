"""The word-synchronous beam search of TG and TXL (trees) on a key/value cache (Stern et al. 2017).

The search (which hypotheses it keeps, and every number it returns) is the one ``ReencodingBeamScorer``
defines in ``reference_beam.py``; this is how it runs fast. For word i, starting from the word beam, at each
action step every frontier hypothesis may generate word i (all its pieces, forced) — it then joins the
*completed* set — or take one nonterminal action that keeps the prefix a tree prefix (``cc_constraints``: open
any label, close the top constituent once it dominates a terminal, never the root while words remain); the
best ``beam`` nonterminal extensions over the whole frontier form the next frontier (ties: frontier order,
then vocabulary order). At most ``max_actions`` nonterminal actions separate two words. Word i's prefix value
is the logsumexp over the completed set, which is then pruned to the best ``word_beam`` (ties: completion
order). After the last word every completed hypothesis closes its open constituents (forced) and ``total`` is
the logsumexp over those complete trees — a lower bound on log p(x). Under ``word_prob="corrected"`` (pieces;
``tree_marginal``'s definition) word i's value is the difference of successive logsumexps over the completed
sets of ``log p(prefix) + log P(B | prefix)``, B every token that does not continue a word; every completion's
last piece is then fed to read P(B | ·), not only the word beam's.

**On the device.** The hypotheses of all sentences of a batch are rows of tensors (``hypotheses.Hypotheses``:
actions, constraint state, TG stack, memory, pool rows), grouped by sentence; the number of rows of each
sentence is the only thing the host keeps, and it follows from the settings (a frontier has ``beam``
children once its rows times the opening labels reach ``beam``; before that the allowed actions are counted).
An action step is: the completions' word log-probs gathered from their frontier rows' distributions (later
pieces fed, one batched step per piece), the constraint mask of the nonterminal columns built as tensor ops,
each sentence's best extensions by one stable sort of its padded score row, the children's rows selected
and fed in one ``TransformerXL.step`` (a TG closing nonterminal as its COMPOSE and STACK tokens in the same
step: how many close is the one value a step reads back on an accelerator; with ``fast_track`` also the
kept counts; on a CPU, where a read costs nothing, each feed also reads its widest attend list to trim the
keys). Between words the host reads the real widths (``tighten``) and the pool drops rows no hypothesis can
attend (``Decoder.compact``); at a sentence's end its rows become trees. A completion feeds its last
piece only if it survives the word beam (or must close the sentence, or ``corrected`` reads its boundary
mass).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import numpy as np
import torch
from torch import Tensor

from experiments.evaluate.scorer import Convention, SentenceScore, check_sentences
from experiments.evaluate.scorers import beams
from experiments.evaluate.word_prob import WORD_PROBS, check
from experiments.families.tg.hypotheses import Decoder, Hypotheses
from experiments.families.tg.methods import BEAM  # the method's defaults, the only ones
from experiments.families.tg.scorers import TGModel, action_tree
from lightning_modules.data.encodings.choe_charniak import BOS, TokenType
from lightning_modules.data.tree import Tree, to_bracketed
from lightning_modules.errors import InputError
from lightning_modules.families.tg.cc_constraints import ActionMasks

# one finished hypothesis: (tokens, types, word indices, log-prob)
Final = tuple[tuple[str, ...], tuple[int, ...], tuple[int, ...], float]
# a sentence's search: its prefix values, its corrected values (None: sum-pieces), its final hypotheses
Search = tuple[np.ndarray, np.ndarray | None, list[Final]]


def segments(counts: Sequence[int], device: torch.device | str) -> tuple[Tensor, Tensor]:
    """Rows of consecutive groups of ``counts`` rows as a padded [G, max] index (padding 0) and its mask."""
    width = max(max(counts, default=0), 1)
    columns = np.arange(width)
    valid = columns[None, :] < np.asarray(counts)[:, None]
    index = (np.cumsum(counts) - np.asarray(counts))[:, None] + columns[None, :]
    return (torch.from_numpy(np.where(valid, index, 0)).to(device),
            torch.from_numpy(valid).to(device))


def group_logsumexp(values: Tensor, counts: Sequence[int]) -> Tensor:
    """logsumexp of each group of consecutive ``values`` (``counts`` per group; -inf for an empty one)."""
    index, valid = segments(counts, values.device)
    return values[index].masked_fill(~valid, float("-inf")).logsumexp(-1)


def group_best(scores: Tensor, counts: Sequence[int], keep: Sequence[int] | None, k: int) -> tuple[Tensor, list[int]]:
    """The rows of each group's best ``k`` finite ``scores`` (groups of ``counts`` consecutive rows), best
    first, groups in order (ties: row order), and how many each group gives. ``keep``: those numbers when the
    host knows them (None: the finite scores are counted, a read from the device)."""
    index, valid = segments(counts, scores.device)
    padded = scores[index].masked_fill(~valid, float("-inf"))
    if keep is None:
        keep = [min(k, n) for n in torch.isfinite(padded).sum(-1).tolist()]
    order = torch.sort(padded, dim=-1, descending=True, stable=True).indices
    chosen = index.gather(1, order)
    width = chosen.shape[1]
    flat = np.concatenate([g * width + np.arange(n) for g, n in enumerate(keep)] + [np.zeros(0, dtype=np.int64)])
    return chosen.flatten()[torch.from_numpy(flat).to(scores.device)], list(keep)


def ranges(counts: Sequence[int], wanted: Sequence[bool]) -> np.ndarray:
    """Row indices of the groups (``counts`` consecutive rows each) where ``wanted``."""
    starts = np.cumsum(counts) - np.asarray(counts, dtype=np.int64)
    return np.concatenate([np.arange(s, s + n) for s, n, w in zip(starts, counts, wanted) if w]
                          + [np.zeros(0, dtype=np.int64)]).astype(np.int64)


class BeamScorer:
    """Word-synchronous beam search over the joint model's actions, on a key/value cache (module docstring).

    ``fast_track`` (default None: every completion is kept, the search above) switches to Stern et al.'s
    rule, in which completions compete with nonterminal extensions for the action beam and the best
    ``fast_track`` completions of each step are kept regardless (see ``select``). The defaults are the
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
        device = model.device
        self.boundary = None if boundary is None else torch.tensor(boundary, device=device)
        self.convention = Convention(method="beam", bound=True, beam=beam, word_beam=word_beam,
                                     max_actions=max_actions, fast_track=fast_track, incremental="beam",
                                     end_of_sentence=True, word_prob=word_prob)
        vocab = model.vocab
        masks = ActionMasks(vocab)
        self.masks = masks
        types = vocab.token_types(np.arange(len(vocab)))
        self.types = types
        nonterminals = np.flatnonzero(masks.opening | (types == TokenType.CNT))  # ascending
        self.nonterminal_ids = torch.from_numpy(nonterminals).to(device)
        self.opening_columns = torch.from_numpy(masks.opening[nonterminals]).to(device)
        self.openings = int(masks.opening.sum())
        column = np.full(len(vocab), -1)
        column[nonterminals] = np.arange(len(nonterminals))
        self.column = torch.from_numpy(column).to(device)  # vocabulary id -> nonterminal column
        self.column_closing = ~self.opening_columns
        closing = np.zeros(len(vocab), dtype=np.int64)
        for a in masks.opening_ids:
            closing[a] = masks.closing_id(vocab.tokens[a][1:])
        self.closing = torch.from_numpy(closing).to(device)  # opening id -> its closing id

    def score(self, sentences: Sequence[Sequence[str]]) -> list[SentenceScore]:
        return [self._result(words, *search) for words, search in zip(sentences, self._searches(sentences))]

    def final_trees(self, sentences: Sequence[Sequence[str]]) -> list[list[Tree]]:
        """Each sentence's complete trees at the end of the search (distinct, as the model reads trees: a
        ``TreeSource`` of model views, e.g. for the union with proposals, ``tree_marginal.UnionScorer``)."""
        return [[action_tree(tokens, types, index, words) for tokens, types, index, _ in final]
                for words, (_, _, final) in zip(sentences, self._searches(sentences))]

    def _searches(self, sentences: Sequence[Sequence[str]]) -> list[Search]:
        """Each sentence's ``Search``, ``batch_size`` sentences of similar length searched together."""
        check_sentences(sentences)
        order = sorted(range(len(sentences)), key=lambda k: -len(sentences[k]))  # similar lengths together
        out: list[Search | None] = [None] * len(sentences)
        for lo in range(0, len(order), self.batch_size):
            batch = order[lo : lo + self.batch_size]
            for k, result in zip(batch, self._search([sentences[k] for k in batch])):
                out[k] = result
        return out  # type: ignore[return-value]

    # -- the search ------------------------------------------------------------------------------------------
    def _search(self, sentences: Sequence[Sequence[str]]) -> list[Search]:
        model, vocab, device = self.model, self.model.vocab, self.model.device
        decoder = Decoder(model)
        count = len(sentences)
        pieces = [[vocab.ids(model.terminals(w), model.unknown_token).tolist() for w in words]
                  for words in sentences]
        beam = self._feed_pending(decoder, Hypotheses.start(count, vocab.id(BOS), device))
        sizes, active = [1] * count, list(range(count))  # the word beam's rows per active sentence
        longest = max(len(words) for words in sentences)
        prefixes = torch.zeros((count, longest), dtype=torch.float64, device=device)
        corrected = None
        if self.boundary is not None:  # the start's boundary mass, then each word's (module doc)
            corrected = torch.zeros((count, longest + 1), dtype=torch.float64, device=device)
            corrected[:, 0] = self._with_boundary(beam, sizes)
        results: list[Search | None] = [None] * count
        for i in range(longest):
            word = [pieces[s][i] for s in active]
            completed, done = self._word(decoder, beam, sizes, word, i)
            rows = torch.tensor(active, device=device)
            prefixes[rows, i] = group_logsumexp(completed.logprob, done)
            if corrected is not None:
                completed = self._feed_pending(decoder, completed)
                corrected[rows, i + 1] = self._with_boundary(completed, done)
            ending = [i + 1 == len(sentences[s]) for s in active]
            going = [s for s, e in zip(active, ending) if not e]
            index, sizes = group_best(completed.logprob, done,
                                      [0 if e else min(self.word_beam, n) for n, e in zip(done, ending)],
                                      self.word_beam)
            sizes = [n for n, e in zip(sizes, ending) if not e]
            if any(ending):
                closing = [n for n, e in zip(done, ending) if e]
                final = completed.select(torch.from_numpy(ranges(done, ending)).to(device),
                                         keep_next=corrected is not None)
                ended = [s for s, e in zip(active, ending) if e]
                finals = self._close(decoder, final, closing, [sentences[s] for s in ended])
                host_prefix = prefixes[torch.tensor(ended, device=device)].cpu().numpy()
                host_corrected = None if corrected is None else corrected[torch.tensor(ended)].cpu().numpy()
                for k, s in enumerate(ended):
                    results[s] = (host_prefix[k, : len(sentences[s])],
                                  None if host_corrected is None else host_corrected[k, : len(sentences[s]) + 1],
                                  finals[k])
            if going:
                beam = completed.select(index, keep_next=corrected is not None)
                if corrected is None:
                    beam = self._feed_pending(decoder, beam)
                beam.tighten()
                decoder.compact(beam)
            active = going
        return results  # type: ignore[return-value]

    def _with_boundary(self, h: Hypotheses, counts: Sequence[int]) -> Tensor:
        """Per group: logsumexp of log p(prefix) + log P(B | prefix) (rows fed up to their last token)."""
        return group_logsumexp(h.logprob + h.next[:, self.boundary].logsumexp(-1).double(), counts)

    def _word(self, decoder: Decoder, frontier: Hypotheses, sizes: list[int], word: list[list[int]], i: int
              ) -> tuple[Hypotheses, list[int]]:
        """Every hypothesis that generates word i (``word``: each group's piece ids) from each group's frontier
        within ``max_actions``: the completions grouped by sentence (completion order), and their counts."""
        device = self.model.device
        steps: list[tuple[Hypotheses, list[int]]] = []
        for step in range(self.max_actions + 1):
            if not sum(sizes):
                break
            last = step == self.max_actions
            words = None
            if i or step:  # inside the root (only the start, before word 0, is not): the word may come now
                words = self._complete(decoder, frontier, sizes, word, i)
            children, kept, sizes = self.select(frontier, sizes, words, last)
            if kept is not None:
                steps.append(kept)
            if last:
                break
            frontier = self._feed_actions(decoder, children)
        if not steps:
            return frontier.select(frontier.sentence[:0]), [0] * len(sizes)
        tables = Hypotheses.cat([table for table, _ in steps])
        counts = np.array([c for _, c in steps])  # [steps, groups]
        offsets = np.concatenate([[0], np.cumsum(counts.sum(1))[:-1]])
        starts = offsets[:, None] + np.cumsum(counts, 1) - counts
        order = np.concatenate([np.arange(starts[t, g], starts[t, g] + counts[t, g])
                                for g in range(counts.shape[1]) for t in range(counts.shape[0])]
                               + [np.zeros(0, dtype=np.int64)])
        return tables.select(torch.from_numpy(order.astype(np.int64)).to(device)), counts.sum(0).tolist()

    def _complete(self, decoder: Decoder, frontier: Hypotheses, sizes: list[int], word: list[list[int]],
                  i: int) -> Hypotheses:
        """Each frontier row followed by its group's word: its pieces' log-prob added, all but the last fed
        (the last pends), the ``cc`` state advanced."""
        device = self.model.device
        longest = max(len(p) for p in word)
        ids = torch.tensor([p + [p[-1]] * (longest - len(p)) for p in word], device=device)
        ids = ids[torch.from_numpy(np.repeat(np.arange(len(sizes)), sizes)).to(device)]  # [H, longest]
        if longest == 1:  # nothing fed: the frontier's fields are shared, and replaced where they change
            out = replace(frontier, next=None).grown(1)
        else:
            out = frontier.select(torch.arange(len(frontier), device=device)).grown(longest)
        out.logprob = out.logprob + frontier.next.gather(1, ids[:, :1])[:, 0].double()
        out.append(None, ids[:, 0], torch.full_like(ids[:, 0], i))
        for k in range(1, longest):
            rows = torch.from_numpy(ranges(sizes, [len(p) > k for p in word])).to(device)
            logprobs = decoder.feed(out, rows, ids[rows, k - 1], self._terminal(rows))
            out.logprob[rows] += logprobs.gather(1, ids[rows, k : k + 1])[:, 0].double()
            out.append(rows, ids[rows, k], torch.full_like(rows, i))
        last = torch.tensor([len(p) - 1 for p in word], device=device)[
            torch.from_numpy(np.repeat(np.arange(len(sizes)), sizes)).to(device)]
        out.pending = ids.gather(1, last[:, None])[:, 0]
        out.cc_empty = torch.zeros_like(out.cc_empty)
        return out

    def select(self, frontier: Hypotheses, sizes: list[int], words: Hypotheses | None, last: bool
               ) -> tuple[Hypotheses, tuple[Hypotheses, list[int]] | None, list[int]]:
        """One action step of each group (sentence): (the next frontier, not fed; the completions kept and
        their counts, None without completions; the next frontier's counts).

        ``fast_track=None``: every completion is kept and the best ``beam`` nonterminal extensions form the
        frontier. Otherwise (Stern et al. 2017) completions and nonterminal extensions compete for the
        ``beam`` places — the completions among the winners are kept — and the best ``fast_track``
        completions are kept whatever their rank. Ties: frontier order, a hypothesis's completion before its
        extensions, extensions in vocabulary order. At the last step only completions remain.
        """
        device = self.model.device
        columns = len(self.nonterminal_ids)
        scores = frontier.next[:, self.nonterminal_ids].double() + frontier.logprob[:, None]
        top = frontier.cc_close.gather(1, (frontier.cc_open - 1).clamp(min=0)[:, None])[:, 0]
        closable = (frontier.cc_empty == 0) & (frontier.cc_open > 1)  # never the root while words remain
        allowed = self.opening_columns[None, :] & torch.ones_like(closable)[:, None]
        allowed = allowed | ((torch.arange(columns, device=device) == self.column[top][:, None])
                             & closable[:, None])
        scores = scores.masked_fill(~allowed | last, float("-inf"))
        if self.fast_track is None:
            keep = None
            if last:
                keep = [0] * len(sizes)
            elif all(n == 0 or n * self.openings >= self.beam for n in sizes):
                keep = [min(self.beam, n * columns) for n in sizes]
            best, counts = group_best(scores.flatten(), [n * columns for n in sizes], keep, self.beam)
            kept = None if words is None else (words, list(sizes))
            parents, chosen = best // columns, best % columns
        else:
            word_scores = (torch.full_like(frontier.logprob, float("-inf")) if words is None
                           else words.logprob)
            width = columns + 1
            joint = torch.cat([word_scores[:, None], scores], dim=1)
            best, _ = group_best(joint.flatten(), [n * width for n in sizes], None, self.beam)
            group = torch.from_numpy(np.repeat(np.arange(len(sizes)), sizes)).to(device)
            winners = torch.zeros(len(frontier), dtype=torch.bool, device=device)
            winners[best[best % width == 0] // width] = True
            winners[group_best(word_scores, sizes, None, self.fast_track)[0]] = True
            kept_counts = torch.zeros(len(sizes), dtype=torch.long, device=device).index_add_(
                0, group, winners.long()).tolist()
            kept = None if words is None else (words.select(winners.nonzero()[:, 0]), kept_counts)
            best = best[best % width != 0]
            parents, chosen = best // width, best % width - 1
            counts = torch.zeros(len(sizes), dtype=torch.long, device=device).index_add_(
                0, group[parents], torch.ones_like(parents)).tolist()
        return self._extend(frontier, parents, chosen, scores[parents, chosen]), kept, counts

    def _extend(self, frontier: Hypotheses, parents: Tensor, chosen: Tensor, values: Tensor) -> Hypotheses:
        """The rows ``frontier[parents]`` + nonterminal column ``chosen``, scored ``values`` (not fed)."""
        out = frontier.select(parents).grown(2)
        out.logprob = values
        action = self.nonterminal_ids[chosen]
        out.append(None, action, torch.full_like(action, -1))
        opening = self.opening_columns[chosen]
        slot = out.cc_open[:, None]
        out.cc_close = out.cc_close.scatter(1, slot, torch.where(opening[:, None], self.closing[action][:, None],
                                                                 out.cc_close.gather(1, slot)))
        out.cc_open += torch.where(opening, 1, -1)
        out.cc_empty = torch.where(opening, out.cc_empty + 1, 0)
        out.pending = action
        return out

    def _terminal(self, rows: Tensor) -> Tensor:
        """The type of a terminal piece, for each of ``rows``."""
        return torch.full_like(rows, int(TokenType.T))

    def _feed_pending(self, decoder: Decoder, h: Hypotheses) -> Hypotheses:
        """Every row fed its pending token (``<s>`` or its word's last piece): the rows with ``next``."""
        h = h.grown(1)
        rows = torch.arange(len(h), device=h.sentence.device)
        h.next = decoder.feed(h, None, h.pending, self._terminal(rows))  # at position 0: SOS
        h.pending = torch.full_like(h.pending, -1)
        return h

    def _feed_actions(self, decoder: Decoder, h: Hypotheses) -> Hypotheses:
        """Every row fed its new nonterminal (pending), all in one step; a TG closing nonterminal is two
        tokens (COMPOSE CNT1, then CNT2), fed together, nothing predicted after the first."""
        if not len(h):
            return h
        twice = None if decoder.causal else self.column_closing[self.column[h.pending]]
        h.next = decoder.feed(h, None, h.pending, None, twice)
        h.pending = torch.full_like(h.pending, -1)
        return h

    def _close(self, decoder: Decoder, final: Hypotheses, counts: list[int],
               sentences: list[Sequence[str]]) -> list[list[Final]]:
        """Each completed hypothesis with its open constituents closed (innermost first), all batched; each
        group's finished hypotheses."""
        if self.boundary is None:
            final = self._feed_pending(decoder, final)
        for _ in range(int(final.cc_open.max()) if len(final) else 0):
            rows = (final.cc_open > 0).nonzero()[:, 0]
            top = final.cc_close[rows].gather(1, (final.cc_open[rows] - 1)[:, None])[:, 0]
            final.logprob[rows] += final.next[rows].gather(1, top[:, None])[:, 0].double()
            final = final.grown(2)
            final.append(rows, top, torch.full_like(rows, -1))
            final.cc_open[rows] -= 1
            more = final.cc_open[rows] > 0
            if bool(more.any()):
                index = rows[more]
                twice = None if decoder.causal else torch.ones_like(index, dtype=torch.bool)
                final.next[index] = decoder.feed(final, index, top[more], None, twice)
        vocab = self.model.vocab
        actions, words = final.actions.tolist(), final.words.tolist()
        lengths, logprobs = final.n_actions.tolist(), final.logprob.tolist()
        out, k = [], 0
        for n in counts:
            group = []
            for r in range(k, k + n):
                ids, index = actions[r][: lengths[r]], tuple(words[r][: lengths[r]])
                types = tuple(int(TokenType.SOS) if j == 0 else int(TokenType.T) if w >= 0 else int(self.types[a])
                              for j, (a, w) in enumerate(zip(ids, index)))
                group.append((tuple(vocab.tokens[a] for a in ids), types, index, logprobs[r]))
            out.append(group)
            k += n
        return out

    def _result(self, words: Sequence[str], prefix: np.ndarray, corrected: np.ndarray | None,
                final: list[Final]) -> SentenceScore:
        scores = [logprob for *_, logprob in final]
        total = float(torch.tensor(scores, dtype=torch.float64).logsumexp(0))
        tokens, types, index, best_logprob = final[int(np.argmax(scores))]
        word_logprobs = np.diff(prefix, prepend=0.0) if corrected is None else np.diff(corrected)
        return SentenceScore(
            words=tuple(words), word_logprobs=tuple(float(v) for v in word_logprobs),
            total=total, end_logprob=total - float(prefix[-1]),
            best_tree=to_bracketed(action_tree(tokens, types, index, words)),
            unknown_words=sum(self.model.is_unknown(w) for w in words),
            extra={"trees": len(final), "best_logprob": best_logprob},
        )
