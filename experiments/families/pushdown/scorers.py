"""Scorers of Pushdown Layers checkpoints (Murty et al. 2023): word-synchronous beam search over attachments.

A Pushdown-LM is a joint model p(x, y): at input position t it predicts the next word x_{t+1} and then, given
that word, its attachment r_{t+1} (reduce with the constituent ending at position c, or shift), which
updates the stack tape every later position reads. ``BeamScorer`` keeps the ``beam`` best attachment
histories per sentence (§3.4, beam 300 in the paper), all hypotheses of ``batch_size`` sentences batched in
one incremental step per token (``PushdownLM.step``: only the newest position is computed, every earlier
position's keys and values are cached and reordered with the beam; each sentence prunes its own hypotheses).
The search state (every hypothesis's stack state and score) and the pruning stay on the model's device, batched
over the sentences (``_Beams``, ``_Batch``): inside a word step no value is read back to the host (no sync
stalls a GPU; a test runs the steps under ``lightning_modules.models.host_sync.no_host_sync``), and the
sentences' results are read back once, when the batch has ended:

- candidates at word k: every hypothesis x every legal attachment of x_k (``legal_attachments``), scored
  ``log p(prefix, y) + log p(x_k | ...) + log p(r_k | ..., x_k)``; the ``beam`` best survive;
- the incremental estimate log p(x_k | x_<k) is the difference of successive prefix marginals, each
  ``logsumexp`` over the beam of ``log p(prefix, y) + log p(x_k | ...)`` (the official definition, without its
  indexing bug: every surviving hypothesis counts once);
- at ``<eos>`` the attachment is not scored (as in training, the ``<eos>`` reduce never enters the tape);
  log p(x) >= logsumexp over the final beam: a lower bound, recorded in the convention.

**Subword pieces** (SentencePiece vocabularies, Appendix C). The beam runs over pieces; a word's
log-probability is the difference of the prefix marginals at the ends of successive words (the sum of its
pieces'). Training trees always make a word's pieces a right-branching constituent, so the search keeps that
shape: a non-final piece shifts, the final piece reduces at least down to the word's first piece (both
decisions still scored by the attachment head). The best tree over pieces is merged into the tree over words
as Appendix C does (``merge_pieces``), which is always defined under this constraint. Under ``--word-prob
corrected`` (Pimentel & Meister 2024, ``experiments.evaluate.word_prob``) the marginals are taken where each word
*begins*, with the mass of B = the pieces that begin a word and ``<eos>``: D_k = logsumexp over the beam of
``log p(x_<k, y) + log P(B | x_<k, y)``, and word i's value is D at the next word's first piece (or ``<eos>``)
minus D at its own. (With one beam this is the convention's formula: the pieces' marginal, times the boundary
mass after the word over the mass before it.) The total stays the beam's bound.

Deviations from the official search, both removing double counting or undefined trees: the last token may
not shift and leave ``<eos>`` to close the stack (``close_at_last``), so label sequences and binary trees are
one-to-one; pieces keep the within-word shape above (the official search lets them attach anywhere, where
Appendix C's merge is undefined and training never puts mass). Both restrict the trees summed, so the total
stays a lower bound on log p(x). Under ``model.sentence_end: official`` (imported official checkpoints) the
sentence ends as the official ``eval_beam``: the last token may shift, ``<eos>`` attaches to ``<s>`` (its
log-probability counted and the reduce applied to the tape), then ``<eos>`` is read and log p(``</s>``) counted
(``_official_end``; equal to the official search at width 5, ``tests/golden/pushdown``).
``base-lm`` checkpoints are string models: ``ExactScorer`` reads the whole sentence in one pass. For the Dyck
test sets, ``next_token_logprobs`` gives the next-token distribution after a prefix: exact for ``base-lm``,
the beam's marginal for ``pushdown``.

Every sentence's ``best_tree`` is the highest-scoring tree of the final beam (argmax_y log p(x, y) over the
beam, §5), unlabelled (``X``) and binary, over words: the input of ``eval parse``.

``GoldScorer`` (``--method gold``) scores each sentence's gold tree, binarised and encoded as training encodes
it: log p(x, y_gold), the value the beam's bound is set beside. Its per-word values follow the beam's
accounting (a token's attachment is counted with the next token), so they telescope to the total.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from experiments.evaluate.scorer import OFFICIAL, Convention, SentenceScore
from experiments.evaluate.scorers.beams import check_beam_settings
from experiments.evaluate.word_prob import WORD_PROBS, boundary_ids, corrected_word_logprobs
from experiments.families.pushdown.methods import BEAM  # the method's default, the only one
from lightning_modules.data.encodings.choe_charniak import transform_tree
from lightning_modules.data.sentencepiece import BOUNDARY
from lightning_modules.data.tree import Tree, clean, drop_pos_tags, to_bracketed
from lightning_modules.data.vocab import EOS, PAD, SOS, SPECIALS, TokenVocab, WordVocab, terminal_vocab
from lightning_modules.errors import InputError
from lightning_modules.families.pushdown.encoding import attachments_to_tree, merge_pieces
from lightning_modules.families.pushdown.stack_states import attach_labels, legal_attachments, stack_from_top

FAMILIES = ("pushdown", "base-lm")
INCREMENTAL = ("difference of successive beam prefix marginals, log-sum-exp over the beam of p(prefix, y) "
               "p(x_k | prefix, y)")
OFFICIAL_END = ("; sentence end as the official eval_beam: the last word may shift, <eos> attaches to <s> (counted, "
                "and applied to the tape), then log p(</s> | <eos>)")
INCREMENTAL_CORRECTED = ("difference of successive beam prefix marginals with a word beginning next, log-sum-exp "
                         "over the beam of p(prefix, y) P(B | prefix, y) at every word's first piece and <eos>")


@dataclass(frozen=True)
class Encoded:
    """A sentence as the model reads it: ``<s>`` pieces ``<eos>`` ids, and where each word's pieces are."""

    ids: list[int]
    first: np.ndarray  # int64[n_tokens + 1]: position of the first piece of the word of token k (0 for <s>)
    word_end: np.ndarray  # bool[n_tokens + 1]: token k is the last piece of its word
    word_of: list[int]  # word index of every piece
    unknown: int  # words outside the vocabulary (unknown classes, or an <unk> piece)


