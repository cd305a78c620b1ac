"""``hf:PATH`` model sources: any locally saved ``transformers`` causal LM, scored exactly as a string model.

PATH is a folder written by ``save_pretrained`` (``config.json``, the weights, the tokenizer files); nothing is
ever downloaded. A text is scored under one of two **conventions** (``--hf-convention``, ``hf_convention:`` in
a spec's model entry; recorded in every result), which build the model's inputs as the two common tools do:

- ``minicons`` (the default): minicons' ``IncrementalLMScorer.sequence_score`` with the BOS token prepended,
  for every task. The raw text through the model's own tokenizer *without* special tokens, conditioned on the
  model's BOS token (``bos_token_id``, else ``eos_token_id``, e.g. GPT-2's ``<|endoftext|>``)::

      log p(text) = Σ_j log p(piece_j | BOS, piece_1 .. piece_j-1)      (natural log, no end-of-sentence term)

  A text longer than the model's positions (BOS included) is an error, never truncated.
- ``lm-eval``: the requests lm-evaluation-harness (0.4) builds for its ``HFLM`` model. **BLiMP** is its
  ``blimp_*`` multiple-choice task: each sentence is a continuation ``" " + sentence`` (the task's
  ``target_delimiter``), tokenized without special tokens, after an empty context, i.e. the prefix token
  (BOS, else EOS; the continuation's own first piece instead when it is that token); the delimiter makes the
  first word's piece the space-prefixed one (GPT-2: ``ĠThe``, not ``The``). **Every other text** (perplexity
  sentences, SyntaxGym conditions; lm-eval has no SyntaxGym task) is a ``loglikelihood_rolling`` request, as
  its perplexity tasks (``wikitext``) score a document: the text through the tokenizer *with* its default
  special tokens, in disjoint windows of the model's context length (lm-eval's ``max_length``: ``n_positions``,
  ``max_position_embeddings`` or ``n_ctx`` of the config, else the tokenizer's ``model_max_length``, else
  2048), the first conditioned on the prefix token, each later one on the pieces before it, so a long text is
  scored whole.

**Alignment of pieces to words.** The evaluator's words (``Text.words``, with character spans in ``Text.text``,
in text order) get the sum of their scored pieces, found by the tokenizer's character offsets: a piece belongs
to the word whose span contains the piece's first non-whitespace character; a piece of whitespace only, or whose
first non-whitespace character lies in no word (a special token the tokenizer adds: an empty span), goes to the
next word starting after it (the last word if none). Every piece goes to exactly one word, so
``sum(word_logprobs) == total`` up to float rounding. SyntaxGym regions are separated by spaces and a byte-level
BPE piece (GPT-2's) is either whitespace or one optional leading space followed by non-space characters, so it
never crosses a region boundary: region sums are exact.

**Batching never changes a number** beyond float noise: the model reads each request's context and all but the
last piece of its continuation; requests are sorted by length, right-padded and run with an attention mask and
explicit position ids (padding comes after every real piece, so a causal model never attends to it, and
positions never shift); the log-softmax is taken in float32 whatever the weights' precision.

**Word probabilities** (``--word-prob``, ``experiments.evaluate.word_prob``): ``sum-pieces`` (the default, as
above) or ``corrected`` (Pimentel & Meister 2024; the minicons convention only: lm-eval's requests sum pieces).
The pieces that begin a word are those whose token string starts with the tokenizer's word mark (the mark its
pieces put on the second word of ``a b``: GPT-2's ``Ġ``, SentencePiece's ``▁``), plus the EOS token; a first
word without the mark is divided by the probability of a first piece of the base vocabulary (ids below
``tokenizer.vocab_size``) that is not a word beginning, or EOS (the ``wordsprobability`` package's sets; it
counts EOS twice there when EOS is in the base vocabulary, as GPT-2's is: we count it once). The model then also
reads the last piece, for the boundary after the last word, so a text may have one piece fewer. ``total``
stays log p(text), the pieces' sum: the convention changes how a text is divided into words, not its
probability.
"""

from __future__ import annotations

import math
import os
from bisect import bisect_left, bisect_right
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import torch

from experiments.evaluate.results import file_sha256
from experiments.evaluate.scorer import Convention, SentenceScore, Text, check_sentences, text_of_words
from experiments.evaluate.scorers import HF_CONVENTIONS as CONVENTIONS
from experiments.evaluate.scorers import HF_PREFIX, hub
from experiments.evaluate.word_prob import WORD_PROBS, check, corrected_word_logprobs, describe
from lightning_modules.errors import InputError

