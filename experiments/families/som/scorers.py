"""The Scorer of SOM checkpoints: exact log-probabilities with greedy structure.

SOM decides its structure from the prefix only: θ_t = argmax p_t (which reads w_≤t) and the prediction
network's slot c = argmax p'_t (which reads the memory after w_t), Eq. 13. With these greedy decisions
p(w_{t+1} | w_≤t) is a deterministic function of the prefix, so the sentence probability Π_t p(w_{t+1} |
w_≤t) (``<eos>`` included) is exact for that model and per-word values are true incremental surprisals:
no marginalisation over trees and no bound. The parse is the tree the decisions θ build
(``parsing.py``; ``best_tree`` holds it with brackets in words written -LRB-/-RRB-, ``extra["decisions"]``
the decisions θ, ``extra["choices"]`` the prediction network's slots c, for the p / p' accuracies); ``best_logprob``
is the same exact log p(x).

With ``--method gold`` (Table 2's "– Predicted tree + Gold tree", the upper bound of SOM; what validation
does with ``model.eval_decisions: gold``) θ_t and c_t are the gold grid labels of the corpus's tree instead
(Γ of a dependency tree, the binarized constituency tree, or the left-branching tree of a model trained on
it): each word's probability then reads the gold attachment of the next word (c_t = ξ_{t+1}), so the total
is not a probability of the string alone, and not a bound on it. ``extra["predicted"]`` holds what the parsers
predict at each step, argmax p_t and argmax p'_t: the decisions themselves when they are greedy, the model's
predictions under the gold history with ``--method gold`` (Table 2's p / p' accuracies of that row, ``eval parse
--method gold``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from experiments.evaluate.scorer import Convention, SentenceScore, check_sentences
from experiments.families.som.parsing import bracket_safe
from lightning_modules.data.tree import to_bracketed
from lightning_modules.data.vocab import TokenVocab, WordVocab
from lightning_modules.families.som import encoding as som
from lightning_modules.families.som.data import sentence_shape
from lightning_modules.families.som.model import SOM, build

INCREMENTAL = "exact given greedy decisions: theta_t = argmax p_t, prediction slot = argmax p'_t (Eq. 13)"
GOLD = ("gold decisions (Table 2's upper bound): theta_t and the prediction slot c_t = xi_{t+1} are the gold "
        "grid labels, so p(w_{t+1} | w_<=t) reads the next word's gold attachment; not a probability of x alone")


@dataclass(frozen=True)
class Steps:
    """One sentence's pass: log p of ``w_1 … w_n <eos>`` (float64[n + 1]); per word, the decision θ taken and
    the prediction network's slot c read after it (None without a prediction network), and the parsers'
    predictions argmax p_t and argmax p'_t (equal to θ and c when the decisions are greedy)."""

    logp: np.ndarray
    theta: np.ndarray
    choices: np.ndarray | None
    p_argmax: np.ndarray
    p_prime_argmax: np.ndarray | None


