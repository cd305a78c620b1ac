"""The word-synchronous beam search of DTG and TXL (trans), as the official code runs it (``word_sync_beam_search``
of ``beam_search_standard.py`` / ``beam_search_txl.py``, zhaoyd1/Dep_Transformer_Grammars), on a key/value cache.

**Token steps.** Word i is reached from the word beam by a group of at most ``max_actions`` *token steps* (the
official ``max_action_length_per_step``, 15). At each step every hypothesis that is free to choose either
generates the word (GEN, forced to the word's id) or takes one transition its system allows there
(``DTGState.check``, the §3.5 constraints: between words the official mask ``action_count <= word_count - 2``
for arc-standard; never a transition that ends the sequence while words remain, nor one the checkpoint's
vocabulary lacks, such as an arc-swift reach never seen in training). A transition spends its tokens: a DTG arc
two (its forced duplicate takes the next step, with log-prob 0), every other transition, and every txl-trans
transition, one. The word is a token too, so an arc-standard DTG takes at most 7 arcs between two words (the
word is at most the 15th token) and a txl-trans at most 14 transitions.

**Re-ranking.** A hypothesis that has generated the word keeps its place in the beam and competes again at every
later step: the ``beam`` best of (those hypotheses with their score; the new completions; the new transition
extensions; hypotheses halfway through an arc, unchanged) are kept (ties: beam order, then vocabulary order,
completion last). After the last step the hypotheses that have not generated the word are dropped (they held
their places at that step all the same, as in the official loop). ``fast_track`` K is the official
``shift_size``: the K best candidates that generate the word (completions and hypotheses that already did) are
kept whatever their rank and the best beam - K of the other candidates fill the rest; K = 0, the official
setting, is a plain top-``beam``. Word i's prefix value is the logsumexp over the beam after its group, which is
then pruned to the hypotheses at least as good as the ``word_beam``-th best (the official threshold: ties kept).

**No hypothesis generates the word.** As in the official loop, word i's prefix value is then -inf, no hypothesis
survives, and every later prefix value and the total are -inf: word i and every later word get log-prob -inf
(surprisal +inf; the official difference of two -inf prefixes is undefined: the beam offers the later words no
probability), ``extra["unreached_words"]`` counts them. Results write them ``null``
(``experiments/evaluate/infinite.py``).

**SentencePiece pieces** (``data.terminals: sentencepiece``). The official loop runs a group per piece and
selects a piece that begins no word with ``shift_size`` = the beam: only the piece itself is ever taken, by
every hypothesis. So here a word's group targets its first piece (GEN); its later pieces are forced, each
followed by the word beam (and the arc-standard mask counts words, not pieces). A word's prefix value is the
logsumexp at its last piece, before that piece's word beam. Under ``word_prob="corrected"`` (``tree_marginal``'s
definition, Pimentel & Meister 2024) it is the logsumexp there of ``log p(prefix) + log P(B | prefix)``, B every
token that does not continue a word (pieces that begin one, transitions, ``</s>``): the last piece is then fed
to every hypothesis before the word beam, not only to its survivors; D_-1 is log P(B | ``<s>``) and word i's
value D_i - D_{i-1}.

**The end.** The official sentence ends with the terminals ``pop_root`` and ``</s>``, each reached by a group of
its own (and the word beam after it). So here: after the last word, the transition that ends the sequence
(arc-standard's ``pop_root``, arc-eager's POP of the root) is the target of a group, then ``</s>`` of another;
arc-swift, which has no ending transition, has only the ``</s>`` group (``</s>`` once every word is attached).
When arc-standard's ``pop_root`` may come is the ``pop_root`` setting (``encoding.POP_ROOT_RULES``):
``official`` (the default), the official mask's, on any stack with a word, composing the top two units, and
arcs after it in the ``</s>`` group (each group ``max_actions`` token steps, so up to 2 x 7 arcs after the last
word), where ``</s>`` may also leave words unattached; ``single-word``, on a one-word stack only, nothing after
it but ``</s>``, every hypothesis a complete tree, and the groups after the last word ``2 * max_actions - 1``
token steps (the same 14 arcs, all before ``pop_root``). ``total`` is the logsumexp over the final beam, a
lower bound on log p(x); -inf (``trees`` 0, no best tree) when no hypothesis completes within those steps (the
prefix values stand). The best tree is the best final hypothesis that attaches every word (None if none does).

Each token is fed once through ``TransformerXL.step`` into a ``KeyValuePool`` row; its query reads the rows of
its attend list: the STACK/COMPOSE units ``DTGState`` gives (keys, raw relative positions, COMPOSE flag, the
arc's head id added at arc tokens) for ``dtg``, every earlier position (linear relative positions) for
``txl-trans``. A word's GEN token is fed after the word beam, for the survivors only. DTG is sentence level: a
sentence whose sequence outgrows the checkpoint's segment is an error. ``reference_beam.py`` is a step-by-step
port of the official loop without a cache; the tests hold this search equal to it.
"""

