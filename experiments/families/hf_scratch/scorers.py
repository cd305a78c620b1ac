"""A trained standard transformer (``hf-scratch``) as an exact Scorer, read like TXL (terminals).

A sentence is ``<s> w1 ... wn </s>`` over the checkpoint's terminals (each word its known form, its
unknown-word class or its SentencePiece pieces); ``word_logprobs[i]`` = log p(w_i | w_<i) summed over the
word's pieces, ``end_logprob`` = log p(</s> | x), ``total`` = their sum = log p(x) (natural logs). With
SentencePiece terminals, ``word_prob="corrected"`` corrects each word as TXL (terminals) does
(``experiments.evaluate.word_prob``; B = the ``▁`` pieces and ``</s>``); ``total`` stays log p(x).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from experiments.evaluate.scorer import Convention, SentenceScore, batches, check_sentences
from experiments.evaluate.word_prob import WORD_PROBS, boundary_ids, corrected_word_logprobs
from lightning_modules.data.sentencepiece import BOUNDARY
from lightning_modules.data.vocab import WordVocab, terminal_vocab
from lightning_modules.errors import InputError
from lightning_modules.families.hf_scratch.data import collate
from lightning_modules.families.hf_scratch.encoding import EOS, PAD, SPECIALS, Example, encode
from lightning_modules.families.hf_scratch.model import CausalLM, max_positions

FAMILY = "hf-scratch"


class HFScratchModel:
    """A loaded ``CausalLM`` (eval mode) with its vocabulary: words -> terminals -> ids."""

    def __init__(self, module: CausalLM, meta: dict[str, Any], device: str = "cpu"):
        self.module = module.to(device).eval()
        self.device = torch.device(device)
        self.family: str = meta["family"]
        payload = meta["vocab"]
        self.tokens: list[str] = list(payload["tokens"])
        self.index = {t: i for i, t in enumerate(self.tokens)}
        self.vocab_kind: str = payload["terminals"]  # words | sentencepiece
        self.unknown: str | None = payload.get("unknown")
        self.max_length = max_positions(module.config)
        vocab = terminal_vocab(payload, "checkpoint vocabulary")
        if isinstance(vocab, WordVocab):
            self.terminals: Any = lambda w: (vocab.unkify(w),)
            self.is_unknown: Any = lambda w: w not in vocab.known
        else:
            self.terminals = lambda w: tuple(vocab.encode_words([w])[0])
            self.is_unknown = lambda w: any(p not in self.index for p in self.terminals(w))

    @classmethod
    def load(cls, checkpoint: str, device: str = "cpu") -> HFScratchModel:
        from experiments.checkpoints import read_checkpoint

        ckpt = read_checkpoint(checkpoint, FAMILY)
        meta = ckpt["synbench"]
        module = CausalLM({**meta["config"]["model"], "vocab_size": len(meta["vocab"]["tokens"])})
        module.load_state_dict(ckpt["state_dict"])
        return cls(module, meta, device)

    def encode(self, words: Sequence[str]) -> Example:
        example = encode(words, self.terminals, self.index, self.unknown)
        if self.max_length is not None and len(example) > self.max_length:
            raise InputError(f"a sentence of {len(example)} tokens is longer than the model's {self.max_length} "
                             f"positions: {' '.join(words)[:80]}", "sentence")
        return example

    @torch.no_grad()
    def label_logprobs(self, examples: Sequence[Example]) -> list[np.ndarray]:
        inputs, labels = collate(list(examples))
        logprobs = self.module.token_logprobs(inputs.to(self.device), labels.to(self.device)).double().cpu()
        return [logprobs[b, : len(e)].numpy() for b, e in enumerate(examples)]

    @torch.no_grad()
    def boundary_masses(self, examples: Sequence[Example], boundary: torch.Tensor) -> list[np.ndarray]:
        """log P(``boundary`` ids | prefix) at every position of each example (before each label)."""
        inputs, _ = collate(list(examples))
        inputs = inputs.to(self.device)
        logits = self.module.network(input_ids=inputs, attention_mask=(inputs != PAD).long()).logits
        masses = logits.float().log_softmax(-1)[..., boundary.to(self.device)].logsumexp(-1).double().cpu()
        return [masses[b, : len(e)].numpy() for b, e in enumerate(examples)]


class ExactScorer:
    """Exact per-word log-probabilities, batched over sentences of similar lengths."""

    def __init__(self, model: HFScratchModel, batch_size: int = 32, word_prob: str = WORD_PROBS[0]):
        if batch_size < 1:
            raise InputError("must be at least 1", "batch_size")
        if word_prob != WORD_PROBS[0] and model.vocab_kind != "sentencepiece":
            raise InputError(f"a vocabulary of {model.vocab_kind} has one token per word: --word-prob {word_prob} "
                             "needs SentencePiece terminals", "--word-prob")
        self.model, self.batch_size, self.name = model, batch_size, model.family
        self.convention = Convention(method="exact", bound=False, end_of_sentence=True, bos="<s>",
                                     word_prob=word_prob)
        # corrected: the ids of B (the pieces that begin a word, and </s>)
        self.boundary = (None if word_prob == WORD_PROBS[0] else
                         torch.tensor(boundary_ids(model.tokens, BOUNDARY, (SPECIALS[EOS],))))

    def score(self, sentences: Sequence[Sequence[str]]) -> list[SentenceScore]:
        check_sentences(sentences)
        examples = [self.model.encode(words) for words in sentences]
        order = sorted(range(len(examples)), key=lambda k: -len(examples[k]))
        out: list[SentenceScore | None] = [None] * len(examples)
        for batch in batches(order, [1] * len(examples), self.batch_size):
            chosen = [examples[k] for k in batch]
            masses = ([None] * len(batch) if self.boundary is None else
                      self.model.boundary_masses(chosen, self.boundary))
            for k, lp, boundary in zip(batch, self.model.label_logprobs(chosen), masses, strict=True):
                words, example = sentences[k], examples[k]
                is_word = example.word_index >= 0
                per_word = np.bincount(example.word_index[is_word], weights=lp[is_word], minlength=len(words))
                end = float(lp[-1])
                total = float(per_word.sum()) + end
                if boundary is not None:  # positions 0 .. n: before each piece, then after the last
                    per_word = np.array(corrected_word_logprobs(lp[is_word], example.word_index[is_word], boundary,
                                                                float(boundary[0])))
                out[k] = SentenceScore(words=tuple(words), word_logprobs=tuple(float(v) for v in per_word),
                                       total=total, end_logprob=end,
                                       unknown_words=sum(self.model.is_unknown(w) for w in words))
        return out  # type: ignore[return-value]
