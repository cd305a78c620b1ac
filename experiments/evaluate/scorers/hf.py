"""``hf:PATH`` model sources: any locally saved ``transformers`` causal LM, scored exactly as a string model.

PATH is a folder written by ``save_pretrained`` (``config.json``, the weights, the tokenizer files); nothing is
ever downloaded. The numbers follow lm-evaluation-harness and minicons: a sentence is its raw text through the
model's own tokenizer *without* special tokens, conditioned on the model's BOS token (``bos_token_id``, else
``eos_token_id``, e.g. GPT-2's ``<|endoftext|>``)::

    log p(text) = Σ_j log p(piece_j | BOS, piece_1 .. piece_j-1)      (natural log, no end-of-sentence term)

**Alignment of pieces to words.** The evaluator's words (``Text.words``, with character spans in ``Text.text``,
in text order) get the sum of their pieces, found by the tokenizer's character offsets: a piece belongs to the
word whose span contains the piece's first non-whitespace character; a piece of whitespace only, or whose first
non-whitespace character lies in no word, goes to the next word starting after it (the last word if none).
Every piece goes to exactly one word, so ``sum(word_logprobs) == total`` up to float rounding. SyntaxGym regions
are separated by spaces and a byte-level BPE piece (GPT-2's) is either whitespace or one optional leading space
followed by non-space characters, so it never crosses a region boundary: region sums are exact.

**Batching never changes a number** beyond float noise: texts are sorted by their number of pieces, right-padded
and run with an attention mask and explicit position ids (padding comes after every real piece, so a causal model
never attends to it, and positions never shift); the log-softmax is taken in float32 whatever the weights'
precision. A text longer than the model's positions is an error, never truncated.
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
from experiments.evaluate.scorers import HF_PREFIX
from lightning_modules.errors import InputError

# huggingface_hub reads this when it is first imported (transformers is imported lazily, in ``load``): never
# reach the network, on top of ``local_files_only=True`` on every call
os.environ["HF_HUB_OFFLINE"] = "1"

PRECISIONS = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}
# tokenizer files beside the class's own vocabulary files (``vocab_files_names``) that change its output
TOKENIZER_CONFIGS = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "added_tokens.json")


def load(source: str, device: str = "cpu", precision: str = "float32", batch_size: int = 16) -> HFScorer:
    """The Scorer of ``hf:PATH`` (or a bare PATH); every problem is an ``InputError`` at the folder."""
    folder = Path(source.removeprefix(HF_PREFIX)).expanduser()
    where = str(folder)
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
    return HFScorer(folder, model.to(device).eval(), tokenizer, precision, batch_size)


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
    """A causal LM and its tokenizer as an exact Scorer of raw text (``score_texts``) and of words (``score``)."""

    def __init__(self, folder: Path, model: Any, tokenizer: Any, precision: str, batch_size: int = 16):
        self.folder, self.model, self.tokenizer = folder, model, tokenizer
        self.precision, self.batch_size = precision, batch_size
        self.bos_id: int = tokenizer.bos_token_id if tokenizer.bos_token_id is not None else tokenizer.eos_token_id
        self.bos: str = tokenizer.convert_ids_to_tokens(self.bos_id)
        config = model.config
        positions = getattr(config, "max_position_embeddings", None) or getattr(config, "n_positions", None)
        self.max_pieces: int | None = positions - 1 if positions else None  # the BOS takes one position
        self.name = f"hf:{folder.resolve().name}"
        self.convention = Convention(method="exact", bound=False, end_of_sentence=False, unit="word",
                                     tokenizer=f"{type(tokenizer).__name__} (vocab {len(tokenizer)})",
                                     bos=self.bos, precision=precision)

    def score(self, sentences: Sequence[Sequence[str]]) -> list[SentenceScore]:
        """Score treebank words as their text (``text_of_words``)."""
        check_sentences(sentences)
        return self.score_texts([text_of_words(words) for words in sentences])

    def score_texts(self, texts: Sequence[Text]) -> list[SentenceScore]:
        """Score raw sentences; each word gets the log-probabilities of its pieces (see the module doc)."""
        if not texts:
            return []
        encoded = self.tokenizer([t.text for t in texts], add_special_tokens=False, return_offsets_mapping=True,
                                 verbose=False)
        ids, offsets = encoded["input_ids"], encoded["offset_mapping"]
        for k, (text, pieces) in enumerate(zip(texts, ids)):
            if self.max_pieces is not None and len(pieces) > self.max_pieces:
                raise InputError(f"{len(pieces)} pieces, but the model reads the BOS token and at most "
                                 f"{self.max_pieces} pieces (texts are never truncated): {text.text[:60]!r}...",
                                 f"sentence {k}")
            if pieces and not text.words:
                raise InputError(f"text {text.text[:60]!r} has no words to give its pieces to", f"sentence {k}")
        logprobs = self._piece_logprobs(ids)
        return [self._sentence(*row) for row in zip(texts, ids, offsets, logprobs)]

    def _sentence(self, text: Text, ids: list[int], offsets: list[tuple[int, int]],
                  logprobs: list[float]) -> SentenceScore:
        """Sum the pieces' log-probabilities into the words they are aligned to."""
        per_word: list[list[float]] = [[] for _ in text.words]
        unknown = set()
        for word, piece, logprob in zip(align_pieces(text, offsets), ids, logprobs):
            per_word[word].append(logprob)
            if piece == self.tokenizer.unk_token_id:
                unknown.add(word)
        return SentenceScore(words=text.words, word_logprobs=tuple(math.fsum(w) for w in per_word),
                             total=math.fsum(logprobs), end_logprob=0.0, unknown_words=len(unknown))

    @torch.inference_mode()
    def _piece_logprobs(self, ids: Sequence[list[int]]) -> list[list[float]]:
        """log p(piece_j | BOS, earlier pieces) of every piece, in batches of texts of similar length."""
        device = self.model.device
        order = sorted(range(len(ids)), key=lambda k: -len(ids[k]))
        out: list[list[float]] = [[] for _ in ids]
        for first in range(0, len(order), self.batch_size):
            batch = order[first : first + self.batch_size]
            width = 1 + len(ids[batch[0]])
            tokens = torch.full((len(batch), width), self.bos_id)
            mask = torch.zeros((len(batch), width), dtype=torch.long)
            for row, k in enumerate(batch):
                tokens[row, 1 : 1 + len(ids[k])] = torch.tensor(ids[k], dtype=torch.long)
                mask[row, : 1 + len(ids[k])] = 1
            positions = torch.arange(width).expand(len(batch), width)
            logits = self.model(input_ids=tokens.to(device), attention_mask=mask.to(device),
                                position_ids=positions.to(device), use_cache=False).logits
            real = mask[:, 1:].bool().to(device)  # the positions that predict a piece
            logprobs = logits[:, :-1][real].float().log_softmax(-1)
            picked = logprobs.gather(-1, tokens[:, 1:].to(device)[real].unsqueeze(-1)).squeeze(-1).tolist()
            for k in batch:  # ``real`` is row-major: each text's pieces in turn
                out[k], picked = picked[: len(ids[k])], picked[len(ids[k]) :]
        return out

    def identity(self) -> dict[str, Any]:
        """What changes a number: the sha256 of the config, weights and tokenizer files, the precision, the BOS."""
        names = {"config.json", *TOKENIZER_CONFIGS, *self.tokenizer.vocab_files_names.values()}
        files = [p for p in sorted(self.folder.iterdir()) if p.is_file()
                 and (p.name in names or p.suffix in (".safetensors", ".bin"))]
        return {"files": {p.name: file_sha256(p) for p in files}, "precision": self.precision, "bos": self.bos}

    def description(self) -> str:
        """One line for the report headline, e.g. ``exact, tokenizer GPT2TokenizerFast (vocab 500), ...``."""
        return f"exact, tokenizer {self.convention.tokenizer}, conditioned on {self.bos}, {self.precision}"