class PushdownModel:
    """A Pushdown-family network with its vocabulary: words -> piece ids -> log-probs."""

    def __init__(self, module: Any, meta: dict[str, Any], device: str = "cpu"):
        self.module = module.to(device).eval()
        self.device = torch.device(device)
        self.family: str = meta["family"]
        self.config: dict[str, Any] = meta.get("config", {})  # the run's resolved config (data section: Dyck)
        payload = meta["vocab"]
        self.ids = {t: i for i, t in enumerate(payload["tokens"])}
        self.tokens: list[str] = list(payload["tokens"])
        self.vocab_kind: str = payload.get("terminals")
        # (word, index in the sentence) -> (pieces, unknown): only GPT-2 pieces (imported official checkpoints)
        # depend on the index (a word after the first is read with a leading space)
        self._pieces: Any
        if self.vocab_kind == "gpt2-bpe":
            from experiments.families.pushdown.tokens import gpt2_pieces

            split, unk = gpt2_pieces(payload), payload.get("unknown", "UNK")

            def bpe(word: str, index: int = 1) -> tuple[tuple[str, ...], bool]:
                raw = split(word, index)
                return tuple(p if p in self.ids else unk for p in raw), any(p not in self.ids for p in raw)

            self.words, self._pieces = None, bpe
            return
        terminals = None if self.vocab_kind == "dyck" else terminal_vocab(payload, "checkpoint vocabulary")
        self.words = terminals if isinstance(terminals, WordVocab) else None
        if terminals is None:  # Dyck tokens are the vocabulary itself: no unknown-word classes
            self._pieces = lambda t, index=1: ((t,), False)
        elif isinstance(terminals, WordVocab):
            self._pieces = lambda w, index=1: ((terminals.unkify(w),), w not in terminals.known)
        else:
            unk = payload.get("unknown", "<unk>")

            def pieces(word: str, index: int = 1) -> tuple[tuple[str, ...], bool]:
                raw = terminals.encode_words([word])[0]
                return tuple(p if p in self.ids else unk for p in raw), any(p not in self.ids for p in raw)

            self._pieces = pieces

    @classmethod
    def load(cls, checkpoint: str, device: str = "cpu") -> PushdownModel:
        from experiments.checkpoints import read_checkpoint
        from lightning_modules.families.pushdown.model import build

        ckpt = read_checkpoint(checkpoint, FAMILIES)
        meta = ckpt["synbench"]
        module = build({**meta["config"]["model"], "vocab_size": len(meta["vocab"]["tokens"])},
                       family=meta["family"])
        module.load_state_dict(ckpt["state_dict"])
        return cls(module, meta, device)

    def is_unknown(self, word: str, index: int = 1) -> bool:
        """Whether the word is outside the vocabulary (its unknown class, or an ``<unk>`` piece, stands in)."""
        return self._pieces(word, index)[1]

    def pieces(self, word: str, index: int = 1) -> tuple[str, ...]:
        """The vocabulary tokens a word at ``index`` is read as (its unknown class or ``<unk>`` pieces where
        needed; the index matters to GPT-2 pieces only)."""
        return self._pieces(word, index)[0]

    def encode(self, words: Sequence[str]) -> Encoded:
        """``<s>`` + every word's pieces + ``<eos>``, with the word structure the beam needs."""
        if self.vocab_kind == "dyck":
            self.prefix_ids(words)  # checks the tokens
        ids, first, word_end, word_of, unknown = [self.ids[SOS]], [0], [True], [], 0
        for i, word in enumerate(words):
            pieces, unk = self._pieces(word, i)
            unknown += unk
            start = len(ids)
            for j, piece in enumerate(pieces):
                ids.append(self.ids[piece])
                first.append(start)
                word_end.append(j == len(pieces) - 1)
                word_of.append(i)
        ids.append(self.ids[EOS])
        return Encoded(ids, np.array(first, dtype=np.int64), np.array(word_end), word_of, unknown)

    def prefix_ids(self, tokens: Sequence[str]) -> list[int]:
        """``<s> x_1..x_n`` ids of a prefix of tokens of the vocabulary (Dyck; ``InputError`` otherwise)."""
        unknown = [t for t in tokens if t not in self.ids or t in (SOS, EOS, PAD)]
        if unknown:
            raise InputError(f"token {unknown[0]!r} is not in the model's vocabulary", "prefix")
        return [self.ids[SOS], *(self.ids[t] for t in tokens)]


