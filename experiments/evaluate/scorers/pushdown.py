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
Word-level vocabularies only (a SentencePiece vocabulary needs Appendix C's within-word attachments).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from experiments.evaluate.scorer import Convention, SentenceScore
from lightning_modules.data.encodings.pushdown import StackStates
from lightning_modules.data.pushdown_data import EOS, SOS
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
        payload = meta["vocab"]
        if payload.get("terminals") != "words":
            raise InputError("the Pushdown scorers support word-level vocabularies (data.terminals=words)",
                             "checkpoint")
        self.words = WordVocab.from_dict(payload["words"], "checkpoint vocabulary")
        self.ids = {t: i for i, t in enumerate(payload["tokens"])}

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
        ids = [self.ids[SOS], *(self.ids[self.words.unkify(w)] for w in words), self.ids[EOS]]
        return ids, sum(w not in self.words.known for w in words)


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
            legal = states.legal(close_at_last=True)  # [count, k + 1]
            cand = with_word[:, None] + np.where(legal, lp_attach.double().cpu().numpy()[:, : k + 1], -np.inf)
            flat = cand.ravel()
            keep = min(self.beam, int(np.isfinite(flat).sum()))
            top = np.argpartition(-flat, keep - 1)[:keep] if keep < flat.size else np.arange(flat.size)
            top = top[np.isfinite(flat[top])]
            top = top[np.argsort(-flat[top], kind="stable")]
            origins, labels = np.divmod(top, k + 1)
            states = states.select(origins)
            states.attach(labels)
            rows = np.concatenate([rows[origins], states.depth[:, None, :]], axis=1)
            scores = flat[top]
        raise AssertionError("unreachable")


def _logsumexp(values: np.ndarray) -> float:
    top = float(np.max(values))
    if not math.isfinite(top):
        return top
    return top + math.log(float(np.exp(values - top).sum()))
