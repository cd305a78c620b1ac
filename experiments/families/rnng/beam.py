"""Word-synchronous beam search over RNNG actions (Stern et al. 2017), as aistairc/rnng-pytorch's
``word_sync_beam_search`` runs it.

For each word (and once more for the end), the hypotheses are expanded by every valid action until enough
of them have completed the word: among the ``beam`` best successors of a step, those that generate the word
(``SHIFT``; after the last word, the ``REDUCE`` that closes the root) complete it and the others form the
next step's beam; besides them, up to ``fast_track`` completions beyond the ``beam`` best are kept when fewer
than ``fast_track`` are among them (the official ``shift_size``). A word is done when the beam is empty, the
completions fill their store (``min(2 beam, beam + 5 fast_track)``) or ``beam`` of them came in by rank; the
``word_beam`` best completions, their word generated, are the next word's beam. The prefix value after word
i is the logsumexp of that word beam (after pruning, as the official surprisals); the total is the logsumexp
of the finished parses, so ``end_logprob`` is the closing of the remaining constituents.

Valid actions are the official ones. Top-down: ``NT(X)`` first and only while fewer than ``max_open_nts``
constituents are open, fewer than ``max_cons_nts`` NTs came in a row, the action store (``max(100, 5n)``)
leaves room for the rest and the stack for two more elements; ``REDUCE`` not right after an ``NT``, not of
the root before the last word, and with a child on the stack; ``SHIFT`` while the stack has room; after the
last word only ``REDUCE``. In-order: ``valid_in_order``; the end is ``FINISH``. Scores use the action
distribution renormalised over the valid actions and the word distribution without ``<pad>``.
``batch_size`` sentences are searched together, as the official code does (their hypotheses share every
batched step; each sentence keeps its own beam, stack bound and stopping rule, so the numbers do not depend on
the batch); ties are broken by index order.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

from experiments.evaluate.scorer import Convention, SentenceScore, check_sentences
from experiments.evaluate.scorers import beams
from experiments.families.rnng.methods import BEAM
from experiments.families.rnng.scorers import RNNGModel
from lightning_modules.data.tree import Tree, to_bracketed
from lightning_modules.families.rnng.encoding import IN_ORDER, actions_tree
from lightning_modules.families.rnng.model import FixedStack


@dataclass
class Hypotheses:
    """Partial parses of one sentence: their stacks (one row each), scores and action histories."""

    stack: FixedStack
    score: Tensor  # log p of the actions and words so far, [H] float64
    consecutive_nts: Tensor  # NT actions in a row at the end, [H]
    previous: Tensor  # the last action (-1: none), [H]
    actions: list[tuple[int, ...]]
    sentence: Tensor  # the sentence of the batch each belongs to, [H]

    def __len__(self) -> int:
        return len(self.actions)

    def select(self, index: Tensor) -> Hypotheses:
        rows = index.tolist()
        return Hypotheses(self.stack.select(index), self.score[index], self.consecutive_nts[index],
                          self.previous[index], [self.actions[r] for r in rows], self.sentence[index])

    @staticmethod
    def concat(parts: Sequence[Hypotheses]) -> Hypotheses:
        return Hypotheses(FixedStack.concat([p.stack for p in parts]), torch.cat([p.score for p in parts]),
                          torch.cat([p.consecutive_nts for p in parts]), torch.cat([p.previous for p in parts]),
                          [a for p in parts for a in p.actions], torch.cat([p.sentence for p in parts]))


class RNNGBeamScorer:
    """log p(x) bounded by the word-synchronous beam's finished parses; per-word values from its word beams."""

    def __init__(self, model: RNNGModel, beam: int = BEAM.options["beam"], word_beam: int = BEAM.options["word_beam"],
                 fast_track: int = BEAM.options["fast_track"], batch_size: int = 8):
        beams.check_beam_settings(beam, word_beam, batch_size=batch_size, fast_track=fast_track)
        self.model, self.beam, self.word_beam, self.fast_track = model, beam, word_beam, fast_track
        self.batch_size = batch_size
        self.name = model.name
        self.in_order = model.actions.strategy == IN_ORDER
        self.convention = Convention(method="beam", bound=True, beam=beam, word_beam=word_beam,
                                     fast_track=fast_track, incremental="beam", end_of_sentence=True)

    def score(self, sentences: Sequence[Sequence[str]]) -> list[SentenceScore]:
        check_sentences(sentences)
        return [score for part in self.batches(sentences) for score, _ in part]

    def final_trees(self, sentences: Sequence[Sequence[str]]) -> list[list[Tree]]:
        """The finished parses of each sentence's beam, best first."""
        return [trees for part in self.batches(sentences) for _, trees in part]

    def batches(self, sentences: Sequence[Sequence[str]]) -> list[list[tuple[SentenceScore, list[Tree]]]]:
        return [self.search(sentences[i: i + self.batch_size]) for i in range(0, len(sentences), self.batch_size)]

    @torch.no_grad()
    def search(self, sentences: Sequence[Sequence[str]]) -> list[tuple[SentenceScore, list[Tree]]]:
        """The beam over a batch of sentences, advanced together (each pruned on its own)."""
        module, c = self.model.module, self.model.module.config
        device = next(module.parameters()).device
        lengths = torch.tensor([len(w) for w in sentences], device=device)
        width = int(lengths.max())
        ids = torch.tensor([self.model.words.encode(w) + [0] * (width - len(w)) for w in sentences], device=device)
        vectors = module.word_emb(ids)
        # the official stack bound, a multiple of 8, per sentence (the batch's stack holds the largest)
        limits = torch.tensor([math.ceil(max(c.stack_size, len(w) + 10) / 8) * 8 for w in sentences], device=device)
        max_actions = torch.clamp(5 * lengths, min=100)
        batch = len(sentences)
        h0, c0 = module.initial_state(batch)
        rows = torch.arange(batch, device=device)
        hyps = Hypotheses(FixedStack(h0, c0, int(limits.max()), c.w_dim), torch.zeros(batch, dtype=torch.float64,
                          device=device), torch.zeros_like(rows), torch.full_like(rows, -1), [()] * batch, rows)
        prefix = [[] for _ in sentences]
        finished: list[Hypotheses | None] = [None] * batch
        for pointer in range(width + 1):
            hyps = self.word(hyps, pointer, lengths, ids, vectors, limits, max_actions)
            for k in range(batch):
                if pointer <= len(sentences[k]):
                    mine = (hyps.sentence == k).nonzero().squeeze(1)
                    prefix[k].append(float(torch.logsumexp(hyps.score[mine], 0)) if len(mine) else -math.inf)
                    if pointer == len(sentences[k]):
                        finished[k] = hyps.select(mine)
            hyps = hyps.select((lengths[hyps.sentence] > pointer).nonzero().squeeze(1))
        return [self.result(words, prefix[k], finished[k]) for k, words in enumerate(sentences)]

    def result(self, words: Sequence[str], prefix: list[float], hyps: Hypotheses | None
               ) -> tuple[SentenceScore, list[Tree]]:
        """A sentence's score from its prefix values and finished parses."""
        n = len(words)
        order = [] if hyps is None else torch.sort(hyps.score, descending=True, stable=True).indices.tolist()
        trees = [actions_tree(self.model.actions.to_actions(hyps.actions[i]), words,
                              strategy=self.model.actions.strategy) for i in order]
        values = [prefix[i] - (prefix[i - 1] if i else 0.0) if math.isfinite(prefix[i]) else -math.inf
                  for i in range(n + 1)]
        score = SentenceScore(
            words=tuple(words), word_logprobs=tuple(values[:n]), total=prefix[n], end_logprob=values[n],
            best_tree=to_bracketed(trees[0]) if trees else None,
            unknown_words=sum(self.model.is_unknown(w) for w in words),
            extra={"trees": len(trees), "best_logprob": float(hyps.score[order[0]]) if trees else -math.inf})
        return score, trees

    def ranked(self, scores: Tensor, sentence: Tensor) -> tuple[Tensor, Tensor]:
        """Entries of a flat score table grouped by sentence, best first within each (ties: index order), and
        each one's rank within its sentence; -inf entries dropped."""
        order = torch.sort(scores, descending=True, stable=True).indices
        order = order[torch.isfinite(scores[order])]
        order = order[torch.sort(sentence[order], stable=True).indices]
        grouped = sentence[order]
        starts = torch.searchsorted(grouped, grouped, right=False)
        return order, torch.arange(len(order), device=order.device) - starts

    def word(self, hyps: Hypotheses, pointer: int, lengths: Tensor, ids: Tensor, vectors: Tensor, limits: Tensor,
             max_actions: Tensor) -> Hypotheses:
        """Expand ``hyps`` until word ``pointer`` (the end for a sentence of that length) is completed in every
        sentence (module doc); the word beams of all sentences."""
        batch = len(lengths)
        capacity = min(2 * self.beam, self.beam + 5 * self.fast_track)
        done: list[tuple[Hypotheses, Tensor]] = []
        completed = torch.zeros(batch, dtype=torch.long, device=lengths.device)
        forced = torch.zeros_like(completed)

        def going_on() -> Tensor:
            return (completed < capacity) & (completed - forced < self.beam)

        hyps = hyps.select(going_on()[hyps.sentence].nonzero().squeeze(1))
        while len(hyps):
            scores = self.successor_scores(hyps, pointer, lengths, ids, limits, max_actions)
            count = scores.size(1)
            flat = scores.reshape(-1)
            order, rank = self.ranked(flat, hyps.sentence.repeat_interleave(count))
            source, action = order // count, order % count
            sentence = hyps.sentence[source]
            at_end = lengths[sentence] == pointer
            if self.in_order:
                finishing = action == 3  # FINISH
            else:
                finishing = (action == 2) & (hyps.stack.n_open[source] == 1)
            ends = torch.where(at_end, finishing, action == 1)
            inside = rank < self.beam
            ending = ends & inside
            extra = (self.fast_track - torch.bincount(sentence[ending], minlength=batch)).clamp(min=0)
            outside = ends & ~inside
            outside_rank = torch.cumsum(outside.long(), 0) - 1
            first_outside = torch.zeros(batch + 1, dtype=torch.long, device=order.device)
            first_outside[1:] = torch.cumsum(torch.bincount(sentence[outside], minlength=batch), 0)
            outside &= (outside_rank - first_outside[sentence]) < extra[sentence]
            forced += torch.bincount(sentence[outside], minlength=batch)
            # kept in order: each sentence's completions by rank, then its forced ones, up to the store's size
            picked = torch.cat([ending.nonzero().squeeze(1), outside.nonzero().squeeze(1)])
            picked = picked[torch.sort(sentence[picked], stable=True).indices]
            grouped = sentence[picked]
            index = torch.arange(len(picked), device=order.device) - torch.searchsorted(grouped, grouped)
            picked = picked[completed[grouped] + index < capacity]
            if len(picked):
                part = hyps.select(source[picked])
                part.score = flat[order[picked]]
                done.append((part, action[picked]))
                completed += torch.bincount(sentence[picked], minlength=batch)
            going = (~ends & inside & going_on()[sentence]).nonzero().squeeze(1)
            hyps = self.apply(hyps.select(source[going]), action[going], flat[order[going]], vectors)
        if not done:
            return hyps
        pool = Hypotheses.concat([h for h, _ in done])
        actions = torch.cat([a for _, a in done])
        order, rank = self.ranked(pool.score, pool.sentence)
        keep = order[rank < self.word_beam]
        return self.apply(pool.select(keep), actions[keep], pool.score[keep], vectors)

    def apply(self, hyps: Hypotheses, actions: Tensor, scores: Tensor, vectors: Tensor) -> Hypotheses:
        """The hypotheses after one action each, with their new scores."""
        if not len(hyps):
            return hyps
        module = self.model.module
        module.advance(hyps.stack, actions, vectors[hyps.sentence])
        is_nt = actions >= module.config.nt_begin
        # in-order: a REDUCE right after an NT (a unary constituent) does not end a run of NTs (official)
        keeps = is_nt | (self.in_order & (actions == 2) & (hyps.previous >= module.config.nt_begin))
        consecutive = torch.where(keeps, hyps.consecutive_nts + is_nt.long(), 0)
        return Hypotheses(hyps.stack, scores, consecutive, actions,
                          [(*a, int(x)) for a, x in zip(hyps.actions, actions.tolist(), strict=True)], hyps.sentence)

    def successor_scores(self, hyps: Hypotheses, pointer: int, lengths: Tensor, ids: Tensor, limits: Tensor,
                         max_actions: Tensor) -> Tensor:
        """Score of every (hypothesis, action): its score + log p(action) (+ log p(word) for SHIFT), -inf where
        the action is not valid [H, A] float64."""
        action_logits, word_logits = self.model.module.top_logits(hyps.stack)
        sentence = hyps.sentence
        valid = self.valid_actions(hyps, lengths[sentence], limits[sentence], max_actions[sentence],
                                   action_logits.size(1))
        logp = action_logits.masked_fill(~valid, -math.inf).log_softmax(-1).double()
        logp = logp.masked_fill(torch.isnan(logp), -math.inf)  # no valid action at all
        words = (lengths[sentence] > pointer).nonzero().squeeze(1)
        if len(words):
            word_logits[:, 0] = -math.inf
            word_lp = word_logits[words].log_softmax(-1).gather(1, ids[sentence[words], pointer][:, None])
            logp[words, 1] += word_lp.squeeze(1).double()
        return logp + hyps.score[:, None]

    def valid_actions(self, hyps: Hypotheses, n: Tensor, limit: Tensor, max_actions: Tensor, count: int) -> Tensor:
        """[H, A]: which actions each hypothesis may take (module doc)."""
        c = self.model.module.config
        stack = hyps.stack
        opened, top = stack.n_open, stack.top
        steps = torch.tensor([len(a) for a in hyps.actions], device=top.device)
        kinds = torch.arange(count, device=top.device)
        is_nt, is_shift, is_reduce = kinds >= c.nt_begin, kinds == 1, kinds == 2
        if self.in_order:
            return self.valid_in_order(hyps, n, limit, max_actions, steps, kinds)
        reduce_ok = ~(((opened == 1) & (stack.pointer < n)) | (hyps.previous >= c.nt_begin) | (top < 2))
        nt_ok = ~((opened >= c.max_open_nts) | (hyps.consecutive_nts >= c.max_cons_nts)
                  | (max_actions - steps < n - stack.pointer + opened + 3) | (top >= limit - 2))
        shift_ok = top < limit - 1
        valid = (is_nt[None] & nt_ok[:, None]) | (is_shift[None] & shift_ok[:, None]) \
            | (is_reduce[None] & reduce_ok[:, None])
        valid &= ~((opened == 0)[:, None] & ~is_nt[None])  # nothing open: only NT
        valid &= ~((stack.pointer == n)[:, None] & ~is_reduce[None])  # all words generated: only REDUCE
        valid &= ~((stack.pointer == n) & (opened == 0))[:, None]  # finished
        return valid

    def valid_in_order(self, hyps: Hypotheses, n: Tensor, limit: Tensor, max_actions: Tensor, steps: Tensor,
                       kinds: Tensor) -> Tensor:
        """[H, A] for in-order actions (the official ``FixedStackInOrderRNNG`` rules, words only): ``REDUCE``
        with a constituent open, and before the last word only below the open/consecutive NT limits; ``NT(X)``
        over a finished element, not right after an NT, with room in the stack and the action store, and after
        the last word only below those limits; ``SHIFT`` before the last word, with room (two elements when
        nothing is open), and not while a finished element stands alone after the first word; ``FINISH`` after
        the last word with one finished element."""
        c = self.model.module.config
        stack = hyps.stack
        opened, top, pointer = stack.n_open, stack.top, stack.pointer
        at_limit = (opened > c.max_open_nts - 1) | (hyps.consecutive_nts > c.max_cons_nts - 1)
        reduce_ok = ~((opened == 0) | (at_limit & (pointer < n)))
        finish_ok = (pointer == n) & (opened == 0) & (top == 1)
        shift_ok = ~((pointer == n) | ((pointer > 0) & (opened == 0)) | ((opened == 0) & (top >= limit - 2))
                     | ((opened > 0) & (top >= limit - 1)))
        nt_ok = ~((hyps.previous >= c.nt_begin) | (top == 0) | (at_limit & (pointer == n)) | (top >= limit - 1)
                  | (max_actions - steps < n - pointer + opened + 4))
        valid = ((kinds >= c.nt_begin)[None] & nt_ok[:, None]) | ((kinds == 1)[None] & shift_ok[:, None]) \
            | ((kinds == 2)[None] & reduce_ok[:, None]) | ((kinds == 3)[None] & finish_ok[:, None])
        return valid & ~(hyps.previous == 3)[:, None]  # finished