def _boundary(model: PushdownModel, word_prob: str) -> torch.Tensor | None:
    """The ids of B (pieces that begin a word, and ``<eos>``) under ``corrected`` word probabilities; None under
    ``sum-pieces``. A word-level vocabulary has one token per word: the convention does not apply."""
    if word_prob == WORD_PROBS[0]:
        return None
    if model.vocab_kind != "sentencepiece":
        raise InputError(f"a vocabulary of {model.vocab_kind} has one token per word: --word-prob {word_prob} "
                         "needs SentencePiece terminals", "--word-prob")
    return torch.tensor(boundary_ids(model.tokens, BOUNDARY, (EOS,)), device=model.device)


def _check(sentences: Sequence[Sequence[str]]) -> None:
    for k, words in enumerate(sentences):
        if not words:
            raise InputError("empty sentence", f"sentence {k}")


class ExactScorer:
    """``base-lm``: log p(w_i | w_<i) from one pass over the sentence (the tape is never read). With SentencePiece
    terminals and ``word_prob="corrected"`` (``experiments.evaluate.word_prob``) each word's pieces are corrected
    by the mass of B = the pieces that begin a word (``▁...``) and ``<eos>`` after the word over before it;
    ``total`` stays log p(x)."""

    def __init__(self, model: PushdownModel, word_prob: str = WORD_PROBS[0]):
        if model.family != "base-lm":
            raise InputError("a Pushdown-LM is a joint model: score it with the beam (--method beam)", "--method")
        self.model = model
        self.name = "base-lm"
        self.convention = Convention("exact", bound=False, word_prob=word_prob)
        self.boundary = _boundary(model, word_prob)

    @torch.no_grad()
    def score(self, sentences: Sequence[Sequence[str]]) -> list[SentenceScore]:
        _check(sentences)
        out = []
        for words in sentences:
            enc = self.model.encode(words)
            inputs = torch.tensor([enc.ids[:-1]], device=self.model.device)
            n = inputs.shape[1]
            tape = torch.zeros(1, n, n, dtype=torch.long, device=self.model.device)
            h = self.model.module.hidden_states(inputs, tape, torch.tensor([n], device=self.model.device))
            lp = self.model.module.word_logits(h[0]).float().log_softmax(-1)
            picked = lp[torch.arange(n), torch.tensor(enc.ids[1:], device=self.model.device)].double().cpu().numpy()
            per_word = np.bincount(enc.word_of, weights=picked[:-1], minlength=len(words))
            if self.boundary is not None:  # log P(B | prefix) before every piece and after the last
                boundary = lp[:, self.boundary].logsumexp(-1).double().cpu().numpy()
                per_word = np.array(corrected_word_logprobs(picked[:-1], enc.word_of, boundary, float(boundary[0])))
            out.append(SentenceScore(tuple(words), tuple(float(x) for x in per_word), float(picked.sum()),
                                     float(picked[-1]), unknown_words=enc.unknown))
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