# huggingface_hub reads this when it is first imported (transformers is imported lazily, in ``load``): never
# reach the network, on top of ``local_files_only=True`` on every call
os.environ["HF_HUB_OFFLINE"] = "1"

PRECISIONS = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}
# tokenizer files beside the class's own vocabulary files (``vocab_files_names``) that change its output
TOKENIZER_CONFIGS = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "added_tokens.json")
LM_EVAL_MAX_LENGTH = 2048  # lm-eval's context length when neither the config nor the tokenizer gives one
TOKENIZER_INFINITY = 1000000000000000019884624838656  # transformers' "no limit" model_max_length
# (context, continuation) pieces: log p(continuation | context) from one forward pass over both
Window = tuple[list[int], list[int]]


def load(source: str, device: str = "cpu", precision: str = "float32", batch_size: int = 16,
         convention: str = CONVENTIONS[0], word_prob: str = WORD_PROBS[0]) -> HFScorer:
    """The Scorer of ``hf:PATH`` (or a bare PATH; or ``hf:ORG/NAME[@REVISION]`` from the local Hugging Face cache,
    ``scorers/hub.py``) under ``convention`` (``minicons`` or ``lm-eval``), with words' probabilities by
    ``word_prob`` (``sum-pieces`` or ``corrected``); every problem is an ``InputError`` at the folder."""
    folder = Path(source.removeprefix(HF_PREFIX)).expanduser()
    where = str(folder)
    hub_model = hub.hub_model(source)
    snapshot = hub.resolve(hub_model) if hub_model is not None else None
    if snapshot is not None:
        folder, where = snapshot.folder, snapshot.model.source
    if convention not in CONVENTIONS:
        raise InputError(f"unknown convention {convention!r}; expected {' or '.join(CONVENTIONS)}", "--hf-convention")
    if check(word_prob) != WORD_PROBS[0] and convention != CONVENTIONS[0]:
        raise InputError(f"the {convention} convention reproduces its requests, which sum pieces: --word-prob "
                         f"{word_prob} needs --hf-convention {CONVENTIONS[0]}", "--word-prob")
    if not folder.exists():
        raise InputError("model folder not found", where)
    if not folder.is_dir() or not (folder / "config.json").is_file():
        raise InputError("not a transformers model folder: an hf: source is a folder with the config.json, "
                         "weights and tokenizer that save_pretrained writes", where)
    dtype = _dtype(precision, device, where)
    from transformers import AutoConfig, AutoModelForCausalLM
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

    with _no_progress_bars():
        try:
            config = AutoConfig.from_pretrained(folder, local_files_only=True)
        except (OSError, ValueError) as e:
            raise InputError(f"cannot read config.json: {e}", where) from None
        # AutoModelForCausalLM happily loads e.g. a saved BertForMaskedLM as a BertLMHeadModel that attends to
        # the future: the architectures save_pretrained recorded must include a causal LM
        causal = {name for names in MODEL_FOR_CAUSAL_LM_MAPPING_NAMES.values()
                  for name in ([names] if isinstance(names, str) else names)}
        if config.architectures and not causal.intersection(config.architectures):
            raise InputError(f"not a causal LM: config.json declares {', '.join(config.architectures)}", where)
        tokenizer = _tokenizer(folder, where)
        try:
            model = AutoModelForCausalLM.from_pretrained(folder, config=config, dtype=dtype, local_files_only=True)
        except (OSError, ValueError) as e:
            raise InputError(f"cannot load a causal LM: {e}", where) from None
    return HFScorer(folder, model.to(device).eval(), tokenizer, precision, batch_size, convention, word_prob,
                    snapshot)


