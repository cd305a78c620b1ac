"""BLiMP loading and aggregation (per paradigm, per phenomenon, overall) with a stand-in scorer."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from experiments.evaluate.blimp import aggregate, evaluate, load_paradigms
from lightning_modules.errors import InputError
from tests.conftest import SHARED_DATA

DATA = SHARED_DATA / "blimp"


def length_scorer(sentences: list[str]) -> list[float]:
    """A stand-in LM: shorter sentences are more probable (log p = -characters)."""
    return [-float(len(s)) for s in sentences]


def test_real_paradigms_with_a_subset_setting() -> None:
    paradigms = load_paradigms(DATA / "data", pairs_per_paradigm=20)
    assert len(paradigms) == 67 and all(len(p) == 20 for p in paradigms.values())
    metrics, items = evaluate(paradigms, length_scorer)
    assert metrics["pairs"] == len(items) == 67 * 20 and metrics["pairs_per_paradigm"] == 20
    assert len(metrics["phenomena"]) == 12
    expected = {uid: sum(len(p.good) < len(p.bad) for p in pairs) / 20 for uid, pairs in paradigms.items()}
    assert metrics["paradigms"] == pytest.approx(expected)
    assert metrics["accuracy"] == pytest.approx(sum(expected.values()) / 67)
    assert metrics["accuracy"] == pytest.approx(metrics["accuracy_pooled_pairs"])  # equal-sized paradigms
    argument = [uid for uid, pairs in paradigms.items() if pairs[0].phenomenon in ("argument_structure",
                                                                                  "s-selection")]
    assert len(argument) == 9
    assert metrics["phenomena"]["argument_structure"] == pytest.approx(sum(expected[u] for u in argument) / 9)


def test_paper_aggregates_are_means_over_paradigms() -> None:
    """The paper's phenomenon and overall rows equal our aggregation of its paradigm rows."""
    summary = (DATA / "results_summary/models_summary.jsonl").read_text().splitlines()
    rows = [json.loads(line) for line in summary]
    paradigms = [r for r in rows if r["UID"] != "overall"]
    aggregates = {r["linguistics_term"]: r for r in rows if r["UID"] == "overall"}
    assert len(paradigms) == 67 and len(aggregates) == 13  # 12 phenomena + overall
    for model in ("ngram", "lstm", "txl", "gpt2"):
        accuracies = {r["UID"]: r[model] for r in paradigms}
        terms = {r["UID"]: r["linguistics_term"] for r in paradigms}
        metrics = aggregate(accuracies, terms)
        assert metrics["accuracy"] == pytest.approx(aggregates["overall"][model], abs=1e-9)
        for term, value in metrics["phenomena"].items():
            assert value == pytest.approx(aggregates[term][model], abs=1e-9)


def write_paradigm(folder: Path, uid: str, term: str, pairs: list[tuple[str, str]]) -> None:
    with gzip.open(folder / f"{uid}.jsonl.gz", "wt", encoding="utf-8") as f:
        for i, (good, bad) in enumerate(pairs):
            record = {"sentence_good": good, "sentence_bad": bad, "UID": uid, "linguistics_term": term}
            f.write(json.dumps({**record, "field": "syntax", "pairID": str(i)}) + "\n")


def test_aggregation_by_hand(tmp_path: Path) -> None:
    write_paradigm(tmp_path, "a", "T1", [("ab", "abc"), ("abcd", "ab"), ("x", "y")])  # right, wrong, tie
    write_paradigm(tmp_path, "b", "T1", [("a", "ab"), ("a", "abc"), ("ab", "a")])  # 2 of 3
    write_paradigm(tmp_path, "c", "T2", [("a", "ab"), ("a", "ab"), ("a", "ab")])  # 3 of 3
    metrics, items = evaluate(load_paradigms(tmp_path), length_scorer)
    assert metrics["paradigms"] == pytest.approx({"a": 1 / 3, "b": 2 / 3, "c": 1.0})
    assert metrics["phenomena"] == pytest.approx({"T1": 0.5, "T2": 1.0})
    assert metrics["accuracy"] == pytest.approx(2 / 3)
    assert items[2] == {"uid": "a", "pair_id": 2, "phenomenon": "T1", "logprob_good": -1.0,
                        "logprob_bad": -1.0, "correct": False}
    first_two, _ = evaluate(load_paradigms(tmp_path, pairs_per_paradigm=2), length_scorer)
    assert first_two["paradigms"] == pytest.approx({"a": 0.5, "b": 1.0, "c": 1.0})


def test_malformed_paradigm_file(tmp_path: Path) -> None:
    (tmp_path / "bad.jsonl").write_text('{"sentence_good": "a"}\n')
    with pytest.raises(InputError) as e:
        load_paradigms(tmp_path)
    assert e.value.location == f"{tmp_path / 'bad.jsonl'}:1"


def test_scorer_must_return_one_value_per_sentence(tmp_path: Path) -> None:
    write_paradigm(tmp_path, "a", "T", [("a", "b")])
    with pytest.raises(ValueError, match="1 values for 2 sentences"):
        evaluate(load_paradigms(tmp_path), lambda sentences: [0.0])