class _Beams:
    """The hypotheses of G sentences searched in lockstep, on the model's device, ``slots`` per sentence (row
    g * slots + i of the decoding state is sentence g's slot i): their stack states (``StackStates``'s
    ``depth``, ``open`` and ``attachment``, [G, slots, W]) and scores log p(prefix, y) [G, slots] (float64).
    The slots follow a bound known on the host (``advance``), so no hypothesis count is read back: until a
    sentence's beam is full, the slots beyond its hypotheses are empty (score -inf, never chosen before a
    hypothesis, never counted in a marginal)."""

    def __init__(self, depth: torch.Tensor, open_: torch.Tensor, attachment: torch.Tensor, scores: torch.Tensor):
        self.depth, self.open, self.attachment, self.scores = depth, open_, attachment, scores

    @classmethod
    def start(cls, count: int, width: int, device: torch.device) -> _Beams:
        """``count`` sentences of at most ``width - 2`` tokens, one hypothesis each: ``<s>`` read."""
        open_ = torch.zeros((count, 1, width), dtype=torch.bool, device=device)
        open_[..., 0] = True
        zeros = torch.zeros((count, 1, width), dtype=torch.long, device=device)
        return cls(zeros, open_, zeros.clone(), torch.zeros((count, 1), dtype=torch.float64, device=device))

    def __len__(self) -> int:
        return self.scores.shape[0]

    @property
    def slots(self) -> int:
        return self.scores.shape[1]

    def part(self, sentences: slice) -> _Beams:
        """These sentences' hypotheses (views)."""
        return _Beams(self.depth[sentences], self.open[sentences], self.attachment[sentences], self.scores[sentences])

    def advance(self, k: int, with_word: torch.Tensor, attach: torch.Tensor, legal: torch.Tensor, beam: int
                ) -> tuple[_Beams, torch.Tensor]:
        """Every hypothesis x every legal attachment of token k, scored ``with_word`` [G, slots] (the scores with
        the token's log-prob) + ``attach`` [G, slots, >= k + 1] (float64) where ``legal`` [G, slots, k + 1]; each
        sentence's ``beam`` best, best first. Returns them and the slot each extends [G, slots'].

        Ties go to the lower (hypothesis, label) first: numpy's stable order, which the host search used when
        nothing was pruned (when it pruned, ``argpartition`` chose among candidates tied at the cut, in no
        documented order). The new slot count ``min(beam, slots * k)`` bounds the candidates (token k has at
        most k attachments); an empty slot extends any slot by a shift (always legal) and stays at -inf.
        """
        width = k + 1
        candidates = with_word[..., None] + torch.where(legal, attach[..., :width], -math.inf)
        scores, top = candidates.flatten(1).sort(dim=1, descending=True, stable=True)
        slots = min(beam, self.slots * k)
        scores, top = scores[:, :slots], top[:, :slots]
        origins = top.div(width, rounding_mode="floor")
        labels = torch.where(scores > -math.inf, top % width, k)
        pick = origins[..., None].expand(-1, -1, self.depth.shape[-1])
        out = _Beams(self.depth.gather(1, pick), self.open.gather(1, pick), self.attachment.gather(1, pick), scores)
        attach_labels(out.depth, out.open, out.attachment, k, labels)
        return out, origins