def _dtype(precision: str, device: str, where: str) -> torch.dtype:
    """The weights' dtype, checked against the device: half precision only on CUDA."""
    if precision not in PRECISIONS:
        raise InputError(f"unknown precision {precision!r}; expected one of {', '.join(PRECISIONS)}", where)
    try:
        kind = torch.device(device)
    except RuntimeError:
        raise InputError(f"unknown device {device!r}; expected cpu, cuda, cuda:N or mps", where) from None
    if kind.type not in ("cpu", "cuda", "mps"):
        raise InputError(f"unsupported device {device!r}; expected cpu, cuda, cuda:N or mps", where)
    if kind.type == "cuda" and not torch.cuda.is_available():
        raise InputError(f"device {device!r} is not available: torch finds no CUDA GPU", where)
    if kind.type == "cuda" and (kind.index or 0) >= torch.cuda.device_count():
        raise InputError(f"device {device!r} is not available: {torch.cuda.device_count()} CUDA GPU(s)", where)
    if kind.type == "mps" and not torch.backends.mps.is_available():
        raise InputError(f"device {device!r} is not available", where)
    if precision != "float32" and kind.type != "cuda":
        raise InputError(f"{precision} needs a cuda device: on {kind.type} half-precision kernels are slow or "
                         "missing, and the numbers would only lose accuracy against float32", where)
    return PRECISIONS[precision]


def _tokenizer(folder: Path, where: str) -> Any:
    """The folder's fast tokenizer (character offsets need one), with a BOS or EOS token to condition on."""
    from transformers import AutoTokenizer

    try:
        tokenizer = AutoTokenizer.from_pretrained(folder, local_files_only=True)
    except (OSError, ValueError, ImportError) as e:
        raise InputError(f"cannot load the tokenizer: {e}", where) from None
    # without its files, transformers 5 builds an *empty* tokenizer of the config's model type instead of failing
    files = sorted({"tokenizer.json", *tokenizer.vocab_files_names.values()})
    if not any((folder / name).is_file() for name in files):
        raise InputError(f"no tokenizer in the folder (none of {', '.join(files)}): save it there with "
                         "tokenizer.save_pretrained", where)
    if not tokenizer.is_fast:
        raise InputError(f"{type(tokenizer).__name__} is a slow tokenizer: aligning pieces to words needs "
                         "character offsets (return_offsets_mapping), which only fast tokenizers give", where)
    if tokenizer.bos_token_id is None and tokenizer.eos_token_id is None:
        raise InputError("the tokenizer has neither a BOS nor an EOS token to condition the first piece on", where)
    return tokenizer


@contextmanager
def _no_progress_bars() -> Iterator[None]:
    """transformers 5 draws progress bars while loading weights; evaluation output stays one line per result."""
    from transformers.utils import logging

    enabled = logging.is_progress_bar_enabled()
    logging.disable_progress_bar()
    try:
        yield
    finally:
        if enabled:
            logging.enable_progress_bar()


def lm_eval_max_length(config: Any, tokenizer: Any) -> int:
    """The context length lm-eval's ``HFLM`` reads a model with (its ``resolve_max_length``)."""
    config = getattr(config, "text_config", None) or config
    for name in ("n_positions", "max_position_embeddings", "n_ctx"):
        if getattr(config, name, None) is not None:
            return int(getattr(config, name))
    if getattr(tokenizer, "model_max_length", None) not in (None, TOKENIZER_INFINITY):
        return int(tokenizer.model_max_length)
    return LM_EVAL_MAX_LENGTH


def rolling_windows(pieces: Sequence[int], prefix: int, length: int) -> list[Window]:
    """lm-eval's ``loglikelihood_rolling`` windows of ``pieces`` (context length 1, made disjoint): the first
    predicts the first ``length`` pieces after ``prefix``; each later one the next ``length`` (fewer at the
    end), conditioned on the pieces before them, so that the model reads exactly ``length`` positions."""
    windows = [([prefix], list(pieces[:length]))] if pieces else []
    for start in range(length, len(pieces), length):
        end = min(start + length, len(pieces))
        windows.append((list(pieces[end - length - 1 : start]), list(pieces[start:end])))
    return windows


def align_pieces(text: Text, offsets: Sequence[tuple[int, int]]) -> list[int]:
    """The index of the word each piece (a character span of ``text.text``) belongs to (see the module doc)."""
    starts = [start for start, _ in text.spans]
    owners = []
    for start, end in offsets:
        piece = text.text[start:end]
        first = end - len(piece.lstrip())  # the first non-whitespace character (``end`` for whitespace only)
        word = bisect_right(starts, first) - 1
        if not (first < end and word >= 0 and first < text.spans[word][1]):
            word = min(bisect_left(starts, first), len(starts) - 1)  # the next word starting after it
        owners.append(word)
    return owners


