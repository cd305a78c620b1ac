"""The word-synchronous beam search of DTG and TXL (trans) on a key/value cache (DTG §4, Stern et al. 2017).

Word i is reached from the word beam by at most ``max_actions`` transitions between words. At each action
step every frontier hypothesis may generate word i (GEN with the word's id, forced) — it then joins the
*completed* set — or take one non-GEN transition its system allows there (``DTGState.check``, the §3.5
constraints; a transition that would end the sequence while words remain is never proposed, nor a transition
the checkpoint's vocabulary lacks, such as an arc-swift reach never seen in training). The best ``beam``
transition extensions over the whole frontier form the next frontier (ties: frontier order, then vocabulary
order). With ``fast_track`` K (DTG's setting: 0) completions compete with the extensions for the ``beam``
places and the best K completions are kept regardless (Stern et al.'s rule, as the TG beam's ``_select``).
Word i's prefix value is the logsumexp over the completed set, which is then pruned to the best
``word_beam``. After the last word the sequence must still be completed — unlike TG's forced closings, DTG's
remaining arcs are choices — so the search goes on over non-GEN transitions (the same action beam) until each
hypothesis may end, and ``</s>`` is scored; ``total`` is the logsumexp over those complete sequences, a lower
bound on log p(x) (every sequence the system allows counts, not only the oracle's).

Each token is fed once through ``TransformerXL.step`` into a ``KeyValuePool`` row; its query reads the rows of
its attend list: the STACK/COMPOSE units ``DTGState`` gives (keys, raw relative positions, COMPOSE flag, the
arc's head id added at arc tokens) for ``dtg``, every earlier position (linear relative positions) for
``txl-trans``. DTG is sentence level: a sentence whose sequence outgrows the checkpoint's segment is an error.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from experiments.evaluate.scorer import Convention, SentenceScore, check_sentences
from experiments.evaluate.scorers import beams
from lightning_modules.data.dependency import DepTree, to_conllu
from lightning_modules.errors import InputError
from lightning_modules.families.dtg import encoding as dtg
from lightning_modules.families.dtg.data import word_token
from lightning_modules.numeric import logsumexp


@dataclass(eq=False, slots=True)
class _Hypothesis:
    """A transition prefix: its system state, fed token ids and pool rows, log-prob, next distribution."""

    state: dtg.DTGState
    ids: list[int]
    rows: list[int]
    logprob: float
    next: torch.Tensor | None = None
    words: int = 0

    def child(self, logprob: float) -> _Hypothesis:
        return _Hypothesis(self.state.copy(), self.ids[:], self.rows[:], logprob, None, self.words)


class DTGBeamScorer:
    """Word-synchronous beam over a DTG / TXL (trans) checkpoint's transitions (module docstring)."""

    def __init__(self, model: object, beam: int = 100, word_beam: int = 10, max_actions: int = 15,
                 fast_track: int | None = None, batch_size: int = 8):
        beams.check_beam_settings(beam, word_beam, max_actions, batch_size, fast_track)
        self.model = model
        self.beam, self.word_beam, self.max_actions = beam, word_beam, max_actions
        self.fast_track, self.batch_size = fast_track, batch_size
        self.name = model.family  # type: ignore[attr-defined]
        self.causal = model.family == "txl-trans"  # type: ignore[attr-defined]
        self.arc_input = model.config["model"]["arc_input"]  # type: ignore[attr-defined]
        self.convention = Convention(method="beam", bound=True, beam=beam, word_beam=word_beam,
                                     max_actions=max_actions, fast_track=fast_track, incremental="beam",
                                     end_of_sentence=True)
        vocab = model.vocab  # type: ignore[attr-defined]
        system = model.system  # type: ignore[attr-defined]
        # the non-GEN transitions the vocabulary has, in vocabulary order
        self.transitions = [(vocab.id(tok), _transition(tok)) for tok in vocab.tokens
                            if _transition(tok) is not None and _in_system(_transition(tok), system)]
        self.columns = torch.tensor([i for i, _ in self.transitions], dtype=torch.long)
        self.eos = vocab.id(dtg.EOS)
        self.bos = vocab.id(dtg.BOS)
        self.network = model.module.network  # type: ignore[attr-defined]

    # -- feeding ---------------------------------------------------------------------------------------------
    @torch.no_grad()
    def _feed(self, pool: object, hyps: list[_Hypothesis], transitions: list[dtg.Transition | None],
              word_ids: list[int]) -> None:
        """Apply one transition per hypothesis (None: ``<s>``; GEN takes ``word_ids``), feed its tokens, and set
        each ``next`` to the distribution after them."""
        tokens: list[list[tuple[int, list[int], list[int], bool, int]]] = []
        for h, t, word in zip(hyps, transitions, word_ids):
            if t is None:
                made = [h.state.start()]
            else:
                made = h.state.apply(t)
            if self.causal:  # one undoubled token; every earlier position, linear relative positions
                p = len(h.ids)
                ident = self.bos if t is None else word if t.action == "gen" else self.model.vocab.id(t.token())
                tokens.append([(ident, list(range(p + 1)), [p - k for k in range(p + 1)], False, 0)])
                continue
            row = []
            for tok in made:
                ident = self.bos if t is None else word if t.action == "gen" else self.model.vocab.id(t.token())
                added = 0
                if tok.arc_head is not None:
                    head_id = h.ids[tok.arc_head]
                    if self.arc_input == "w":
                        ident = head_id
                    elif self.arc_input == "w+arc":
                        added = head_id
                row.append((ident, tok.keys, tok.relpos, tok.type in dtg.COMPOSE_TYPES, added))
            tokens.append(row)
        length = self.model.length  # type: ignore[attr-defined]
        for k in range(max(len(r) for r in tokens)):
            batch = [(h, r[k], k + 1 == len(r)) for h, r in zip(hyps, tokens) if k < len(r)]
            if any(len(h.ids) >= length for h, _, _ in batch):
                raise InputError(f"the sentence's transition sequence outgrows the model's segment of {length} "
                                 "tokens (DTG is sentence level)")
            self._step(pool, batch)

    def _step(self, pool: object, batch: list[tuple[_Hypothesis, tuple, bool]]) -> None:
        device = self.model.device  # type: ignore[attr-defined]
        new_rows = pool.allocate(len(batch))  # type: ignore[attr-defined]
        for (h, (ident, _, _, _, _), _), row in zip(batch, new_rows.tolist()):
            h.ids.append(ident)
            h.rows.append(row)
        width = max(len(keys) for _, (_, keys, _, _, _), _ in batch)
        key_rows = [[h.rows[k] for k in keys] + [-1] * (width - len(keys)) for h, (_, keys, _, _, _), _ in batch]
        relpos = [list(rel) + [0] * (width - len(rel)) for _, (_, _, rel, _, _), _ in batch]
        logits = self.network.step(
            torch.tensor([b[1][0] for b in batch], dtype=torch.long, device=device), pool, new_rows,
            torch.tensor(key_rows, dtype=torch.long, device=device),
            torch.tensor(relpos, dtype=torch.long, device=device),
            torch.tensor([b[1][3] for b in batch], device=device), self.rel_keys, True,
            torch.tensor([b[1][4] for b in batch], dtype=torch.long, device=device))
        logprobs = logits.float().log_softmax(-1).cpu()
        for k, (h, _, last) in enumerate(batch):
            if last:
                h.next = logprobs[k]

    # -- the search ------------------------------------------------------------------------------------------
    def score(self, sentences: Sequence[Sequence[str]]) -> list[SentenceScore]:
        check_sentences(sentences)
        with torch.no_grad():
            self.rel_keys = self.network.relative_key_tables()
        return [self._sentence(list(words)) for words in sentences]

    def _sentence(self, words: list[str]) -> SentenceScore:
        model = self.model
        ids = [model.vocab.id(word_token(model.words, w)) for w in words]  # type: ignore[attr-defined]
        pool = self.network.new_pool(1024)
        start = _Hypothesis(dtg.DTGState(model.system), [], [], 0.0)  # type: ignore[attr-defined]
        self._feed(pool, [start], [None], [0])
        word_beam, prefix = [start], np.empty(len(words))
        for i, ident in enumerate(ids):
            completed = self._word(pool, word_beam, ident, len(words) - i)
            if not completed:
                raise InputError(f"the beam found no hypothesis that generates word {i + 1}")
            prefix[i] = logsumexp([h.logprob for h in completed])
            word_beam = sorted(completed, key=lambda h: -h.logprob)[: self.word_beam]
        final = self._finish(pool, word_beam)
        if not final:
            raise InputError("the beam found no complete transition sequence")
        scores = [h.logprob for h in final]
        total = logsumexp(scores)
        best = final[int(np.argmax(scores))]
        heads = tuple(best.state.heads[w] for w in range(1, len(words) + 1))
        return SentenceScore(
            words=tuple(words), word_logprobs=tuple(float(v) for v in np.diff(prefix, prepend=0.0)),
            total=total, end_logprob=total - float(prefix[-1]),
            best_tree=to_conllu(DepTree(tuple(words), heads, ("dep",) * len(words))),
            unknown_words=sum(model.is_unknown(w) for w in words),  # type: ignore[attr-defined]
            extra={"trees": len(final), "best_logprob": best.logprob},
        )

    def _word(self, pool: object, frontier: list[_Hypothesis], word: int, remaining: int) -> list[_Hypothesis]:
        """Every hypothesis that generates ``word`` from the frontier within ``max_actions`` transitions
        (``remaining``: the words still to generate, this one included; none may end the sequence)."""
        completed: list[_Hypothesis] = []
        for step in range(self.max_actions + 1):
            if not frontier:
                break
            gens = [h.child(h.logprob + float(h.next[word])) if h.state.check(dtg.GEN) is None else None
                    for h in frontier]
            last = step == self.max_actions
            extensions, kept = self._select(frontier, gens, remaining, last)
            if kept:
                self._feed(pool, kept, [dtg.GEN] * len(kept), [word] * len(kept))
            completed += kept
            if last:
                break
            frontier = self._extend(pool, frontier, extensions)
        return completed

    def _finish(self, pool: object, frontier: list[_Hypothesis]) -> list[_Hypothesis]:
        """Complete each hypothesis after the last word: non-GEN transitions until it may end, then ``</s>``."""
        final: list[_Hypothesis] = []
        for _ in range(2 * max((h.state.words for h in frontier), default=0) + 2):
            if not frontier:
                break
            ending = [h for h in frontier if h.state.can_end()]
            for h in ending:
                h.logprob += float(h.next[self.eos])
            final += ending
            going_on = [h for h in frontier if not h.state.can_end()]
            if not going_on:
                break
            extensions, _ = self._select(going_on, [None] * len(going_on), 0, False)
            frontier = self._extend(pool, going_on, extensions)
        return final

    def _select(self, frontier: list[_Hypothesis], gens: list[_Hypothesis | None], remaining: int, last: bool
                ) -> tuple[list[tuple[int, int, float]], list[_Hypothesis]]:
        """(the transition extensions (hypothesis, transition column, score) kept, the completions kept)."""
        scores = torch.stack([h.next[self.columns] for h in frontier]).double()
        scores += torch.tensor([h.logprob for h in frontier], dtype=torch.float64)[:, None]
        allowed = torch.zeros(scores.shape, dtype=torch.bool)
        if not last:
            for b, h in enumerate(frontier):
                for c, (_, t) in enumerate(self.transitions):
                    allowed[b, c] = h.state.check(t) is None and not (remaining and _ends(h.state, t))
        scores = scores.masked_fill(~allowed, float("-inf"))
        if self.fast_track is None:
            return [(b, c, float(scores[b, c])) for b, c in self._best(scores, self.beam)], \
                [g for g in gens if g is not None]
        word_scores = torch.tensor([float("-inf") if g is None else g.logprob for g in gens], dtype=torch.float64)
        joint = torch.cat([word_scores[:, None], scores], dim=1)
        best = self._best(joint, self.beam)
        kept_rows = {b for b, c in best if c == 0}
        kept_rows.update(b for b, _ in self._best(word_scores[:, None], self.fast_track))
        return [(b, c - 1, float(scores[b, c - 1])) for b, c in best if c], [gens[b] for b in sorted(kept_rows)]

    @staticmethod
    def _best(scores: torch.Tensor, count: int) -> list[tuple[int, int]]:
        """(row, column) of the ``count`` best finite scores, best first (stable: ties keep index order)."""
        width = scores.shape[1]
        return [divmod(i, width) for i in beams.best(scores.flatten(), count)]

    def _extend(self, pool: object, frontier: list[_Hypothesis], extensions: list[tuple[int, int, float]]
                ) -> list[_Hypothesis]:
        children = [frontier[b].child(score) for b, _, score in extensions]
        if children:
            self._feed(pool, children, [self.transitions[c][1] for _, c, _ in extensions], [0] * len(children))
        return children


def _transition(token: str) -> dtg.Transition | None:
    """The non-GEN transition a vocabulary token stands for (``left_arc``, ``right_arc[2]``, ...), else None."""
    name, _, rest = token.partition("[")
    if name not in (dtg.LEFT_ARC, dtg.RIGHT_ARC, dtg.POP, dtg.POP_ROOT):
        return None
    return dtg.Transition(name, int(rest[:-1]) if rest else None)


def _in_system(t: dtg.Transition, system: str) -> bool:
    return dtg.DTGState(system).check(t) != f"{t.token()} is not a transition of arc-{system}"


def _ends(state: dtg.DTGState, t: dtg.Transition) -> bool:
    """Whether ``t`` would end the sequence (pop_root; eager's POP of the root)."""
    return t.action == dtg.POP_ROOT or (t.action == dtg.POP and state.stack == [0])