from __future__ import annotations

from collections.abc import Generator, Sequence
from dataclasses import dataclass
from typing import TypeVar

import numpy as np
import torch

from experiments.evaluate.scorer import Convention, SentenceScore, check_sentences
from experiments.evaluate.scorers import beams
from experiments.evaluate.word_prob import WORD_PROBS, check
from lightning_modules.data.dependency import DepTree, to_conllu
from lightning_modules.errors import InputError
from lightning_modules.families.dtg import data as dtg_data
from lightning_modules.families.dtg import encoding as dtg
from lightning_modules.numeric import logsumexp

END, EOS = -1, -2  # the targets of the groups after the last word (word targets are vocabulary ids, >= 0)
Record = tuple[int, list[int], list[int], bool, int]  # a token: id, attend keys, relpos, COMPOSE, added id
T = TypeVar("T")


@dataclass(eq=False, slots=True)
class _Hypothesis:
    """A transition prefix: its system state, fed token ids and pool rows, log-prob and next distribution; in
    a group, the tokens it has spent and whether it has reached the target (``pending``: the target's
    transition, fed after the word beam)."""

    state: dtg.DTGState
    ids: list[int]
    rows: list[int]
    logprob: float
    next: torch.Tensor | None = None
    spent: int = 0
    done: bool = False
    pending: dtg.Transition | None = None

    def child(self, logprob: float) -> _Hypothesis:
        return _Hypothesis(self.state.copy(), self.ids[:], self.rows[:], logprob)


Feed = tuple[_Hypothesis, Record, bool]  # a token to feed to a hypothesis; whether it is the last of its feed
# a search, or a part of one, as a generator: it yields each token step (its hypotheses' next tokens) for the
# caller to run, together with other searches' (``DTGBeamScorer._together``), and returns its result
Steps = Generator[list[Feed], None, T]


