"""The reference word-synchronous beam: the search of ``beam.BeamScorer``, re-encoding every prefix.

This is how the TG family's beam ran before it had a key/value cache, kept as the definition the cached
search must reproduce (``tests/experiments/families/tg/test_tg_beam.py`` checks equal numbers on real
sentences) and as the reference of ``benchmarks/tg_beam.py``. It is never used for scoring.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from experiments.evaluate.scorer import Convention, SentenceScore, check_sentences
from experiments.evaluate.scorers.beams import check_beam_settings
from experiments.families.tg.methods import BEAM  # the method's defaults, the only ones
from experiments.families.tg.scorers import TGModel, action_tree
from lightning_modules.data.encodings.choe_charniak import BOS, Actions, ActionVocab, TokenType
from lightning_modules.data.tree import Tree, to_bracketed
from lightning_modules.errors import InputError
from lightning_modules.families.tg.cc_constraints import ActionMasks, CCState
from lightning_modules.numeric import logsumexp


@dataclass(frozen=True)
class _Hypothesis:
    """A well-formed action prefix: Choe–Charniak tokens, types, word indices, log-prob, constraint state."""

    tokens: tuple[str, ...]
    types: tuple[int, ...]
    word_index: tuple[int, ...]
    logprob: float
    state: CCState
    closing: int  # closing nonterminals so far (TG encodes each as two tokens)

    def extend(self, tokens: Sequence[str], ttype: int, word: int, logprob: float, closing: int = 0
               ) -> _Hypothesis:
        state = self.state
        for token in tokens:
            state = state.advance(ttype, token)
        return _Hypothesis(self.tokens + tuple(tokens), self.types + (ttype,) * len(tokens),
                           self.word_index + (word,) * len(tokens), self.logprob + logprob, state,
                           self.closing + closing)

    def tree(self, words: Sequence[str]) -> Tree:
        return action_tree(self.tokens, self.types, self.word_index, words)

    def actions(self, tokens: Sequence[str] = (), ttype: int = TokenType.T, word: int = -1) -> Actions:
        return Actions(self.tokens + tuple(tokens), self.types + (ttype,) * len(tokens),
                       self.word_index + (word,) * len(tokens))


class ReencodingBeamScorer:
    """Word-synchronous beam search over the joint model's actions (Stern et al. 2017; DTG's SG setting).

    For word i, starting from the word beam: at each action step every frontier hypothesis may generate
    word i (all its pieces, forced) — it then joins the *completed* set — or take one nonterminal action
    allowed by ``cc_constraints`` (open any label, close the top constituent once it dominates a terminal,
    never the root while words remain); the best ``beam`` nonterminal extensions form the next frontier.
    At most ``max_actions`` nonterminal actions separate two words. The prefix value of word i is the
    logsumexp over the completed set, which is then pruned to the best ``word_beam``. After the last word
    every completed hypothesis closes its open constituents (forced), and ``total`` is the logsumexp over the
    complete trees — a lower bound on log p(x).

    Each action step is one forward pass over all frontier hypotheses, each extended with the word's
    pieces so that the same pass gives the next-action distribution (at the prefix's last position) and the
    word's log-prob. Prefixes are re-encoded from scratch at every step (no key/value cache): a sentence of n
    words costs up to n·(max_actions+1) passes over ``beam`` sequences of the prefix's length, so
    O(n²·beam·(max_actions+1)) encoded tokens in total.

    The model set: trees with at most ``max_actions`` nonterminal actions before each word (the final
    closings are not counted). With ``beam`` and ``word_beam`` at least the number of such prefixes, no
    pruning happens and every value equals the marginal over that whole set.
    """

    def __init__(self, model: TGModel, beam: int = BEAM.options["beam"],
                 word_beam: int = BEAM.options["word_beam"], max_actions: int = BEAM.options["max_actions"]):
        if not model.joint:
            raise InputError(f"{model.family} is a string model: score it with method=exact", "method")
        check_beam_settings(beam, word_beam, max_actions)
        self.model, self.beam, self.word_beam, self.max_actions = model, beam, word_beam, max_actions
        self.masks = ActionMasks(model.vocab)
        self.name = model.family
        self.convention = Convention(method="beam", bound=True, beam=beam, word_beam=word_beam,
                                     max_actions=max_actions, incremental="beam", end_of_sentence=True)

    def score(self, sentences: Sequence[Sequence[str]]) -> list[SentenceScore]:
        check_sentences(sentences)
        return [self._sentence(words) for words in sentences]

    def _sentence(self, words: Sequence[str]) -> SentenceScore:
        start = _Hypothesis((BOS,), (int(TokenType.SOS),), (-1,), 0.0, CCState(), 0)
        word_beam = [start]
        prefix = np.empty(len(words))
        completed: list[_Hypothesis] = []
        for i, word in enumerate(words):
            completed = self._word(word_beam, i, self.model.terminals(word))
            prefix[i] = logsumexp([h.logprob for h in completed])
            word_beam = _best(completed, self.word_beam)
        final = self._close(completed)
        scores = [h.logprob for h in final]
        total = logsumexp(scores)
        best = final[int(np.argmax(scores))]
        return SentenceScore(
            words=tuple(words), word_logprobs=tuple(float(v) for v in np.diff(prefix, prepend=0.0)),
            total=total, end_logprob=total - float(prefix[-1]), best_tree=to_bracketed(best.tree(words)),
            unknown_words=sum(self.model.is_unknown(w) for w in words),
            extra={"trees": len(final), "best_logprob": best.logprob},
        )

    def _word(self, frontier: list[_Hypothesis], i: int, pieces: tuple[str, ...]) -> list[_Hypothesis]:
        """Every hypothesis that generates word i from ``frontier`` within ``max_actions`` actions."""
        vocab = self.model.vocab
        completed: list[_Hypothesis] = []
        piece_ids = torch.from_numpy(vocab.ids(pieces, self.model.unknown_token))
        for step in range(self.max_actions + 1):
            if not frontier:
                break
            examples = [self.model.encode(h.actions(pieces, TokenType.T, i)) for h in frontier]
            last = [self.model.encoded_length(len(h.tokens), h.closing) - 1 for h in frontier]
            rows = self.model.distributions(examples, [range(p, p + len(pieces)) for p in last])
            moves: list[tuple[float, int, int]] = []  # (score, frontier index, action id)
            for b, h in enumerate(frontier):
                if h.state.open:  # inside the root: the word may come now
                    word_logprob = float(rows[b].gather(1, piece_ids[:, None]).double().sum())
                    completed.append(h.extend(pieces, TokenType.T, i, word_logprob))
                if step == self.max_actions:
                    continue
                ids = np.flatnonzero(self.masks.allowed(h.state, terminal=False, close_root=False))
                row = rows[b][0, ids].double().numpy()
                moves += [(h.logprob + float(s), b, int(a)) for s, a in zip(row, ids)]
            moves.sort(key=lambda m: -m[0])  # stable: ties keep frontier and vocabulary order
            frontier = [self._nonterminal(frontier[b], a, score - frontier[b].logprob, vocab)
                        for score, b, a in moves[: self.beam]]
        return completed

    @staticmethod
    def _nonterminal(h: _Hypothesis, action: int, logprob: float, vocab: ActionVocab) -> _Hypothesis:
        ttype = int(vocab.token_types(np.array([action]))[0])
        return h.extend((vocab.tokens[action],), ttype, -1, logprob, closing=int(ttype == TokenType.CNT))

    def _close(self, hypotheses: list[_Hypothesis]) -> list[_Hypothesis]:
        """Each hypothesis with all its open constituents closed (innermost first), scored in one pass."""
        closings = [tuple(f"{label})" for label in reversed(h.state.open)) for h in hypotheses]
        examples = [self.model.encode(h.actions(c, TokenType.CNT)) for h, c in zip(hypotheses, closings)]
        logprobs = self.model.label_logprobs(examples)
        out = []
        for h, c, lp in zip(hypotheses, closings, logprobs):
            last = self.model.encoded_length(len(h.tokens), h.closing) - 1
            out.append(h.extend(c, TokenType.CNT, -1, float(lp[last:].sum()), closing=len(c)))
        return out


def _best(hypotheses: list[_Hypothesis], k: int) -> list[_Hypothesis]:
    return sorted(hypotheses, key=lambda h: -h.logprob)[:k]