@dataclass
class _Batch:
    """Sentences searched in lockstep, the longest first (those still going at a token are a prefix): what the
    word steps read on the device (tokens and word structure, ``Encoded``'s padded to ``[B, L + 2]``) and what
    they record there for the results, read back once when all have ended."""

    encoded: list[Encoded]
    ids: torch.Tensor  # int64 [B, L + 2]: <s> pieces <eos> (0 after a sentence's <eos>)
    first: torch.Tensor  # int64 [B, L + 2]
    word_end: torch.Tensor  # bool [B, L + 2]
    n_tokens: torch.Tensor  # int64 [B]
    # logsumexp over the beam of log p(x_<=k, y) at token k (at k = n + 1, <eos>: the total)
    marginals: torch.Tensor  # float64 [B, L + 2]
    # corrected: logsumexp over the beam of log p(x_<k, y) + log P(B | x_<k, y) at token k
    begins: torch.Tensor  # float64 [B, L + 2]
    best_logprob: torch.Tensor  # float64 [B]: the final beam's best
    attachment: torch.Tensor  # int64 [B, L + 2]: its attachments
    beam_final: torch.Tensor  # int64 [B]: hypotheses in the final beam

    @classmethod
    def of(cls, encoded: list[Encoded], device: torch.device) -> _Batch:
        """The sentences' tokens and word structure on the device (one transfer), the records empty."""
        width = max(len(e.ids) for e in encoded)
        ids, first, word_end = (np.zeros((len(encoded), width), dtype=dtype) for dtype in (np.int64, np.int64, bool))
        for b, e in enumerate(encoded):
            ids[b, : len(e.ids)], first[b, : len(e.first)], word_end[b, : len(e.word_end)] = e.ids, e.first, e.word_end
        n_tokens = np.array([len(e.ids) - 2 for e in encoded])
        ids_t, first_t, end_t, n_t = (torch.from_numpy(a).to(device) for a in (ids, first, word_end, n_tokens))
        values = torch.zeros((len(encoded), width), dtype=torch.float64, device=device)
        return cls(encoded, ids_t, first_t, end_t, n_t, values, values.clone(),
                   torch.zeros(len(encoded), dtype=torch.float64, device=device),
                   torch.zeros((len(encoded), width), dtype=torch.long, device=device),
                   torch.zeros(len(encoded), dtype=torch.long, device=device))

    def end(self, sentences: slice, final: torch.Tensor, beams: _Beams) -> None:
        """Record the final beams ``beams`` of these sentences, scored ``final`` [E, slots]."""
        best = final.argmax(1, keepdim=True)  # the first maximum, as numpy's
        self.best_logprob[sentences] = final.gather(1, best)[:, 0]
        pick = best[..., None].expand(-1, -1, beams.attachment.shape[-1])
        self.attachment[sentences] = beams.attachment.gather(1, pick)[:, 0]
        self.beam_final[sentences] = final.isfinite().sum(1)


