"""Scorers of Pushdown Layers checkpoints (Murty et al. 2023): word-synchronous beam search over attachments.

A Pushdown-LM is a joint model p(x, y): at input position t it predicts the next word x_{t+1} and then, given
that word, its attachment r_{t+1} (reduce with the constituent ending at position c, or shift), which
updates the stack tape every later position reads. ``BeamScorer`` keeps the ``beam`` best attachment
histories per sentence (§3.4, beam 300 in the paper), all hypotheses of a sentence batched in one forward
pass per word:

- candidates at word k: every hypothesis x every legal attachment of x_k (``StackStates.legal``), scored
  ``log p(prefix, y) + log p(x_k | ...) + log p(r_k | ..., x_k)``; the ``beam`` best survive;
- the incremental estimate log p(x_k | x_<k) is the difference of successive prefix marginals, each
  ``logsumexp`` over the beam of ``log p(prefix, y) + log p(x_k | ...)`` (the official definition, without its
  indexing bug: every surviving hypothesis counts once);
- at ``<eos>`` the attachment is not scored (as in training, the ``<eos>`` reduce never enters the tape);
  log p(x) >= logsumexp over the final beam: a lower bound, recorded in the convention.

Deviation from the official search: the last word may not shift and leave ``<eos>`` to close the stack
(``close_at_last``): label sequences and binary trees are then one-to-one, so no tree is counted twice.
``base-lm`` checkpoints are string models: ``ExactScorer`` reads the whole sentence in one pass.
Word-level vocabularies and Dyck runs only (a SentencePiece vocabulary needs Appendix C's within-word
attachments). For the Dyck test sets, ``next_token_logprobs`` gives the next-token distribution after a
prefix: exact for ``base-lm``, the beam's marginal for ``pushdown``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from experiments.evaluate.scorer import Convention, SentenceScore
from lightning_modules.data.encodings.pushdown import StackStates
from lightning_modules.data.pushdown_data import EOS, PAD, SOS
from lightning_modules.errors import InputError

FAMILIES = ("pushdown", "base-lm")
INCREMENTAL = ("difference of successive beam prefix marginals, log-sum-exp over the beam of p(prefix, y) "
               "p(x_k | prefix, y)")


class PushdownModel:
    """A Pushdown-family network with its vocabulary: words -> token ids -> log-probs."""

    def __init__(self, module: Any, meta: dict[str, Any], device: str = "cpu"):
        from lightning_modules.data.vocab import WordVocab

        self.module = module.to(device).eval()
        self.device = torch.device(device)
        self.family: str = meta["family"]
        self.config: dict[str, Any] = meta.get("config", {})  # the run's resolved config (data section: Dyck)
        payload = meta["vocab"]
        if payload.get("terminals") not in ("words", "dyck"):
            raise InputError("the Pushdown scorers support word-level vocabularies (data.terminals=words) and "
                             "Dyck runs", "checkpoint")
        # Dyck tokens are the vocabulary itself: no unknown-word classes
        self.words = (WordVocab.from_dict(payload["words"], "checkpoint vocabulary")
                      if payload["terminals"] == "words" else None)
        self.ids = {t: i for i, t in enumerate(payload["tokens"])}
        self.tokens: list[str] = list(payload["tokens"])

    @classmethod
    def load(cls, checkpoint: str, device: str = "cpu") -> PushdownModel:
        from experiments.checkpoints import read_checkpoint
        from lightning_modules.models.pushdown import build

        ckpt = read_checkpoint(checkpoint, FAMILIES)
        meta = ckpt["synbench"]
        module = build({**meta["config"]["model"], "vocab_size": len(meta["vocab"]["tokens"])},
                       family=meta["family"])
        module.load_state_dict(ckpt["state_dict"])
        return cls(module, meta, device)

    def token_ids(self, words: Sequence[str]) -> tuple[list[int], int]:
        """``<s> x_1..x_n <eos>`` ids and the number of unknown words."""
        if self.words is None:
            return [*self.prefix_ids(words), self.ids[EOS]], 0
        ids = [self.ids[SOS], *(self.ids[self.words.unkify(w)] for w in words), self.ids[EOS]]
        return ids, sum(w not in self.words.known for w in words)

    def prefix_ids(self, tokens: Sequence[str]) -> list[int]:
        """``<s> x_1..x_n`` ids of a prefix of tokens of the vocabulary (Dyck; ``InputError`` otherwise)."""
        unknown = [t for t in tokens if t not in self.ids or t in (SOS, EOS, PAD)]
        if unknown:
            raise InputError(f"token {unknown[0]!r} is not in the model's vocabulary", "prefix")
        return [self.ids[SOS], *(self.ids[t] for t in tokens)]


def _check(sentences: Sequence[Sequence[str]]) -> None:
    for k, words in enumerate(sentences):
        if not words:
            raise InputError("empty sentence", f"sentence {k}")


class ExactScorer:
    """``base-lm``: log p(w_i | w_<i) from one pass over the sentence (the tape is never read)."""

    def __init__(self, model: PushdownModel):
        if model.family != "base-lm":
            raise InputError("a Pushdown-LM is a joint model: score it with the beam (--method beam)", "--method")
        self.model = model
        self.name = "base-lm"
        self.convention = Convention("exact", bound=False)

    @torch.no_grad()
    def score(self, sentences: Sequence[Sequence[str]]) -> list[SentenceScore]:
        _check(sentences)
        out = []
        for words in sentences:
            ids, unknown = self.model.token_ids(words)
            inputs = torch.tensor([ids[:-1]], device=self.model.device)
            n = inputs.shape[1]
            tape = torch.zeros(1, n, n, dtype=torch.long, device=self.model.device)
            h = self.model.module.hidden_states(inputs, tape, torch.tensor([n], device=self.model.device))
            lp = self.model.module.word_logits(h[0]).float().log_softmax(-1)
            picked = lp[torch.arange(n), torch.tensor(ids[1:], device=self.model.device)].double().cpu().numpy()
            out.append(SentenceScore(tuple(words), tuple(float(x) for x in picked[:-1]), float(picked.sum()),
                                     float(picked[-1]), unknown_words=unknown))
        return out

    @torch.no_grad()
    def next_token_logprobs(self, prefixes: Sequence[Sequence[str]]) -> np.ndarray:
        """log p(w | prefix) [N, V] for token prefixes (Dyck), exact: one pass per prefix."""
        module, device = self.model.module, self.model.device
        out = []
        for tokens in prefixes:
            ids = self.model.prefix_ids(tokens)
            n = len(ids)
            tape = torch.zeros(1, n, n, dtype=torch.long, device=device)
            h = module.hidden_states(torch.tensor([ids], device=device), tape, torch.tensor([n], device=device))
            out.append(module.word_logits(h[0, -1]).double().log_softmax(-1).cpu().numpy())
        return np.stack(out)


class BeamScorer:
    """``pushdown``: word-synchronous beam search over attachment decisions (see the module docstring)."""

    def __init__(self, model: PushdownModel, beam: int = 300):
        if model.family != "pushdown":
            raise InputError("beam search over attachments needs a pushdown checkpoint", "--method")
        if beam < 1:
            raise InputError("must be at least 1", "--beam")
        self.model, self.beam = model, beam
        self.name = "pushdown"
        self.convention = Convention("beam", bound=True, beam=beam, incremental=INCREMENTAL)

    def score(self, sentences: Sequence[Sequence[str]]) -> list[SentenceScore]:
        _check(sentences)
        return [self._sentence(words) for words in sentences]

    @torch.no_grad()
    def _sentence(self, words: Sequence[str]) -> SentenceScore:
        module, device = self.model.module, self.model.device
        ids, unknown = self.model.token_ids(words)
        n = len(words)
        states = StackStates(n)
        rows = np.zeros((1, 1, n + 2), dtype=np.int64)  # per hypothesis: tape rows 0..k-1 (row 0: <s>)
        scores = np.zeros(1)
        prefix = 0.0  # log p(x_<k) estimate
        word_logprobs = []
        for k in range(1, n + 2):  # word k; k = n + 1 is <eos>
            count = len(scores)
            inputs = torch.tensor(ids[:k], device=device).expand(count, k)
            tape = torch.from_numpy(rows[:, :k, :k]).to(device)
            next_words = torch.full((count,), ids[k], device=device)
            lp_words, lp_attach = module.step_logprobs(inputs, tape, next_words)
            lp_word = lp_words[:, ids[k]].double().cpu().numpy()
            with_word = scores + lp_word
            marginal = _logsumexp(with_word)
            if k == n + 1:
                end = marginal - prefix
                best = int(np.argmax(with_word))
                return SentenceScore(tuple(words), tuple(word_logprobs), marginal, end, unknown_words=unknown,
                                     extra={"attachment": states.attachment[best, : n + 1].tolist(),
                                            "beam_final": count})
            word_logprobs.append(marginal - prefix)
            prefix = marginal
            states, rows, scores = self._advance(states, rows, with_word, lp_attach, close_at_last=True)
        raise AssertionError("unreachable")

    def next_token_logprobs(self, prefixes: Sequence[Sequence[str]]) -> np.ndarray:
        """log p(w | prefix) [N, V] for token prefixes (Dyck): the beam's marginal next-token distribution.

        The beam runs over the attachments of every prefix token (the last one too: the next position reads
        its tape row), then ``logsumexp_y [log p(prefix, y) + log p(w | prefix, y)] - logsumexp_y log p(prefix,
        y)`` over the final beam. (The official ``eval_dyck.py`` reads the top hypothesis's distribution.)
        """
        return np.stack([self._next_token(self.model.prefix_ids(tokens)) for tokens in prefixes])

    @torch.no_grad()
    def _next_token(self, ids: list[int]) -> np.ndarray:
        module, device = self.model.module, self.model.device
        n = len(ids) - 1
        if n < 1:
            raise InputError("empty prefix", "prefix")
        states = StackStates(n)
        rows = np.zeros((1, 1, n + 2), dtype=np.int64)
        scores = np.zeros(1)
        for k in range(1, n + 2):
            count = len(scores)
            inputs = torch.tensor(ids[:k], device=device).expand(count, k)
            tape = torch.from_numpy(rows[:, :k, :k]).to(device)
            word = ids[k] if k <= n else ids[0]  # after the prefix the attachment head's output is unused
            lp_words, lp_attach = module.step_logprobs(inputs, tape, torch.full((count,), word, device=device))
            lp = lp_words.double().cpu()
            if k == n + 1:
                joint = torch.from_numpy(scores)[:, None] + lp
                return (torch.logsumexp(joint, dim=0) - torch.logsumexp(torch.from_numpy(scores), dim=0)).numpy()
            states, rows, scores = self._advance(states, rows, scores + lp[:, ids[k]].numpy(), lp_attach,
                                                 close_at_last=False)
        raise AssertionError("unreachable")

    def _advance(self, states: StackStates, rows: np.ndarray, with_word: np.ndarray, lp_attach: torch.Tensor,
                 close_at_last: bool) -> tuple[StackStates, np.ndarray, np.ndarray]:
        """Every hypothesis x every legal attachment of the next token; the ``beam`` best, best first.

        ``with_word`` [count] the hypotheses' scores with the token's log-prob; ``rows`` [count, k, n + 2] the
        tape rows so far. Returns the new states, tape rows (the new row appended) and scores.
        """
        k = states.position + 1
        legal = states.legal(close_at_last=close_at_last)  # [count, k + 1]
        cand = with_word[:, None] + np.where(legal, lp_attach.double().cpu().numpy()[:, : k + 1], -np.inf)
        flat = cand.ravel()
        keep = min(self.beam, int(np.isfinite(flat).sum()))
        top = np.argpartition(-flat, keep - 1)[:keep] if keep < flat.size else np.arange(flat.size)
        top = top[np.isfinite(flat[top])]
        top = top[np.argsort(-flat[top], kind="stable")]
        origins, labels = np.divmod(top, k + 1)
        states = states.select(origins)
        states.attach(labels)
        return states, np.concatenate([rows[origins], states.depth[:, None, :]], axis=1), flat[top]


def _logsumexp(values: np.ndarray) -> float:
    top = float(np.max(values))
    if not math.isfinite(top):
        return top
    return top + math.log(float(np.exp(values - top).sum()))