class SOMModel:
    """A SOM network with its vocabulary: words -> ids -> log-probabilities, decisions and parses."""

    def __init__(self, module: SOM, meta: dict[str, Any], device: str = "cpu"):
        self.module = module.to(device).eval()
        self.device = torch.device(device)
        self.config: dict[str, Any] = meta.get("config", {})
        self.words = WordVocab.from_dict(meta["vocab"]["words"], "checkpoint vocabulary")
        self.vocab = TokenVocab(meta["vocab"]["tokens"][3:])
        self.vocab_kind = "words"

    @classmethod
    def load(cls, checkpoint: str, device: str = "cpu") -> SOMModel:
        from experiments.checkpoints import read_checkpoint

        ckpt = read_checkpoint(checkpoint, "som")
        meta = ckpt["synbench"]
        module = build({**meta["config"]["model"], "vocab_size": len(meta["vocab"]["tokens"])})
        module.load_state_dict(ckpt["state_dict"])
        return cls(module, meta, device)

    def is_unknown(self, word: str) -> bool:
        return word not in self.words.known

    def gold_slots(self, words: Sequence[str], tree: Any) -> np.ndarray:
        """The grid labels of ``<s> w_1 … w_n <eos>`` under the tree the model was trained on (its
        ``tree_labels``) for a corpus tree: the gold decisions."""
        shape = sentence_shape(words, tree, self.module.config.tree_labels)
        return som.token_slots(som.sentence_shape(shape), self.module.config.n_slots)

    @torch.no_grad()
    def run(self, sentences: Sequence[Sequence[str]], gold: Sequence[np.ndarray] | None = None) -> list[Steps]:
        """Per sentence: log p of ``w_1 … w_n <eos>``, the decisions taken (greedy, or the ``gold`` grid labels
        of each sentence, ``gold_slots``) and what the parsers predicted (``Steps``)."""
        ids = [[self.vocab.id(self.words.unkify(w)) for w in words] for words in sentences]
        n = max(len(x) for x in ids) + 1
        inputs = torch.zeros(len(ids), n, dtype=torch.long)
        targets = torch.zeros(len(ids), n, dtype=torch.long)
        for b, x in enumerate(ids):
            inputs[b, : len(x) + 1] = torch.tensor([self.vocab.id(som.SOS), *x])
            targets[b, : len(x) + 1] = torch.tensor([*x, self.vocab.id(som.EOS)])
        slots = torch.zeros(len(ids), n + 1, dtype=torch.long)
        for b, labels in enumerate(gold or ()):
            slots[b, : len(labels)] = torch.from_numpy(labels)
        trace = self.module(inputs.to(self.device), slots.to(self.device), "argmax" if gold is None else "gold")
        logp = trace.logits.double().log_softmax(-1).gather(2, targets.to(self.device)[..., None])[..., 0]
        logp, theta = logp.cpu().numpy(), trace.decisions.cpu().numpy()
        p_argmax = trace.parser_logp.argmax(-1).cpu().numpy()
        choices = c_argmax = None
        if trace.choices is not None:
            choices, c_argmax = trace.choices.cpu().numpy(), trace.zero_step_logp.argmax(-1).cpu().numpy()
        words = [slice(1, len(x) + 1) for x in ids]
        return [Steps(logp[b, : len(x) + 1], theta[b, words[b]], None if choices is None else choices[b, words[b]],
                      p_argmax[b, words[b]], None if c_argmax is None else c_argmax[b, words[b]])
                for b, x in enumerate(ids)]


class ExactScorer:
    """Exact per-word log-probabilities with greedy structure, or with the gold decisions of the trees that
    ``gold`` gives (module docstring), batched by length."""

    def __init__(self, model: SOMModel, batch_size: int = 32, gold: Callable[[Any], list[list[Any]]] | None = None):
        self.model, self.batch_size, self.gold = model, batch_size, gold
        self.name = "som"
        self.convention = (Convention("exact", bound=False, incremental=INCREMENTAL) if gold is None else
                           Convention("gold", bound=False, incremental=GOLD))

    def score(self, sentences: Sequence[Sequence[str]]) -> list[SentenceScore]:
        check_sentences(sentences)
        order = sorted(range(len(sentences)), key=lambda k: len(sentences[k]))
        out: list[SentenceScore | None] = [None] * len(sentences)
        for start in range(0, len(order), self.batch_size):
            group = order[start: start + self.batch_size]
            batch = [sentences[k] for k in group]
            gold = None
            if self.gold is not None:
                gold = [self.model.gold_slots(words, trees[0]) for words, trees in zip(batch, self.gold(batch))]
            for k, steps in zip(group, self.model.run(batch, gold)):
                words = tuple(sentences[k])
                tree = to_bracketed(som.shape_to_tree(som.shape_from_slots(steps.theta), bracket_safe(words)))
                logp = steps.logp
                total = float(logp.sum())
                predicted = {"p": steps.p_argmax.tolist(),
                             **({} if steps.p_prime_argmax is None else {"p_prime": steps.p_prime_argmax.tolist()})}
                out[k] = SentenceScore(words, tuple(float(x) for x in logp[:-1]), total, float(logp[-1]),
                                       best_tree=tree, unknown_words=sum(map(self.model.is_unknown, words)),
                                       extra={"best_logprob": total, "decisions": steps.theta.tolist(),
                                              "choices": None if steps.choices is None else steps.choices.tolist(),
                                              "predicted": predicted, "n_slots": self.model.module.config.n_slots})
        return out  # type: ignore[return-value]
