"""Per-word surprisals of any text, from any model ``synbench eval`` reads: ``synbench surprisals MODEL TEXT`` and
``load(MODEL).surprisals(sentences)``.

MODEL is a model source as ``eval sg`` takes it (a checkpoint of any family, an n-gram JSON, ``hf:DIR``) and the
scorer is the one ``eval sg`` picks (``scorer_choice.choose``, the same options): exact for string models; for
joint models the family's default method (its word-synchronous beam, or ``--method proposals``), whose per-word
values are incremental estimates (the output says which). A sentence is a sequence of words (a text line split
on whitespace); a model with its own tokenizer reads the words joined by single spaces (``text_of_words``) and
gives each word its pieces' probability, summed or corrected (``--word-prob``, ``evaluate/word_prob.py``).

Output (``to_tsv``): ``#`` lines stating the model, method, word-probability convention and the scorer's full
convention, then a header row and one row per word::

    sentence  word_index  word  surprisal_bits  surprisal_nats

``sentence`` is the line of TEXT, ``word_index`` the word's place in it (both 1-based); surprisal =
-log p(w_i | w_<i) (bits: base 2, nats: base e; ``inf`` where a beam gives the word probability 0). The end of
the sentence is no word: log p(</s> | x), where the model has one, is in ``logprob`` only. Fields are written
by Python's ``csv`` (tab-separated, a field with a quote character quoted); data rows start with a number, so
lines starting with ``#`` are never data.
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from experiments.evaluate.scorer import SentenceScore, check_sentences, score_texts, text_of_words
from experiments.evaluate.scorer_choice import ChosenScorer, add_arguments, choose
from experiments.evaluate.word_prob import meaning
from lightning_modules.errors import InputError

METHODS = ("exact", "proposals", "beam")  # gold needs gold trees, which a text has not
COLUMNS = ("sentence", "word_index", "word", "surprisal_bits", "surprisal_nats")
LN2 = math.log(2.0)


@dataclass(frozen=True)
class WordSurprisal:
    """One word's surprisal: ``sentence`` and ``index`` 1-based, ``nats`` = -ln p(w | context)."""

    sentence: int
    index: int
    word: str
    nats: float

    @property
    def bits(self) -> float:
        return self.nats / LN2


def add_model_options(p: argparse.ArgumentParser) -> None:
    """MODEL and the scorer options ``eval sg`` has (method, beam, ``--word-prob``, device ...), without its
    results folder."""
    add_arguments(p, methods=METHODS, results=False)


def load(model: str | Path, **options: Any) -> SurprisalModel:
    """The surprisal model of ``model`` (a checkpoint, an n-gram JSON or ``hf:DIR``); ``options`` are the CLI's
    scorer options by their names (``method="beam"``, ``beam=20``, ``word_prob="corrected"``, ``device="cuda"``,
    ``proposals=FILE`` ...), unset ones take the family's defaults as on the command line."""
    parser = argparse.ArgumentParser(prog="synbench surprisals", add_help=False)
    add_model_options(parser)
    args = parser.parse_args([str(model)])  # every option at its default, as the command line leaves it
    for key, value in options.items():
        if key == "checkpoint" or not hasattr(args, key):
            raise TypeError(f"unknown option {key!r}; expected one of "
                            f"{', '.join(sorted(k for k in vars(args) if k not in ('checkpoint',)))}")
        setattr(args, key, Path(value) if key in ("proposals", "parser") and value is not None else value)
    return SurprisalModel(choose(args), str(model))


