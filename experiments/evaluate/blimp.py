"""BLiMP (Warstadt et al. 2020): 67 paradigms of minimal pairs, scored by sentence log-probabilities.

A pair is correct when the model gives the acceptable sentence a strictly higher log-probability than the
unacceptable one (the paper's "simple LM method"; a tie counts as wrong). Accuracy is reported per
paradigm (``UID``), per phenomenon and overall. Phenomena are the paper's 12 (its Table 3 and
``results_summary/models_summary.jsonl``): the ``linguistics_term`` field, except that the data files tag
``animate_subject_passive`` and ``animate_subject_trans`` ``s-selection`` while the paper counts them under
``argument_structure`` (9 paradigms); items keep the raw field.

Aggregation convention: the paper's phenomenon and overall accuracies pool the pairs; since every paradigm
has the same number of pairs (1,000, or the first ``k`` of each under a subset setting), pooling pairs and
averaging paradigm accuracies give the same number. We compute the mean over paradigms (macro) and record
the convention; with unequal paradigm sizes (a custom data folder) the two would differ, so the pooled
pair accuracy is reported as well.
"""

from __future__ import annotations

import gzip
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from lightning_modules.data.json_input import json_line
from lightning_modules.errors import InputError

PAPER_PHENOMENON = {"s-selection": "argument_structure"}
CONVENTION = (
    "pair correct iff log p(good) > log p(bad) (ties wrong); paradigm accuracy = mean over its pairs; "
    "phenomenon and overall accuracy = mean over paradigms (= pooled pairs when paradigms are equal-sized)"
)


@dataclass(frozen=True)
class Pair:
    uid: str
    pair_id: int
    good: str
    bad: str
    phenomenon: str  # linguistics_term
    field: str


def load_paradigm(path: str | Path, limit: int | None = None) -> list[Pair]:
    """Read one ``<UID>.jsonl(.gz)`` paradigm, keeping the first ``limit`` pairs when given."""
    path = Path(path)
    opener = gzip.open if path.suffix == ".gz" else open
    pairs: list[Pair] = []
    try:
        with opener(path, "rt", encoding="utf-8") as f:
            for lineno, line in enumerate(f, start=1):
                if limit is not None and len(pairs) >= limit:
                    break
                if not line.strip():
                    continue
                pairs.append(_pair(line, f"{path}:{lineno}"))
    except (OSError, EOFError, UnicodeDecodeError) as e:
        raise InputError(f"cannot read paradigm: {e}", str(path)) from None
    if not pairs:
        raise InputError("no pairs in the paradigm", str(path))
    return pairs


def _pair(line: str, loc: str) -> Pair:
    rec = json_line(line, loc)
    keys = ("sentence_good", "sentence_bad", "UID", "linguistics_term", "field", "pairID")
    if not isinstance(rec, dict) or any(k not in rec for k in keys):
        raise InputError(f"a BLiMP pair needs the fields {', '.join(keys)}", loc)
    if not all(isinstance(rec[k], str) for k in keys):
        raise InputError("BLiMP fields must be strings", loc)
    try:
        pair_id = int(rec["pairID"])
    except ValueError:
        raise InputError(f"pairID is not a number: {rec['pairID']!r}", loc) from None
    return Pair(rec["UID"], pair_id, rec["sentence_good"], rec["sentence_bad"], rec["linguistics_term"],
                rec["field"])


def load_paradigms(directory: str | Path, pairs_per_paradigm: int | None = None) -> dict[str, list[Pair]]:
    """All paradigms of a BLiMP ``data`` folder by UID; ``pairs_per_paradigm`` keeps the first k of each."""
    directory = Path(directory)
    if not directory.is_dir():
        raise InputError("BLiMP data folder not found", str(directory))
    if pairs_per_paradigm is not None and pairs_per_paradigm < 1:
        raise InputError(f"pairs per paradigm must be >= 1, got {pairs_per_paradigm}")
    files = sorted([*directory.glob("*.jsonl.gz"), *directory.glob("*.jsonl")])
    paradigms: dict[str, list[Pair]] = {}
    for path in files:
        pairs = load_paradigm(path, pairs_per_paradigm)
        uid = pairs[0].uid
        if any(p.uid != uid for p in pairs):
            raise InputError("pairs of several paradigms (UIDs) in one file", str(path))
        if uid in paradigms:
            raise InputError(f"paradigm {uid} appears twice", str(path))
        paradigms[uid] = pairs
    if not paradigms:
        raise InputError("no *.jsonl(.gz) paradigms in the folder", str(directory))
    return paradigms


def is_correct(logprob_good: float, logprob_bad: float) -> bool:
    """A pair's verdict: the acceptable sentence strictly more probable (a tie is wrong; -inf compares as IEEE)."""
    return logprob_good > logprob_bad


def aggregate(accuracy: dict[str, float], term: dict[str, str]) -> dict:
    """Paradigm accuracies (by UID) -> per-phenomenon means (paper grouping) and the overall mean."""
    by_phenomenon: dict[str, list[float]] = {}
    for uid, acc in accuracy.items():
        by_phenomenon.setdefault(PAPER_PHENOMENON.get(term[uid], term[uid]), []).append(acc)
    return {
        "accuracy": sum(accuracy.values()) / len(accuracy),
        "phenomena": {name: sum(v) / len(v) for name, v in sorted(by_phenomenon.items())},
        "paradigms": dict(accuracy),
    }


def evaluate(
    paradigms: dict[str, list[Pair]],
    score_sentences: Callable[[list[str]], Sequence[float]],
) -> tuple[dict, list[dict]]:
    """Score every pair with ``score_sentences`` (sentence log-probabilities, one call per paradigm).

    Returns ``(metrics, items)``: the accuracies (overall, per phenomenon, per paradigm, pooled over pairs)
    with the convention and the number of pairs per paradigm, and one record per pair for ``items.jsonl``.
    """
    items: list[dict] = []
    accuracy: dict[str, float] = {}
    for uid, pairs in sorted(paradigms.items()):
        sentences = [s for p in pairs for s in (p.good, p.bad)]
        scores = list(score_sentences(sentences))
        if len(scores) != len(sentences):
            raise ValueError(f"score_sentences returned {len(scores)} values for {len(sentences)} sentences")
        correct = 0
        for k, p in enumerate(pairs):
            good, bad = float(scores[2 * k]), float(scores[2 * k + 1])
            correct += is_correct(good, bad)
            items.append({"uid": uid, "pair_id": p.pair_id, "phenomenon": p.phenomenon,
                          "logprob_good": good, "logprob_bad": bad, "correct": is_correct(good, bad)})
        accuracy[uid] = correct / len(pairs)
    sizes = {uid: len(pairs) for uid, pairs in paradigms.items()}
    metrics = {
        **aggregate(accuracy, {uid: pairs[0].phenomenon for uid, pairs in paradigms.items()}),
        "accuracy_pooled_pairs": sum(it["correct"] for it in items) / len(items),
        "pairs": len(items),
        "pairs_per_paradigm": sizes[next(iter(sizes))] if len(set(sizes.values())) == 1 else sizes,
        "convention": CONVENTION,
    }
    return metrics, items
