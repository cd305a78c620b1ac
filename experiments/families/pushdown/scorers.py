"""Scorers of Pushdown Layers checkpoints (Murty et al. 2023): word-synchronous beam search over attachments.

A Pushdown-LM is a joint model p(x, y): at input position t it predicts the next word x_{t+1} and then, given
that word, its attachment r_{t+1} (reduce with the constituent ending at position c, or shift), which
updates the stack tape every later position reads. ``BeamScorer`` keeps the ``beam`` best attachment
histories per sentence (§3.4, beam 300 in the paper), all hypotheses of ``batch_size`` sentences batched in
one incremental step per token (``PushdownLM.step``: only the newest position is computed, every earlier
position's keys and values are cached and reordered with the beam; each sentence prunes its own hypotheses):

- candidates at word k: every hypothesis x every legal attachment of x_k (``StackStates.legal``), scored
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

from collections.abc import Sequence
from dataclasses import dataclass, field
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
from lightning_modules.families.pushdown.encoding import StackStates, attachments_to_tree, merge_pieces
from lightning_modules.numeric import logsumexp

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


@dataclass
class _Search:
    """One sentence's beam search in progress: its hypotheses (attachment states, scores), the prefix marginal at
    the last word end, the values so far, and its result once ``<eos>`` is scored."""

    words: Sequence[str]
    enc: Encoded
    states: StackStates = field(init=False)
    scores: np.ndarray = field(default_factory=lambda: np.zeros(1))
    prefix: float = 0.0  # log p(x_<k) estimate at the last word boundary
    word_logprobs: list[float] = field(default_factory=list)
    with_boundary: list[float] = field(default_factory=list)  # corrected: at every word's first piece and <eos>
    result: SentenceScore | None = None

    def __post_init__(self) -> None:
        self.states = StackStates(self.n)

    @property
    def n(self) -> int:
        """Tokens (pieces) between ``<s>`` and ``<eos>``."""
        return len(self.enc.ids) - 2


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
        """The sentences' searches in lockstep: at token k one ``step`` over every hypothesis of every sentence
        still going (all read position k - 1), then each sentence's own candidates and pruning (``_step``)."""
        module, device = self.model.module, self.model.device
        searches = [_Search(words, self.model.encode(words)) for words in sentences]
        decoding = module.start(max(s.n for s in searches) + 1 + self.official)  # official: <eos> is read too
        going = searches
        for k in range(1, max(s.n for s in searches) + 2):  # token k; k = n + 1 is a sentence's <eos>
            counts = [len(s.scores) for s in going]
            next_words = torch.tensor([s.enc.ids[k] for s, c in zip(going, counts) for _ in range(c)], device=device)
            lp_words, lp_attach, decoding = module.step(
                decoding, torch.tensor([s.enc.ids[k - 1] for s, c in zip(going, counts) for _ in range(c)],
                                       device=device),
                torch.from_numpy(np.concatenate([s.states.depth[:, :k] for s in going])).to(device), next_words)
            # what the pruning reads, moved to the host once per step for all sentences (not once per sentence)
            picked = lp_words.gather(1, next_words[:, None])[:, 0].double().cpu().numpy()
            attach = lp_attach.double().cpu().numpy()
            origins, still, offset = [], [], 0
            for s, count in zip(going, counts):
                rows = slice(offset, offset + count)
                own = self._step(s, k, picked[rows], attach[rows], lp_words[rows], lp_attach[rows], decoding, rows)
                if own is not None:
                    origins.append(own + offset)
                    still.append(s)
                offset += count
            if not still:
                break
            going = still
            decoding = decoding.select(torch.from_numpy(np.concatenate(origins)).to(device))
        return [s.result for s in searches]  # type: ignore[misc]

    def _step(self, s: _Search, k: int, picked: np.ndarray, attach: np.ndarray, lp_words: torch.Tensor,
              lp_attach: torch.Tensor, decoding: Any, rows: slice) -> np.ndarray | None:
        """Token k of sentence ``s`` from its hypotheses' distributions: its marginals, then every hypothesis x
        every allowed attachment, pruned to the beam; returns the hypothesis each survivor extends, or None at
        ``<eos>`` (``s.result`` set). ``picked`` [count] log p(x_k | ...) and ``attach`` [count, k + 1] the
        attachment log-probs on the host (float64), ``lp_words`` and ``lp_attach`` the same on the device (the
        boundary mass and the official end read them). Its hypotheses are ``rows`` of ``decoding``."""
        ids, n, enc = s.enc.ids, s.n, s.enc
        with_word = s.scores + picked
        if self.boundary is not None and (k == n + 1 or enc.first[k] == k):
            begins = lp_words[:, self.boundary].logsumexp(-1).double().cpu().numpy()
            s.with_boundary.append(logsumexp(s.scores + begins))
        if k == n + 1:
            if self.official:
                own = decoding.select(torch.arange(rows.start, rows.stop, device=self.model.device))
                with_word = with_word + self._official_end(own, s.states, lp_attach, ids[k])
            marginal = logsumexp(with_word)
            best = int(np.argmax(with_word))
            attachment = s.states.attachment[best, : n + 1].tolist()
            tree = merge_pieces(attachments_to_tree([*attachment, 0], [str(t) for t in ids[1:-1]]),
                                enc.word_of, list(s.words))
            word_logprobs = np.diff(s.with_boundary).tolist() if s.with_boundary else s.word_logprobs
            s.result = SentenceScore(tuple(s.words), tuple(word_logprobs), marginal, marginal - s.prefix,
                                     best_tree=tree if isinstance(tree, str) else to_bracketed(tree),
                                     unknown_words=enc.unknown,
                                     extra={"attachment": attachment, "beam_final": len(s.scores),
                                            "best_logprob": float(with_word[best])})
            return None
        if enc.word_end[k]:
            marginal = logsumexp(with_word)
            s.word_logprobs.append(marginal - s.prefix)
            s.prefix = marginal
        legal = s.states.legal(close_at_last=not self.official)
        if not enc.word_end[k]:
            legal[:, :k] = False  # a non-final piece shifts
        elif enc.first[k] < k:
            legal[:, enc.first[k] + 1:] = False  # the final piece closes its word
        s.states, s.scores, origins = self._advance(s.states, with_word, attach, legal)
        return origins

    def _official_end(self, decoding: Any, states: StackStates, lp_attach: torch.Tensor, eos: int) -> np.ndarray:
        """The official search's end per hypothesis: ``<eos>``'s attachment to ``<s>`` (forced, its log-prob
        counted), that reduce applied to the tape (every constituent on the stack merged with ``<s>``), then
        ``<eos>`` read and log p(``</s>``) counted."""
        from experiments.families.pushdown.official import END

        module, device, end = self.model.module, self.model.device, self.model.ids[END]
        k = states.position + 1  # <eos>
        # the j-th constituent from the top (<s>'s the last) takes part in R - j + 1 merges; <eos> in all R
        from_top = np.cumsum(states.open[:, k - 1 :: -1], axis=1)[:, ::-1]
        merges = from_top[:, :1]
        tape = np.concatenate([states.depth[:, :k] + merges - from_top + 1, states.depth[:, k:k + 1] + merges], 1)
        count = len(states)
        lp_words, _, _ = module.step(decoding, torch.full((count,), eos, device=device),
                                     torch.from_numpy(tape).to(device), torch.full((count,), end, device=device))
        return (lp_attach[:, 0] + lp_words[:, end]).double().cpu().numpy()

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
        decoding = module.start(n + 1)
        scores = np.zeros(1)
        for k in range(1, n + 2):
            count = len(scores)
            word = ids[k] if k <= n else ids[0]  # after the prefix the attachment head's output is unused
            lp_words, lp_attach, decoding = module.step(
                decoding, torch.full((count,), ids[k - 1], device=device),
                torch.from_numpy(states.depth[:, :k]).to(device), torch.full((count,), word, device=device))
            lp = lp_words.double().cpu()
            if k == n + 1:
                joint = torch.from_numpy(scores)[:, None] + lp
                return (torch.logsumexp(joint, dim=0) - torch.logsumexp(torch.from_numpy(scores), dim=0)).numpy()
            states, scores, origins = self._advance(states, scores + lp[:, ids[k]].numpy(),
                                                    lp_attach.double().cpu().numpy(),
                                                    states.legal(close_at_last=False))
            decoding = decoding.select(torch.from_numpy(origins).to(device))
        raise AssertionError("unreachable")

    def _advance(self, states: StackStates, with_word: np.ndarray, attach: np.ndarray, legal: np.ndarray
                 ) -> tuple[StackStates, np.ndarray, np.ndarray]:
        """Every hypothesis x every allowed attachment of the next token; the ``beam`` best, best first.

        ``with_word`` [count] the hypotheses' scores with the token's log-prob; ``attach`` [count, >= k + 1] their
        attachment log-probs (float64, host); ``legal`` [count, k + 1] the attachments allowed. Returns the new
        states, their scores and the hypothesis each extends.
        """
        k = states.position + 1
        cand = with_word[:, None] + np.where(legal, attach[:, : k + 1], -np.inf)
        flat = cand.ravel()
        keep = min(self.beam, int(np.isfinite(flat).sum()))
        top = np.argpartition(-flat, keep - 1)[:keep] if keep < flat.size else np.arange(flat.size)
        top = top[np.isfinite(flat[top])]
        top = top[np.argsort(-flat[top], kind="stable")]
        origins, labels = np.divmod(top, k + 1)
        states = states.select(origins)
        states.attach(labels)
        return states, flat[top], origins


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