class BeamScorer:
    """``pushdown``: word-synchronous beam search over attachment decisions (see the module docstring)."""

    def __init__(self, model: PushdownModel, beam: int = BEAM.options["beam"], word_prob: str = WORD_PROBS[0],
                 batch_size: int = 8):
        if model.family != "pushdown":
            raise InputError("beam search over attachments needs a pushdown checkpoint", "--method")
        check_beam_settings(beam, batch_size=batch_size)
        self.model, self.beam, self.batch_size = model, beam, batch_size
        self.name = "pushdown"
        self.boundary = _boundary(model, word_prob)
        # model.sentence_end: official (imported checkpoints): the official eval_beam's end, see _step
        self.official = model.config.get("model", {}).get("sentence_end", "eos") == "official"
        self.convention = Convention("beam", bound=True, beam=beam, word_prob=word_prob,
                                     incremental=(INCREMENTAL if self.boundary is None else INCREMENTAL_CORRECTED)
                                     + (OFFICIAL_END if self.official else ""))

    def score(self, sentences: Sequence[Sequence[str]]) -> list[SentenceScore]:
        """Each sentence's search; ``batch_size`` sentences of similar length advance together (their
        hypotheses in one ``step`` per token; the numbers do not depend on it)."""
        _check(sentences)
        order = sorted(range(len(sentences)), key=lambda k: -len(sentences[k]))
        out: list[SentenceScore | None] = [None] * len(sentences)
        for lo in range(0, len(order), self.batch_size):
            batch = order[lo : lo + self.batch_size]
            for k, score in zip(batch, self._search([sentences[k] for k in batch])):
                out[k] = score
        return out  # type: ignore[return-value]

    @torch.no_grad()
    def _search(self, sentences: Sequence[Sequence[str]]) -> list[SentenceScore]:
        """The sentences' searches in lockstep on the model's device (``_lockstep``), then their results."""
        encoded = [self.model.encode(words) for words in sentences]
        order = sorted(range(len(sentences)), key=lambda b: -len(encoded[b].ids))  # the longest first
        batch = _Batch.of([encoded[b] for b in order], self.model.device)
        self._lockstep(batch)
        out: list[SentenceScore | None] = [None] * len(sentences)
        for b, score in zip(order, self._results([sentences[b] for b in order], batch)):
            out[b] = score
        return out  # type: ignore[return-value]

    def _lockstep(self, batch: _Batch) -> None:
        """Every token's word step for the batch, on the model's device with no value read back to the host: at
        token k one ``step`` over every hypothesis of every sentence still going (all read position k - 1),
        the marginals recorded, the sentences at their ``<eos>`` ended (``_Batch.end``), the others' candidates
        pruned to their beams (``_Beams.advance``) and the decoding state reordered."""
        module, device = self.model.module, self.model.device
        lengths = [len(e.ids) - 2 for e in batch.encoded]  # tokens per sentence, the longest first
        beams = _Beams.start(len(lengths), lengths[0] + 2, device)
        decoding = module.start(lengths[0] + 1 + self.official)  # official: <eos> is read too
        for k in range(1, lengths[0] + 2):  # token k; k = n + 1 is a sentence's <eos>
            going, slots, on = len(beams), beams.slots, sum(n >= k for n in lengths)  # on: going after k
            ids = batch.ids[:going, k - 1 : k + 1, None].expand(going, 2, slots)
            next_words = ids[:, 1].flatten()
            lp_words, lp_attach, decoding = module.step(decoding, ids[:, 0].flatten(),
                                                        beams.depth.flatten(0, 1)[:, :k], next_words)
            attach = lp_attach.view(going, slots, -1)
            with_word = beams.scores + lp_words.gather(1, next_words[:, None]).view(going, slots).double()
            if self.boundary is not None:
                begins = lp_words[:, self.boundary].logsumexp(-1).double().view(going, slots)
                batch.begins[:going, k] = torch.logsumexp(beams.scores + begins, 1)
            if on < going:  # the last sentences read <eos>
                ending = slice(on, going)
                final = with_word[ending]
                if self.official:
                    final = final + self._official_end(decoding, beams.part(ending), attach[ending, :, 0], k,
                                                       slice(on * slots, going * slots))
                batch.marginals[ending, k] = torch.logsumexp(final, 1)
                batch.end(ending, final, beams.part(ending))
            if not on:
                break
            batch.marginals[:on, k] = torch.logsumexp(with_word[:on], 1)
            closing = False if self.official or k == 1 else (batch.n_tokens[:on] == k)[:, None]
            legal = legal_attachments(beams.open[:on], k, closing)
            # pieces: a non-final piece shifts, the final piece closes its word (down to its first piece)
            word_end, first = batch.word_end[:on, k, None, None], batch.first[:on, k, None, None]
            columns = torch.arange(k + 1, device=device)
            legal &= torch.where(word_end, columns <= first, columns == k)
            beams, origins = beams.part(slice(0, on)).advance(k, with_word[:on], attach[:on].double(), legal,
                                                              self.beam)
            decoding = decoding.select((torch.arange(on, device=device)[:, None] * slots + origins).flatten())

    def _results(self, sentences: Sequence[Sequence[str]], batch: _Batch) -> list[SentenceScore]:
        """Each sentence's score from what the word steps recorded (read back once): the incremental values,
        the total (the marginal at ``<eos>``) and the final beam's best tree."""
        marginals, begins, best_logprob, attachments, beam_final = (
            t.cpu().tolist() for t in (batch.marginals, batch.begins, batch.best_logprob, batch.attachment,
                                       batch.beam_final))
        out = []
        for b, (words, enc) in enumerate(zip(sentences, batch.encoded)):
            n = len(enc.ids) - 2
            prefix, word_logprobs = 0.0, []  # log p(x_<k) estimate at the last word end
            for k in range(1, n + 1):
                if enc.word_end[k]:
                    word_logprobs.append(marginals[b][k] - prefix)
                    prefix = marginals[b][k]
            if self.boundary is not None:  # at every word's first piece and <eos>
                word_logprobs = np.diff([begins[b][k] for k in range(1, n + 2) if k == n + 1 or enc.first[k] == k]
                                        ).tolist()
            total, attachment = marginals[b][n + 1], attachments[b][: n + 1]
            tree = merge_pieces(attachments_to_tree([*attachment, 0], [str(t) for t in enc.ids[1:-1]]),
                                enc.word_of, list(words))
            out.append(SentenceScore(tuple(words), tuple(word_logprobs), total, total - prefix,
                                     best_tree=tree if isinstance(tree, str) else to_bracketed(tree),
                                     unknown_words=enc.unknown,
                                     extra={"attachment": attachment, "beam_final": beam_final[b],
                                            "best_logprob": best_logprob[b]}))
        return out

    def _official_end(self, decoding: Any, beams: _Beams, eos_attach: torch.Tensor, k: int, rows: slice
                      ) -> torch.Tensor:
        """The official search's end per hypothesis [E, slots] (float64) of sentences reading ``<eos>`` at k,
        rows ``rows`` of ``decoding``: ``<eos>``'s attachment to ``<s>`` (forced, its log-prob ``eos_attach``
        counted), that reduce applied to the tape (every constituent on the stack merged with ``<s>``), then
        ``<eos>`` read and log p(``</s>``) counted."""
        from experiments.families.pushdown.official import END

        module, device, end = self.model.module, self.model.device, self.model.ids[END]
        own = decoding.select(torch.arange(rows.start, rows.stop, device=device))
        # the j-th constituent from the top (<s>'s the last) takes part in R - j + 1 merges; <eos> in all R
        from_top = stack_from_top(beams.open, k)
        merges = from_top[..., :1]
        tape = torch.cat([beams.depth[..., :k] + merges - from_top + 1, beams.depth[..., k : k + 1] + merges], -1)
        count = rows.stop - rows.start
        lp_words, _, _ = module.step(own, torch.full((count,), self.model.ids[EOS], device=device),
                                     tape.flatten(0, 1), torch.full((count,), end, device=device))
        return (eos_attach + lp_words[:, end].view_as(eos_attach)).double()

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
        beams = _Beams.start(1, n + 2, device)
        decoding = module.start(n + 1)
        for k in range(1, n + 2):
            count = beams.slots
            word = ids[k] if k <= n else ids[0]  # after the prefix the attachment head's output is unused
            lp_words, lp_attach, decoding = module.step(
                decoding, torch.full((count,), ids[k - 1], device=device), beams.depth[0, :, :k],
                torch.full((count,), word, device=device))
            lp = lp_words.double()
            if k == n + 1:
                scores = beams.scores[0]
                return (torch.logsumexp(scores[:, None] + lp, 0) - torch.logsumexp(scores, 0)).cpu().numpy()
            beams, origins = beams.advance(k, beams.scores + lp[None, :, ids[k]], lp_attach.double()[None],
                                           legal_attachments(beams.open, k), self.beam)
            decoding = decoding.select(origins[0])
        raise AssertionError("unreachable")