class DTGBeamScorer:
    """Word-synchronous beam over a DTG / TXL (trans) checkpoint's transitions (module docstring). The search
    settings have no defaults here: the ``beam`` method of the family adapter declares them; ``pop_root`` is the
    official rule unless given (``POP_ROOT_RULES[0]``, as the port's)."""

    def __init__(self, model: object, beam: int, word_beam: int, max_actions: int, fast_track: int,
                 batch_size: int = 8, pop_root: str = dtg.POP_ROOT_RULES[0], word_prob: str = WORD_PROBS[0]):
        beams.check_beam_settings(beam, word_beam, max_actions, batch_size, fast_track)
        if fast_track > beam:
            raise InputError(f"must be at most the beam ({beam})", "fast_track")
        if pop_root not in dtg.POP_ROOT_RULES:
            raise InputError(f"must be one of {', '.join(dtg.POP_ROOT_RULES)} (got {pop_root!r})", "pop_root")
        self.model = model
        self.beam, self.word_beam, self.max_actions = beam, word_beam, max_actions
        self.fast_track, self.batch_size, self.pop_root = fast_track, batch_size, pop_root
        self.name = model.family  # type: ignore[attr-defined]
        self.causal = model.family == "txl-trans"  # type: ignore[attr-defined]
        corrected = check(word_prob) != WORD_PROBS[0]
        boundary = model.word_boundary_ids() if corrected else None  # type: ignore[attr-defined]
        if corrected and boundary is None:
            raise InputError(f"a vocabulary of words has one token per word: --word-prob {word_prob} needs "
                             "SentencePiece terminals", "--word-prob")
        self.boundary = None if boundary is None else torch.tensor(boundary)
        self.convention = Convention(method="beam", bound=True, beam=beam, word_beam=word_beam,
                                     max_actions=max_actions, fast_track=fast_track, incremental="beam",
                                     end_of_sentence=True, word_prob=word_prob)
        self.transitions = vocabulary_transitions(model)
        self.eos = model.vocab.id(dtg.EOS)  # type: ignore[attr-defined]
        self.network = model.module.network  # type: ignore[attr-defined]

    # -- feeding ---------------------------------------------------------------------------------------------
    def _feed(self, hyps: list[_Hypothesis], transitions: list[dtg.Transition | None], word: Sequence[int]
              ) -> Steps[None]:
        """Apply one transition per hypothesis (None: ``<s>``; GEN generates ``word``'s pieces), feed its
        tokens, and set each ``next`` to the distribution after them."""
        yield from self._feed_records(hyps, [token_records(self.model, h.ids, h.state, t, word)
                                             for h, t in zip(hyps, transitions)])

    def _feed_records(self, hyps: list[_Hypothesis], tokens: list[list[Record]]) -> Steps[None]:
        """Feed each hypothesis its token records in order (one token step each, run by ``_together``); its
        ``next`` is the distribution after the last."""
        length = self.model.length  # type: ignore[attr-defined]
        for k in range(max((len(r) for r in tokens), default=0)):
            batch = [(h, r[k], k + 1 == len(r)) for h, r in zip(hyps, tokens) if k < len(r)]
            if any(len(h.ids) >= length for h, _, _ in batch):
                raise InputError(f"the sentence's transition sequence outgrows the model's segment of {length} "
                                 "tokens (DTG is sentence level)")
            yield batch

    def _step(self, pool: object, batch: list[Feed]) -> None:
        """One network step over the tokens of ``batch`` (any sentences' hypotheses), their keys and values
        written to ``pool``."""
        device = self.model.device  # type: ignore[attr-defined]
        new_rows = pool.allocate(len(batch))  # type: ignore[attr-defined]
        for (h, record, _), row in zip(batch, new_rows.tolist()):
            h.ids.append(record[0])
            h.rows.append(row)
        width = max(len(r[1]) for _, r, _ in batch)
        key_rows = [[h.rows[k] for k in r[1]] + [-1] * (width - len(r[1])) for h, r, _ in batch]
        relpos = [list(r[2]) + [0] * (width - len(r[2])) for _, r, _ in batch]
        logits = self.network.step(
            torch.tensor([r[0] for _, r, _ in batch], dtype=torch.long, device=device), pool, new_rows,
            torch.tensor(key_rows, dtype=torch.long, device=device),
            torch.tensor(relpos, dtype=torch.long, device=device),
            torch.tensor([r[3] for _, r, _ in batch], device=device), self.step_params, True,
            torch.tensor([r[4] for _, r, _ in batch], dtype=torch.long, device=device))
        logprobs = logits.float().log_softmax(-1).cpu()
        for k, (h, _, last) in enumerate(batch):
            if last:
                h.next = logprobs[k]

    # -- the search ------------------------------------------------------------------------------------------
    def score(self, sentences: Sequence[Sequence[str]]) -> list[SentenceScore]:
        """Each sentence's search; ``batch_size`` sentences of similar length advance together."""
        check_sentences(sentences)
        with torch.no_grad():
            self.step_params = self.network.step_parameters()
        order = sorted(range(len(sentences)), key=lambda k: -len(sentences[k]))
        out: list[SentenceScore | None] = [None] * len(sentences)
        for lo in range(0, len(order), self.batch_size):
            batch = order[lo : lo + self.batch_size]
            for k, score in zip(batch, self._together([list(sentences[k]) for k in batch])):
                out[k] = score
        return out  # type: ignore[return-value]

    @torch.no_grad()
    def _together(self, sentences: list[list[str]]) -> list[SentenceScore]:
        """The sentences' searches in lockstep on one key/value pool: each search (``_sentence``) yields its next
        token step, and one network step feeds every waiting search's tokens; a search that ends leaves."""
        pool = self.network.new_pool(1024)
        searches = [self._sentence(words) for words in sentences]
        results: list[SentenceScore | None] = [None] * len(searches)
        waiting: dict[int, list[Feed]] = {}

        def resume(s: int) -> None:
            try:
                waiting[s] = next(searches[s])
            except StopIteration as done:
                results[s] = done.value
                waiting.pop(s, None)

        for s in range(len(searches)):
            resume(s)
        while waiting:
            self._step(pool, [entry for batch in waiting.values() for entry in batch])
            for s in list(waiting):
                resume(s)
        return results  # type: ignore[return-value]

    @torch.no_grad()
    def _run(self, pool: object, steps: Steps[T]) -> T:
        """Run one search, or a part of one, alone on ``pool``; its result."""
        try:
            while True:
                self._step(pool, next(steps))
        except StopIteration as done:
            return done.value

    def _sentence(self, words: list[str]) -> Steps[SentenceScore]:
        model = self.model
        pieces = word_pieces(model, words)
        start = _Hypothesis(dtg.DTGState(model.system, self.pop_root), [], [], 0.0)  # type: ignore[attr-defined]
        yield from self._feed([start], [None], ())
        beam, prefix = [start], np.full(len(words), -np.inf)
        corrected = None if self.boundary is None else np.full(len(words) + 1, -np.inf)  # D_-1 .. D_n-1
        if corrected is not None:
            corrected[0] = self._with_boundary([start])
        ending = [] if model.system == "swift" else [END]  # type: ignore[attr-defined]
        reached: list[_Hypothesis] = []
        closing = self.max_actions if self.pop_root == "official" else 2 * self.max_actions - 1
        for i, target in enumerate([*(p[0] for p in pieces), *ending, EOS]):
            steps = self.max_actions if i < len(words) else closing
            reached = yield from self._group(beam, target, steps)
            if not reached:  # the official loop: no hypothesis survives, every later prefix is -inf
                break
            if i < len(words):
                prefix[i], value, beam = yield from self._pieces(reached, pieces[i])
                if corrected is not None:
                    corrected[i + 1] = value
            elif target != EOS:
                beam = self._word_beam(reached)
                yield from self._feed(beam, [h.pending for h in beam], ())
        total = logsumexp([h.logprob for h in reached]) if reached else float("-inf")  # reached: after </s>
        best = max((h for h in reached if h.state.complete()), key=lambda h: h.logprob, default=None)
        tree = None if best is None else to_conllu(DepTree(
            tuple(words), tuple(best.state.heads[w] for w in range(1, len(words) + 1)), ("dep",) * len(words)))
        word_logprobs = word_values(prefix) if corrected is None else word_values(corrected[1:], corrected[0])
        return SentenceScore(
            words=tuple(words), word_logprobs=word_logprobs, total=total,
            end_logprob=total - float(prefix[-1]) if np.isfinite(prefix[-1]) else float("-inf"), best_tree=tree,
            unknown_words=sum(model.is_unknown(w) for w in words),  # type: ignore[attr-defined]
            extra={"trees": len(reached),
                   "best_logprob": float("-inf") if best is None else best.logprob,
                   "unreached_words": sum(not np.isfinite(v) for v in word_logprobs)},
        )

    def _pieces(self, reached: list[_Hypothesis], word: Sequence[int]
                ) -> Steps[tuple[float, float, list[_Hypothesis]]]:
        """The word's prefix value, corrected value (``word_prob``; the prefix value under sum-pieces) and word
        beam from the hypotheses that generated its first piece: the word beam, the GEN fed to it, and each later
        piece forced (the official groups of pieces that begin no word: ``shift_size`` = the beam, so every
        hypothesis takes the piece and nothing else), each followed by the word beam; the values are the
        logsumexps before the last word beam (corrected: its pieces fed to every hypothesis first)."""
        beam = reached
        records = [token_records(self.model, h.ids, h.state, h.pending, word) for h in beam]
        for k, piece in enumerate(word):
            if k:
                for h in beam:
                    assert h.next is not None
                    h.logprob += float(h.next[piece])
            if k + 1 == len(word):
                value = corrected = logsumexp([h.logprob for h in beam])
                if self.boundary is not None:
                    yield from self._feed_records(beam, [r[k:k + 1] for r in records])
                    corrected = self._with_boundary(beam)
                    return value, corrected, self._word_beam(beam)
            kept = set(map(id, self._word_beam(beam)))
            records = [r for h, r in zip(beam, records) if id(h) in kept]
            beam = [h for h in beam if id(h) in kept]
            yield from self._feed_records(beam, [r[k:k + 1] for r in records])
        return value, corrected, beam

    def _with_boundary(self, hypotheses: list[_Hypothesis]) -> float:
        """logsumexp over ``hypotheses`` (fed up to their last token) of log p(prefix) + log P(B | prefix)."""
        masses = torch.stack([h.next for h in hypotheses])[:, self.boundary].logsumexp(-1).double().numpy()
        return logsumexp(np.array([h.logprob for h in hypotheses]) + masses)

    def _word_beam(self, reached: list[_Hypothesis]) -> list[_Hypothesis]:
        """The hypotheses at least as good as the ``word_beam``-th best, in beam order."""
        scores = sorted((h.logprob for h in reached), reverse=True)
        threshold = scores[self.word_beam - 1] if len(scores) >= self.word_beam else -np.inf
        return [h for h in reached if h.logprob >= threshold]

    def _group(self, beam: list[_Hypothesis], target: int, steps: int) -> Steps[list[_Hypothesis]]:
        """The hypotheses that reach ``target`` (a word id, ``END`` or ``EOS``) from ``beam`` within ``steps``
        token steps, re-ranked at every step (module docstring)."""
        for h in beam:
            h.spent, h.done, h.pending = 0, False, None
        for k in range(steps):
            if all(h.done for h in beam):
                break
            scores, shift, made = self._candidates(beam, target, k)
            chosen = self._choose(torch.tensor(scores, dtype=torch.float64), torch.tensor(shift, dtype=torch.bool))
            beam, extensions = [], []
            for i in chosen:
                h, kind, t = made[i]
                if kind == "keep":
                    beam.append(h)
                    continue
                child = h.child(scores[i])
                if kind == "complete":
                    child.done, child.pending = True, t
                else:
                    child.spent = k + self._cost(t)
                    extensions.append((child, t))
                beam.append(child)
            if extensions:
                yield from self._feed([c for c, _ in extensions], [t for _, t in extensions], ())
        return [h for h in beam if h.done]

    def _candidates(self, beam: list[_Hypothesis], target: int, k: int
                    ) -> tuple[list[float], list[bool], list[tuple[_Hypothesis, str, dtg.Transition | None]]]:
        """Step ``k``'s candidates in beam order: (score, generates the target, (hypothesis, keep | complete |
        extend, transition)); per hypothesis free to choose, its transitions in vocabulary order, then its
        completion."""
        scores: list[float] = []
        shift: list[bool] = []
        made: list[tuple[_Hypothesis, str, dtg.Transition | None]] = []
        for h in beam:
            if h.done or h.spent > k:  # reached the target / halfway through an arc: unchanged
                scores.append(h.logprob)
                shift.append(h.done)
                made.append((h, "keep", None))
                continue
            assert h.next is not None
            for column, t in self.transitions:
                if h.state.check(t) is None and (target == EOS or not _ends(h.state, t)):
                    scores.append(h.logprob + float(h.next[column]))
                    shift.append(False)
                    made.append((h, "extend", t))
            completion = self._completion(h, target)
            if completion is not None:
                column, t = completion
                scores.append(h.logprob + float(h.next[column]))
                shift.append(True)
                made.append((h, "complete", t))
        return scores, shift, made

    def _completion(self, h: _Hypothesis, target: int) -> tuple[int, dtg.Transition | None] | None:
        """(the vocabulary column, the transition) by which ``h`` reaches ``target`` now, or None."""
        if target == EOS:
            return (self.eos, None) if h.state.can_end() else None
        if target == END:
            return next(((c, t) for c, t in self.transitions if _ends(h.state, t) and h.state.check(t) is None),
                        None)
        return (target, dtg.GEN) if h.state.check(dtg.GEN) is None else None

    def _choose(self, scores: torch.Tensor, shift: torch.Tensor) -> list[int]:
        """The kept candidates, best first: with ``fast_track`` K the best K that generate the target, then the
        best beam - K of the others (the official ``find_selected_indices``)."""
        if not self.fast_track:
            return beams.best(scores, self.beam)
        fast = beams.best(scores.masked_fill(~shift, float("-inf")), self.fast_track)
        rest = scores.clone()
        rest[fast] = float("-inf")
        return fast + beams.best(rest, self.beam - self.fast_track)

    def _cost(self, t: dtg.Transition) -> int:
        """The tokens ``t`` spends: a DTG arc two (the forced duplicate), any other transition one."""
        return 2 if not self.causal and t.action in (dtg.LEFT_ARC, dtg.RIGHT_ARC) else 1


