"""Minimal pairs from a model: how BLiMP, pairs files (``eval pairs``) and Marvin & Linzen score a pair.

A pair's two sentences are tokenized PTB-style (``tokenize.py``) and scored as the answers of one choice
(``scorer.score_choices``: an ``hf:`` model under lm-eval's convention reads " " + sentence, as its BLiMP tasks
do) by the Scorer's ``total``: log p(x) including the end of the sentence (exact for string models; for joint
models the marginal lower bound over proposals or the beam, so the comparison is between bounds, as in TG §3.3
and Pushdown). A pair is correct when log p(good) > log p(bad), a tie wrong (``blimp.CONVENTION``). Each pair's
two scores are cached in ``items.jsonl`` under its id (``cache.ItemCache``), so an interrupted evaluation
resumes; a sentence of probability 0 under a search has log p = -inf, written ``null`` (``infinite.py``).
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from experiments.evaluate.blimp import is_correct
from experiments.evaluate.cache import ItemCache, Record, default_out_dir
from experiments.evaluate.infinite import from_json, is_json_value, to_json
from experiments.evaluate.results import write_results
from experiments.evaluate.scorer import Text, score_choices
from experiments.evaluate.scorer_choice import ChosenScorer
from experiments.evaluate.tokenize import tokenize
from lightning_modules.errors import InputError

Words = tuple[list[str], list[str]]  # a pair's good and bad sentence as PTB tokens


def words_of(sentence: str, location: str) -> list[str]:
    """The PTB tokens of a sentence; an empty one is an error at ``location``."""
    words = [t.text for t in tokenize(sentence)]
    if not words:
        raise InputError("empty sentence", location)
    return words


def text_of(sentence: str, words: list[str]) -> Text:
    """The raw sentence with its PTB tokens' character spans (text-reading scorers read the raw text)."""
    return Text(sentence, tuple(words), tuple((t.start, t.end) for t in tokenize(sentence)))


def pair_words(pairs: Mapping[str, tuple[str, str]], locations: Mapping[str, str]) -> dict[str, Words]:
    """Each pair's tokens by id (``locations``: where each pair is, for the error of an empty sentence)."""
    return {i: (words_of(good, f"{locations[i]} good"), words_of(bad, f"{locations[i]} bad"))
            for i, (good, bad) in pairs.items()}


def words_sha256(words: Mapping[str, Words]) -> str:
    """The checksum of the words evaluated (in the task identity: other words are another evaluation)."""
    return hashlib.sha256(json.dumps(sorted(words.items())).encode("utf-8")).hexdigest()


@dataclass
class ScoredPairs:
    """The cached records of an evaluation's pairs, in order, and where they live."""

    records: list[Record]  # {"id", "logprob_good", "logprob_bad" (null: -inf), "words", "unknown_words"}
    out_dir: Path
    computed: int  # pairs scored now (the others came from the cache)

    def logprobs(self, record: Record) -> tuple[float, float]:
        """A record's (log p(good), log p(bad)), a ``null`` read back as -inf."""
        return from_json(record["logprob_good"], -math.inf), from_json(record["logprob_bad"], -math.inf)

    def items(self) -> list[dict[str, Any]]:
        """One ``items.jsonl`` record per pair: the cached fields and the verdict."""
        return [{**r, "correct": is_correct(*self.logprobs(r))} for r in self.records]

    def summary(self) -> dict[str, Any]:
        """Words scored, the OOV rate and the sentences of probability 0 under the search."""
        words = sum(r["words"] for r in self.records)
        zero = sum((r["logprob_good"] is None) + (r["logprob_bad"] is None) for r in self.records)
        return {"oov_rate": sum(r["unknown_words"] for r in self.records) / words, "words": words,
                "zero_probability_sentences": zero}

    def finish(self, task: str, chosen: ChosenScorer, headline: str, metrics: dict[str, Any], rule: str,
               settings: dict[str, Any], items: list[dict[str, Any]], identity: Mapping[str, Any],
               data: Mapping[str, Any]) -> tuple[dict[str, Any], int]:
        """Write the task's results: ``metrics`` with the summary and the ``headline`` completed by the model,
        the OOV rate and the sentences of probability 0; returns (the result ``eval`` prints, pairs computed)."""
        summary = self.summary()
        zero = summary["zero_probability_sentences"]
        headline += (f", {chosen.description}, OOV {summary['oov_rate']:.3f}"
                     + (f", {zero} sentences of probability 0 under the search" if zero else ""))
        metrics = {**metrics, **summary, "headline": headline}
        rule = convention(rule, chosen)
        write_results(self.out_dir, task, metrics, rule, settings, items, config=dict(identity),
                      data={**data, **chosen.data})
        result = {"metrics": metrics, "settings": settings, "convention": rule, "headline": headline,
                  "out": str(self.out_dir)}
        return result, self.computed


def score_pairs(chosen: ChosenScorer, model_path: str | Path, task: str, pairs: Mapping[str, tuple[str, str]],
                words: Mapping[str, Words], identity: Mapping[str, Any],
                out: str | Path | None = None) -> ScoredPairs:
    """Score every pair (only those missing from the cache of ``out``, default ``RUN/eval/TASK-HASH`` of the
    ``identity``), ``words`` being ``pair_words(pairs)``; nothing is written before the words are all known."""
    out_dir = Path(out) if out is not None else default_out_dir(model_path, task, identity)
    ids = list(pairs)

    def valid(r: Record) -> bool:
        good, bad = words[r["id"]]
        return (is_json_value(r["logprob_good"]) and is_json_value(r["logprob_bad"])
                and r["words"] == len(good) + len(bad) and isinstance(r["unknown_words"], int))

    def compute(wanted: list[str]) -> list[Record]:
        texts = [text_of(sentence, w) for i in wanted for sentence, w in zip(pairs[i], words[i], strict=True)]
        scores = score_choices(chosen.scorer, texts)
        records = []
        for k, i in enumerate(wanted):
            good, bad = scores[2 * k], scores[2 * k + 1]
            records.append({"id": i, "logprob_good": to_json(good.total, -math.inf),
                            "logprob_bad": to_json(bad.total, -math.inf), "words": len(good.words) + len(bad.words),
                            "unknown_words": good.unknown_words + bad.unknown_words})
        return records

    cache = ItemCache(out_dir, valid, identity)
    cache.fill(ids, compute, max(1, chosen.chunk // 2))
    return ScoredPairs(cache.ordered(ids), out_dir, cache.computed)


def convention(rule: str, chosen: ChosenScorer) -> str:
    """A pair task's scoring convention: its aggregation ``rule``, then what log p(x) is for this model."""
    return rule + "; log p(x) includes the end of the sentence" + (
        " (joint models: marginal lower bounds)" if chosen.joint else "")


def accuracy_by(verdicts: Iterable[tuple[str, bool]]) -> dict[str, float]:
    """(group, pair correct) -> each group's pooled accuracy, in order of first appearance."""
    groups: dict[str, list[bool]] = {}
    for group, correct in verdicts:
        groups.setdefault(group, []).append(correct)
    return {group: sum(v) / len(v) for group, v in groups.items()}