class SurprisalModel:
    """A chosen scorer (``scorer_choice.ChosenScorer``) giving per-word surprisals and sentence log-probabilities."""

    def __init__(self, chosen: ChosenScorer, model: str):
        if "surprisal" not in chosen.capabilities or chosen.level != "sentence":
            raise InputError(f"a {chosen.family} model of this config gives no per-word surprisals", model)
        self.chosen, self.model = chosen, model

    @property
    def convention(self) -> Any:
        """The scorer's ``Convention`` (method, bound, incremental estimates, word_prob ...)."""
        return self.chosen.scorer.convention

    def score(self, sentences: Sequence[str | Sequence[str]]) -> list[SentenceScore]:
        """The scorer's ``SentenceScore`` of each sentence (a string is split on whitespace)."""
        words = [s.split() if isinstance(s, str) else list(s) for s in sentences]
        check_sentences(words)
        return score_texts(self.chosen.scorer, [text_of_words(w) for w in words])

    def surprisals(self, sentences: Sequence[str | Sequence[str]]) -> list[list[WordSurprisal]]:
        """Each sentence's words with their surprisals (sentences numbered from 1 in the order given)."""
        return [[WordSurprisal(k, i, word, -logprob)
                 for i, (word, logprob) in enumerate(zip(s.words, s.word_logprobs, strict=True), start=1)]
                for k, s in enumerate(self.score(sentences), start=1)]

    def logprob(self, sentences: Sequence[str | Sequence[str]]) -> list[float]:
        """Each sentence's log p(x) in nats: exact for string models, a lower bound for joint ones (the
        convention's ``bound``), with log p(</s> | x) where the convention's ``end_of_sentence`` says so."""
        return [s.total for s in self.score(sentences)]

    def header(self) -> list[str]:
        """The ``#`` lines of the TSV: what was computed and how."""
        convention = self.convention
        incremental = convention.incremental or ("exact" if convention.method in ("exact", "gold") else
                                                 f"{convention.method} prefixes")
        return [
            "# synbench surprisals",
            f"# model: {self.model} (family {self.chosen.family})",
            f"# method: {self.chosen.settings['method']}: {self.chosen.description}",
            f"# per-word values: {'estimates, ' if self.chosen.joint else ''}{incremental}",
            f"# word_prob: {convention.word_prob} ({meaning(convention.word_prob)})",
            "# surprisal = -log p(w_i | w_<i): surprisal_bits base 2, surprisal_nats base e; sentence = line of the "
            "text, word_index = place in it, both 1-based; the end of sentence is no row",
            f"# settings: {json.dumps(self.chosen.settings, sort_keys=True, default=str)}",
        ]

    def to_tsv(self, rows: Sequence[Sequence[WordSurprisal]]) -> str:
        """The header lines, the column names and one row per word."""
        buffer = io.StringIO()
        writer = csv.writer(buffer, delimiter="\t", lineterminator="\n")
        writer.writerow(COLUMNS)
        for sentence in rows:
            writer.writerows((w.sentence, w.index, w.word, repr(w.bits), repr(w.nats)) for w in sentence)
        return "\n".join(self.header()) + "\n" + buffer.getvalue()


def read_sentences(path: str | Path) -> list[list[str]]:
    """The sentences of a text file: one per line, words separated by whitespace. A missing file, a blank line
    (every line is a sentence: the line numbers are the output's sentence numbers) or text that is not UTF-8 is
    an ``InputError`` at ``FILE:LINE``."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as e:
        raise InputError(f"cannot read the text: {e.strerror or e}", str(path)) from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data[: e.start].count(b"\n") + 1
        raise InputError(f"not UTF-8 text ({e.reason})", f"{path}:{line}") from None
    lines = text.splitlines()
    if not lines:
        raise InputError("no sentences (one sentence per line, words separated by spaces)", str(path))
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            raise InputError("blank line: one sentence per line, every line a sentence (remove it)",
                             f"{path}:{number}")
    return [line.split() for line in lines]


_SENTENCE = re.compile(r"sentence (\d+)")


def at_line(error: InputError, path: str | Path) -> InputError:
    """A scorer's error about ``sentence K`` (0-based, in the order scored) as the text's ``FILE:LINE``."""
    match = _SENTENCE.fullmatch(error.location or "")
    return InputError(error.message, f"{path}:{int(match.group(1)) + 1}") if match else error
