"""``synbench reproduce compare``: the comparison's registry entry, its specs (every family on the same sentences
and items), and (slow) the demo end to end with a pretrained ``hf:`` model evaluated beside the trained ones."""

from __future__ import annotations

import json

import pytest

from experiments import papers
from experiments.papers import compare
from experiments.reproduce import spec_for

SCALES = ("demo", "cpu-small", "paper")
TEST_WORDS = {"demo": "ptb-sample", "cpu-small": "ptb-sample", "paper": "ptb"}


def test_registered_without_published_numbers_and_found_for_its_experiments():
    paper = papers.get("compare")
    assert paper is compare.PAPER and paper.reproductions == {s: f"reproduce-compare-{s}" for s in SCALES}
    assert paper.numbers_for("tg", "ppl") == [] and paper.numbers_for("hf-scratch", "sg", "ptb-sample") == []
    for scale in SCALES:
        families = {m.family for m in spec_for("compare", scale).models}
        assert papers.paper_for(families) is paper
    assert papers.paper_for(["tg", "txl-trees", "txl-terminals", "proposal-parser"]).key == "tg"


@pytest.mark.parametrize("scale", SCALES)
def test_every_family_on_the_same_sentences_seeds_and_items(scale):
    spec = spec_for("compare", scale)
    models = {m.name: m for m in spec.models}
    assert set(compare.FAMILIES) <= {m.family for m in spec.models}
    assert {m.seeds for m in spec.models if m.family in compare.FAMILIES} == {None}  # the spec's seeds for all
    trained = {name for name, m in models.items() if m.family in compare.FAMILIES}
    # the same test words: every model's perplexity on the constituency corpus's test split, none elsewhere
    for task in ("ppl", "sg", "blimp"):
        entries = [e for e in spec.evaluations if e["name"] == task and not e.get("label")]
        covered = [name for e in entries for name in e["models"]]
        assert sorted(covered) == sorted(trained), task  # each model once
        for key in ("split", "limit", "items_per_suite", "pairs_per_paradigm", "paradigms"):
            assert len({json.dumps(e.get(key)) for e in entries}) == 1, (task, key)
    # (the dependency parser proposes for the dependency corpus: the same sentences, the same words)
    assert {e["corpus"] for e in spec.evaluations if e["name"] == "ppl" and not e.get("label")} == {
        TEST_WORDS[scale], f"{TEST_WORDS[scale]}-sd"}
    # training sentences: the PTB (sample)'s trees or their dependency conversions
    corpora = {m.overrides["data.corpus"] for m in spec.models}
    assert corpora == {TEST_WORDS[scale], f"{TEST_WORDS[scale]}-sd", f"{TEST_WORDS[scale]}-ud"}


def test_the_constituency_and_dependency_test_sets_have_the_same_words(prepared_data_dir):
    from experiments.evaluate.ppl import read_sentences

    words = {c: read_sentences(c, "test", None, str(prepared_data_dir)).words
             for c in ("ptb-sample", "ptb-sample-sd", "ptb-sample-ud")}
    assert words["ptb-sample"] == words["ptb-sample-sd"] == words["ptb-sample-ud"]
