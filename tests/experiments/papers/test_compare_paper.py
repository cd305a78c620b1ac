"""``synbench reproduce compare``: the comparison's registry entry, its specs (every family on the same sentences
and items), and (slow) the demo end to end with a pretrained ``hf:`` model evaluated beside the trained ones."""

from __future__ import annotations

import json

import pandas as pd
import pytest
import yaml

from analysis.comparison_figures import BLIMP_PHENOMENON_HEATMAP, SG_CIRCUIT_HEATMAP, SG_VS_PPL
from analysis.report import write_report
from analysis.statistics import NOT_COMPARED
from experiments import papers
from experiments.experiment_spec import family_entry_files, load_spec, parse_spec
from experiments.papers import compare
from experiments.reproduce import run_pipeline, spec_for
from lightning_modules.errors import InputError
from tests.experiments.evaluate.test_hf_scorer import build_tiny_gpt2

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
    # the models the registered families ship for the spec (family_entries), located in their own files
    shipped = {m.name for m in spec.models if not m.where.startswith(f"{spec.path}:")}
    assert shipped and all(models[n].where.startswith(str(p)) for n in shipped
                           for p in [family_entry_files(spec.name)[0].parent.parent])
    trained = {name for name, m in models.items() if m.family in compare.FAMILIES} | shipped
    assert {models[name].seeds for name in trained} == {None}  # the spec's seeds for all
    # the same test words: every model's perplexity on the constituency corpus's test split, none elsewhere
    for task in ("ppl", "sg", "blimp", "marvin-linzen"):
        entries = [e for e in spec.evaluations if e["name"] == task and not e.get("label")]
        covered = [name for e in entries for name in e["models"]]
        assert sorted(covered) == sorted(trained), task  # each model once
        for key in ("split", "limit", "items_per_suite", "pairs_per_paradigm", "paradigms", "pairs_per_construction",
                    "constructions"):
            assert len({json.dumps(e.get(key)) for e in entries}) == 1, (task, key)
    # (the dependency parser proposes for the dependency corpus: the same sentences, the same words)
    assert {e["corpus"] for e in spec.evaluations if e["name"] == "ppl" and not e.get("label")} == {
        TEST_WORDS[scale], f"{TEST_WORDS[scale]}-sd"}
    # training sentences: the PTB (sample)'s trees or their dependency conversions
    corpora = {m.overrides["data.corpus"] for m in spec.models}
    assert corpora == {TEST_WORDS[scale], f"{TEST_WORDS[scale]}-sd", f"{TEST_WORDS[scale]}-ud"}


def test_family_entries_must_be_a_boolean(tmp_path):
    with pytest.raises(InputError) as e:
        parse_spec({"name": "x", "family_entries": "yes", "seeds": 0, "models": [{"family": "tg"}]},
                   tmp_path / "x.yaml", {("family_entries",): 3})
    assert str(e.value) == f"{tmp_path / 'x.yaml'}:3: family_entries: expected true or false"


def test_the_constituency_and_dependency_test_sets_have_the_same_words(prepared_data_dir):
    from experiments.evaluate.ppl import read_sentences

    words = {c: read_sentences(c, "test", None, str(prepared_data_dir)).words
             for c in ("ptb-sample", "ptb-sample-sd", "ptb-sample-ud")}
    assert words["ptb-sample"] == words["ptb-sample-sd"] == words["ptb-sample-ud"]


@pytest.mark.slow
def test_demo_end_to_end_with_a_pretrained_model_beside(tmp_path, prepared_data_dir, shared_data, monkeypatch):
    """The shipped demo plus a tiny local GPT-2 (``hf:DIR``, evaluated, never trained): every stage, and a
    report whose comparison has a row for every family, the standard transformer and the pretrained model,
    with Welch tests between models scored on the same items and the three figures."""
    monkeypatch.setenv("SYNBENCH_DATA", str(prepared_data_dir))
    gpt2 = build_tiny_gpt2(tmp_path / "gpt2", shared_data, n_positions=512)  # the test sentences' BPE pieces
    data = yaml.safe_load(load_spec("reproduce-compare-demo").path.read_text())
    data["models"].append({"source": f"hf:{gpt2}", "name": "gpt2-tiny"})
    for entry in data["evaluations"]:  # scored with the string models: the same words, items and pairs
        if "hf-scratch" in entry.get("models", []):
            entry["models"].append("gpt2-tiny")
    path = tmp_path / "reproduce-compare-demo.yaml"
    path.write_text(yaml.safe_dump(data))
    spec = load_spec(path)
    outcome = run_pipeline(spec, tmp_path / "runs", poll_s=1, write_report=write_report)
    assert outcome.failed == {}, outcome.failed
    analysis = tmp_path / "runs" / spec.name / "analysis"
    settings = json.loads((analysis / "settings.json").read_text())
    shipped = {m.name for m in spec.models if not m.where.startswith(f"{spec.path}:")}  # the families' own
    assert settings["runs"]["done"] == 35 + 2 * len(shipped) and settings["scale"] == "demo"
    text = outcome.report_md.read_text()
    section = text.split("## Comparison across models", 1)[1].split("\n## ", 1)[0]
    rows = {line.split(" | ")[0].lstrip("| ") for line in section.splitlines() if line.startswith("| ")}
    expected = {"tg", "txl-trees", "txl-terminals", "pushdown", "base-lm", "dtg", "dtg-eager", "dtg-swift",
                "txl-trans", "awd-lstm", "palm-u", "palm-s", "palm-rb", "esom", "dsom", "hf-scratch", "gpt2-tiny",
                *shipped}
    assert expected <= rows
    assert "PPL − gold-tree PPL" in section and "training tokens/s" in section
    assert "upper bound (N = 4 proposals" in section and "exact" in section
    for stem in (SG_VS_PPL, SG_CIRCUIT_HEATMAP, BLIMP_PHENOMENON_HEATMAP):
        assert (analysis / "figures" / f"{stem}.png").is_file(), stem
    assert f"figures/{SG_VS_PPL}.png" in text.split("\n## Setup", 1)[0]  # a key figure, on the first screen
    assert f"figures/{SG_CIRCUIT_HEATMAP}.png" in section and f"figures/{BLIMP_PHENOMENON_HEATMAP}.png" in section
    # the report reads in one screen: under 40 kB, the headline table (a row per model) in its first 40 lines
    assert len(text.encode()) < 40_000
    head = text.splitlines()[:40]
    assert head.index(next(line for line in head if line.startswith("| model |"))) + 2 + len(expected) <= 40
    welch = pd.read_csv(analysis / "welch.csv")
    tested = welch[(welch["metric"] == "ppl") & ~welch["note"].fillna("").str.startswith(NOT_COMPARED)]
    pairs = {frozenset(p) for p in zip(tested["model_a"], tested["model_b"], strict=True)}
    assert frozenset({"dsom", "hf-scratch"}) in pairs and frozenset({"tg", "pushdown"}) in pairs  # same words
    assert frozenset({"dtg", "tg"}) in pairs  # ptb-sample-sd/test = ptb-sample/test: the same words
    assert set(tested["correction"]) == {"holm"}
    # every paper's claimed directions between models trained here, checked on the same items
    claims = pd.read_csv(analysis / "claims.csv")
    assert set(claims["paper"]) == {"tg", "pushdown", "dtg", "palm", "som"}
    assert ("dtg", "txl-trans < txl-terminals") in set(zip(claims["paper"], claims["claim"], strict=True))
    assert not claims["verdict"].str.contains(NOT_COMPARED).any()  # the same words, SG items and BLiMP pairs
    assert "## The papers' claims, checked on these runs" in text