class GoldScorer:
    """``pushdown`` on gold trees: log p(x, y_gold) with the gold attachments, batched over sentences."""

    def __init__(self, model: PushdownModel, source: Any, batch_size: int = 32):
        if model.family != "pushdown":
            raise InputError("gold-tree scoring needs a pushdown checkpoint (a Base-LM is scored exactly)", "--method")
        self.model, self.source, self.batch_size = model, source, batch_size
        self.transform: str = model.config.get("data", {}).get("tree_transform", "none")
        self.vocab = TokenVocab(model.tokens[len(SPECIALS):])
        self.splits_structure = True  # its scores carry extra["structure_logprob"], the attachments' share
        self.name = "pushdown"
        # model.sentence_end: official (imported checkpoints): the official eval_gold's total, which also counts
        # </s> after <eos> and <eos>'s attachment, beside the common one (extra[OFFICIAL]: ppl_official)
        self.sentence_end: str = model.config.get("model", {}).get("sentence_end", "eos")
        official = (", beside it the official eval_gold's total (ppl_official: log p(</s> | <eos>) and <eos>'s "
                    "attachment to <s> counted too)") if self.sentence_end == "official" else ""
        self.convention = Convention("gold", bound=True, incremental="gold attachments; a token's attachment "
                                     "counted with the next token (as the beam counts it)" + official)

    def score(self, sentences: Sequence[Sequence[str]]) -> list[SentenceScore]:
        from lightning_modules.families.pushdown.batch import collate

        _check(sentences)
        trees = self.source(sentences)
        out = []
        for start in range(0, len(sentences), self.batch_size):
            block = list(range(start, min(start + self.batch_size, len(sentences))))
            encoded = [self._encode(self._tree(trees[k], sentences[k], k)) for k in block]
            if self.sentence_end == "official":
                from experiments.families.pushdown.official import END, official_logprobs

                values = official_logprobs(self.model.module, encoded, self.model.ids[END])
            else:
                batch = collate(encoded).to(self.model.device)
                with torch.no_grad():
                    lp_words, lp_attach = self.model.module.gold_logprobs(batch)
                lp_words, lp_attach = lp_words.double().cpu().numpy(), lp_attach.double().cpu().numpy()
                values = [(lp_words[row, : len(e.ids) - 1], lp_attach[row, : len(e.ids) - 2])
                          for row, e in enumerate(encoded)]
            for (lp_words_k, lp_attach_k), k in zip(values, block):
                words, enc = sentences[k], self.model.encode(sentences[k])
                n = len(enc.ids) - 1  # predictions: the n - 1 tokens and <eos>
                # token t's attachment is decided after it, so it joins token t + 1's value (the beam's count)
                per_token = lp_words_k[:n] + np.concatenate([[0.0], lp_attach_k[: n - 1]])
                per_word = np.bincount(enc.word_of, weights=per_token[:-1], minlength=len(words))
                extra = {"structure_logprob": float(lp_attach_k[: n - 1].sum())}
                if self.sentence_end == "official":  # </s> after <eos> and <eos>'s attachment, beside
                    extra[OFFICIAL] = float(per_token.sum() + lp_words_k[n:].sum() + lp_attach_k[n - 1:].sum())
                out.append(SentenceScore(tuple(words), tuple(float(x) for x in per_word), float(per_token.sum()),
                                         float(per_token[-1]), unknown_words=enc.unknown, extra=extra))
        return out

    def _encode(self, tree: Tree) -> Any:
        """The tree's ``PushdownSentence``, every word split into its pieces as the model reads it."""
        from lightning_modules.families.pushdown.batch import PushdownSentence
        from lightning_modules.families.pushdown.encoding import encode

        example = encode(tree, split=self.model.pieces)
        return PushdownSentence(self.vocab.sentence_ids(example.leaves), example.attachment, example.spans,
                                len(tree.leaves()))

    def _tree(self, given: Sequence[Any], words: Sequence[str], k: int) -> Tree:
        """The sentence's gold tree as training reads it (cleaned, POS tags dropped, the run's transform)."""
        tree = given[0] if given else None
        if not isinstance(tree, Tree):
            raise InputError(f"pushdown scores constituency trees, not {type(tree).__name__}", f"sentence {k}")
        tree = transform_tree(drop_pos_tags(clean(tree)), self.transform)
        if tree.leaves() != list(words):
            raise InputError("the gold tree's words differ from the sentence's", f"sentence {k}")
        return tree