class HFScorer:
    """A causal LM and its tokenizer as an exact Scorer of raw text (``score_texts``), of the sentences of a
    minimal pair (``score_choices``) and of words (``score``), under one convention (see the module doc)."""

    def __init__(self, folder: Path, model: Any, tokenizer: Any, precision: str, batch_size: int = 16,
                 convention: str = CONVENTIONS[0], word_prob: str = WORD_PROBS[0],
                 snapshot: hub.Snapshot | None = None):
        self.folder, self.model, self.tokenizer = folder, model, tokenizer
        self.snapshot = snapshot  # where a Hub model's files came from: repo, revision, commit
        self.precision, self.batch_size, self.hf_convention = precision, batch_size, convention
        self.word_prob = word_prob
        self.bos_id: int = tokenizer.bos_token_id if tokenizer.bos_token_id is not None else tokenizer.eos_token_id
        self.bos: str = tokenizer.convert_ids_to_tokens(self.bos_id)
        config = model.config
        positions = getattr(config, "max_position_embeddings", None) or getattr(config, "n_positions", None)
        # minicons: the BOS takes one position (and, for corrected word probabilities, the last piece one more)
        self.max_pieces: int | None = positions - 1 - (word_prob != WORD_PROBS[0]) if positions else None
        self.max_length = lm_eval_max_length(config, tokenizer)  # lm-eval: its rolling windows' length
        self.name = HF_PREFIX + (f"{snapshot.model.repo}@{snapshot.commit}" if snapshot else folder.resolve().name)
        self.convention = Convention(method="exact", bound=False, end_of_sentence=False, unit="word",
                                     tokenizer=f"{type(tokenizer).__name__} (vocab {len(tokenizer)})",
                                     bos=self.bos, precision=precision, word_prob=word_prob)
        # corrected: the rows of pieces whose mass is read at every position (``word_boundaries``)
        self.mark: str | None = None  # the word mark (``word_boundaries``)
        self.boundaries: torch.Tensor | None = None if word_prob == WORD_PROBS[0] else self.word_boundaries()

    def word_boundaries(self) -> torch.Tensor:
        """``corrected``: two rows of 0/1 over the model's outputs, the pieces that begin a word (plus EOS) and the
        first pieces of a text whose first word is not marked (base-vocabulary pieces that do not begin a word, plus
        EOS); sets ``mark``, the tokenizer's word mark (see the module doc)."""
        alone = self.tokenizer("a", add_special_tokens=False)["input_ids"]
        after = self.tokenizer("a b", add_special_tokens=False)["input_ids"][len(alone):]
        piece = self.tokenizer.convert_ids_to_tokens(after[:1])[0] if after else "b"
        if piece[0] == "b":
            raise InputError(f"{type(self.tokenizer).__name__} does not mark the pieces that begin a word (the "
                             f"second word of 'a b' is {piece!r}): --word-prob corrected needs such a tokenizer",
                             str(self.folder))
        self.mark = piece[0]
        size = self.model.get_output_embeddings().weight.shape[0]
        rows = torch.zeros((2, size))
        for token, index in self.tokenizer.get_vocab().items():
            if index < size:
                if token.startswith(self.mark):
                    rows[0, index] = 1
                elif index < self.tokenizer.vocab_size:
                    rows[1, index] = 1
        if self.tokenizer.eos_token_id is not None and self.tokenizer.eos_token_id < size:
            rows[:, self.tokenizer.eos_token_id] = 1
        return rows

    def score(self, sentences: Sequence[Sequence[str]]) -> list[SentenceScore]:
        """Score treebank words as their text (``text_of_words``)."""
        check_sentences(sentences)
        return self.score_texts([text_of_words(words) for words in sentences])

    def score_texts(self, texts: Sequence[Text]) -> list[SentenceScore]:
        """Score raw sentences, each on its own (lm-eval: a rolling request); each word gets the
        log-probabilities of its pieces (see the module doc)."""
        if self.hf_convention == "lm-eval":
            encoded = self._encode(texts, special_tokens=True)
            return self._scores(texts, encoded, [rolling_windows(ids, self.bos_id, self.max_length)
                                                 for ids, _ in encoded])
        return self._scores(texts, *self._after_bos(texts))

    def score_choices(self, texts: Sequence[Text]) -> list[SentenceScore]:
        """Score the sentences of minimal pairs (BLiMP): under lm-eval each is a multiple-choice continuation,
        ``" " + sentence`` after the prefix token; under minicons, as ``score_texts``."""
        if self.hf_convention != "lm-eval":
            return self.score_texts(texts)
        spaced = [Text(" " + t.text, t.words, tuple((s + 1, e + 1) for s, e in t.spans)) for t in texts]
        return self._scores(spaced, *self._after_bos(spaced, limit=self.max_length))

    def _encode(self, texts: Sequence[Text], special_tokens: bool) -> list[tuple[list[int], list[tuple[int, int]]]]:
        """Each text's pieces and their character offsets (with the tokenizer's default special tokens or none)."""
        encoded = self.tokenizer([t.text for t in texts], return_offsets_mapping=True, verbose=False,
                                 **({} if special_tokens else {"add_special_tokens": False}))
        for k, (text, ids) in enumerate(zip(texts, encoded["input_ids"])):
            if ids and not text.words:
                raise InputError(f"text {text.text[:60]!r} has no words to give its pieces to", f"sentence {k}")
        return [(ids, [tuple(o) for o in offsets])
                for ids, offsets in zip(encoded["input_ids"], encoded["offset_mapping"])]

    def _after_bos(self, texts: Sequence[Text], limit: int | None = None
                   ) -> tuple[list[tuple[list[int], list[tuple[int, int]]]], list[list[Window]]]:
        """The pieces of each text (no special tokens), scored in one window after the BOS token; lm-eval
        (``limit``: its context length) takes a first piece that is the prefix token itself as the context."""
        encoded = self._encode(texts, special_tokens=False)
        most = self.max_pieces if limit is None else limit
        windows = []
        for k, (ids, offsets) in enumerate(encoded):
            if limit is not None and ids and ids[0] == self.bos_id:
                encoded[k] = ids, offsets = ids[1:], offsets[1:]
            if most is not None and len(ids) > most:
                raise InputError(f"{len(ids)} pieces, but the model reads the BOS token and at most {most} pieces "
                                 f"(texts are never truncated): {texts[k].text[:60]!r}...", f"sentence {k}")
            windows.append([([self.bos_id], ids)] if ids else [])
        return encoded, windows

    def _scores(self, texts: Sequence[Text], encoded: Sequence[tuple[list[int], list[tuple[int, int]]]],
                windows: Sequence[list[Window]]) -> list[SentenceScore]:
        """Run every text's windows (whose continuations are its scored pieces, in order) and sum into words."""
        flat = [window for text_windows in windows for window in text_windows]
        results = iter(self._window_logprobs(flat))
        out = []
        for k, (text, (ids, offsets), text_windows) in enumerate(zip(texts, encoded, windows)):
            pieces: list[float] = []
            masses: list[list[float]] = []
            for _ in text_windows:
                window_pieces, window_masses = next(results)
                pieces += window_pieces
                masses += window_masses
            out.append(self._sentence(text, ids, offsets, pieces, masses, f"sentence {k}"))
        return out

    def _sentence(self, text: Text, ids: list[int], offsets: list[tuple[int, int]], logprobs: list[float],
                  masses: list[list[float]], where: str) -> SentenceScore:
        """The words' log-probabilities from the pieces aligned to them (``text`` as tokenized): summed, or
        corrected with the boundary ``masses`` (``_window_logprobs``)."""
        owners = align_pieces(text, offsets)
        per_word: list[list[float]] = [[] for _ in text.words]
        unknown = set()
        for word, piece, (start, end), logprob in zip(owners, ids, offsets, logprobs):
            per_word[word].append(logprob)
            if piece == self.tokenizer.unk_token_id and start < end:  # not a special token the tokenizer adds
                unknown.add(word)
        if self.boundaries is None:
            return SentenceScore(words=text.words, word_logprobs=tuple(math.fsum(w) for w in per_word),
                                 total=math.fsum(logprobs), end_logprob=0.0, unknown_words=len(unknown))
        words = self._corrected(text, ids, owners, logprobs, masses, where)
        return SentenceScore(words=text.words, word_logprobs=tuple(words), total=math.fsum(logprobs),
                             end_logprob=0.0, unknown_words=len(unknown))

    def _corrected(self, text: Text, ids: list[int], owners: list[int], logprobs: list[float],
                   masses: list[list[float]], where: str) -> list[float]:
        """Corrected word log-probabilities (``word_prob.corrected_word_logprobs``), after checking that exactly
        the pieces that begin a word are marked (the first word's may be unmarked)."""
        pieces = self.tokenizer.convert_ids_to_tokens(ids)
        for j in range(1, len(pieces)):
            begins = owners[j] != owners[j - 1]
            if pieces[j].startswith(self.mark) != begins or owners[j] < owners[j - 1]:
                raise InputError(f"piece {pieces[j]!r} of the word {text.words[owners[j]]!r} "
                                 f"{'does not start' if begins else 'starts'} with the word mark {self.mark!r}: "
                                 "corrected word probabilities need the pieces that begin a word, and only "
                                 "them, marked", where)
        if sorted(set(owners)) != list(range(len(text.words))):
            raise InputError("a word has no piece of its own (corrected word probabilities need one)", where)
        marked = pieces[0].startswith(self.mark)
        return corrected_word_logprobs(logprobs, owners, [m[0] for m in masses],
                                       masses[0][0] if marked else masses[0][1])

    @torch.inference_mode()
    def _window_logprobs(self, windows: Sequence[Window]) -> list[tuple[list[float], list[list[float]]]]:
        """log p(piece | context, earlier pieces) of every continuation piece, in batches of similar length, and
        (``corrected``) the log-masses of the ``boundaries`` rows before every piece and after the last (the
        model then reads the last piece too; otherwise no masses)."""
        device = self.model.device
        after = int(self.boundaries is not None)  # positions read after the last piece
        rows = None if self.boundaries is None else self.boundaries.to(device)
        inputs = [context + continuation[: len(continuation) - 1 + after] for context, continuation in windows]
        order = sorted(range(len(windows)), key=lambda k: -len(inputs[k]))
        out: list[tuple[list[float], list[list[float]]]] = [([], []) for _ in windows]
        for first in range(0, len(order), self.batch_size):
            batch = order[first : first + self.batch_size]
            width = len(inputs[batch[0]])
            tokens = torch.full((len(batch), width), self.bos_id)
            mask = torch.zeros((len(batch), width), dtype=torch.long)
            scored = torch.zeros((len(batch), width), dtype=torch.bool)  # the positions that predict a piece
            targets = []
            for row, k in enumerate(batch):
                context, continuation = windows[k]
                tokens[row, : len(inputs[k])] = torch.tensor(inputs[k], dtype=torch.long)
                mask[row, : len(inputs[k])] = 1
                scored[row, len(context) - 1 : len(inputs[k])] = True
                targets.extend(continuation + [self.bos_id] * after)  # nothing is picked after the last piece
            positions = torch.arange(width).expand(len(batch), width)
            logits = self.model(input_ids=tokens.to(device), attention_mask=mask.to(device),
                                position_ids=positions.to(device), use_cache=False).logits
            logprobs = logits[scored.to(device)].float().log_softmax(-1)
            picked = logprobs.gather(-1, torch.tensor(targets, device=device).unsqueeze(-1)).squeeze(-1).tolist()
            masses = [] if rows is None else (logprobs.exp() @ rows.T).log().tolist()
            for k in batch:  # ``scored`` is row-major: each window's positions in turn
                n = len(windows[k][1]) + after
                out[k] = picked[: n - after], masses[:n]
                picked, masses = picked[n:], masses[n:]
        return out

    def identity(self) -> dict[str, Any]:
        """What changes a number: the sha256 of the config, weights and tokenizer files, the precision, the BOS,
        the convention; for a Hub model also its repo, the revision asked for and the commit it resolved to."""
        names = {"config.json", *TOKENIZER_CONFIGS, *self.tokenizer.vocab_files_names.values()}
        files = [p for p in sorted(self.folder.iterdir()) if p.is_file()
                 and (p.name in names or p.suffix in (".safetensors", ".bin"))]
        return {"files": {p.name: file_sha256(p) for p in files}, "precision": self.precision, "bos": self.bos,
                "hf_convention": self.hf_convention,
                **({} if self.word_prob == WORD_PROBS[0] else {"word_prob": self.word_prob}),  # earlier caches valid
                **({"hub": self.snapshot.identity()} if self.snapshot else {})}

    def description(self) -> str:
        """One line for the report headline, e.g. ``exact, minicons convention, tokenizer GPT2TokenizerFast
        (vocab 500), conditioned on <|endoftext|>, float32``."""
        windows = f", windows of {self.max_length}" if self.hf_convention == "lm-eval" else ""
        corrected = "" if self.word_prob == WORD_PROBS[0] else f", {describe(self.word_prob)}"
        commit = f", {self.snapshot.model.repo}@{self.snapshot.commit[:12]}" if self.snapshot else ""
        return (f"exact, {self.hf_convention} convention{windows}, tokenizer {self.convention.tokenizer}, "
                f"conditioned on {self.bos}, {self.precision}{corrected}{commit}")