def token_records(model: object, ids: list[int], state: dtg.DTGState, t: dtg.Transition | None,
                  word: Sequence[int] = ()) -> list[Record]:
    """Apply ``t`` to ``state`` (None: ``<s>``; GEN generates the word whose piece ids are ``word``: one id for
    a word-level checkpoint) after the fed token ids ``ids``; the records of the tokens it adds (DTG: its
    attention units, the head's id at arc tokens as the checkpoint's ``arc_input`` says; TXL (trans): one token
    per piece or transition, over every earlier position)."""
    vocab = model.vocab  # type: ignore[attr-defined]
    gen = t is not None and t.action == "gen"
    made = [state.start()] if t is None else state.apply(t, len(word) if gen else 1)
    if t is None:
        idents = [vocab.id(dtg.BOS)]
    elif gen:
        idents = list(word)
    else:
        idents = [vocab.id(t.token())] * len(made)
    if model.family == "txl-trans":  # type: ignore[attr-defined]
        p = len(ids)
        return [(ident, list(range(p + j + 1)), [p + j - k for k in range(p + j + 1)], False, 0)
                for j, ident in enumerate(idents[:len(word) if gen else 1])]
    arc_input = model.config["model"]["arc_input"]  # type: ignore[attr-defined]
    out = []
    for tok, ident in zip(made, idents):
        token, added = ident, 0
        if tok.arc_head is not None:
            head_id = ids[tok.arc_head]
            if arc_input == "w":
                token = head_id
            elif arc_input == "w+arc":
                added = head_id
        out.append((token, tok.keys, tok.relpos, tok.type in dtg.COMPOSE_TYPES, added))
    return out


def word_pieces(model: object, words: Sequence[str]) -> list[list[int]]:
    """Each word's vocabulary ids: its token (known form or unknown class), or its SentencePiece pieces."""
    unknown = dtg_data.UNKNOWN_PIECE if model.pieces else None  # type: ignore[attr-defined]
    return [model.vocab.ids(tokens, unknown).tolist()  # type: ignore[attr-defined]
            for tokens in dtg_data.sentence_tokens(model.words, words)]  # type: ignore[attr-defined]


def word_values(prefix: np.ndarray, start: float = 0.0) -> tuple[float, ...]:
    """log p(w_i | w_<i) from the words' prefix values (after ``start``): their differences, and -inf from the
    first word whose prefix is -inf on (the beam holds no hypothesis there, so it offers no probability to any
    later word: the official difference -inf - -inf is undefined)."""
    with np.errstate(invalid="ignore"):
        out = np.diff(prefix, prepend=start)
    out[np.isneginf(prefix)] = -np.inf
    return tuple(float(v) for v in out)


def vocabulary_transitions(model: object) -> list[tuple[int, dtg.Transition]]:
    """(vocabulary id, transition) of every non-GEN transition of the model's system its vocabulary has, in
    vocabulary order."""
    vocab, system = model.vocab, model.system  # type: ignore[attr-defined]
    found = [(vocab.id(tok), _transition(tok)) for tok in vocab.tokens]
    return [(i, t) for i, t in found if t is not None and _in_system(t, system)]


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
