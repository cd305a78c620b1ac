"""The paper registry: lookup and its errors, which paper an experiment gets, the model order, and that every
registered reproduction is a loadable spec of its paper, at its scale, whose full protocol exists."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from experiments import papers
from experiments.experiment_spec import load_spec
from experiments.papers import palm, pushdown, som, tg
from lightning_modules.errors import InputError

REPO = Path(__file__).resolve().parents[3]


def test_the_built_in_papers_are_registered_and_found_by_key():
    assert [p.key for p in papers.papers()] == ["compare", "dtg", "palm", "pushdown", "som", "tg"]  # by module name
    assert papers.get("tg") is tg.PAPER and papers.get("pushdown") is pushdown.PAPER
    assert papers.get("palm") is palm.PAPER and papers.get("som") is som.PAPER
    known = "compare, dtg, palm, pushdown, som, tg"
    with pytest.raises(InputError, match=rf"unknown paper 'nope' \(known: {known}\)") as error:
        papers.get("nope")
    assert error.value.location == "PAPER"


def test_a_key_registers_once(monkeypatch):
    monkeypatch.setattr(papers, "_PAPERS", dict(papers._PAPERS))
    other = papers.Paper("other", "Someone (2024)", "paper", "not comparable", "provenance", ("gpt",), ("gpt",),
                         lambda model, metric, data=None: [])
    assert papers.register(other) is other and papers.get("other") is other
    assert papers.paper_for(["gpt", "proposal-parser"]) is other
    with pytest.raises(ValueError, match="already registered"):
        papers.register(other)


@pytest.mark.parametrize(("families", "key"), [
    (["tg", "txl-trees", "txl-terminals", "proposal-parser"], "tg"),  # reproduce-tg-*
    (["pushdown", "base-lm"], "pushdown"),  # pushdown-table2, pushdown-dyck
    (["pushdown", "base-lm", "tg", "proposal-parser"], "pushdown"),  # pushdown-ptb-cpu: most are Pushdown's
    (["tg", "txl-trees", "pushdown"], "tg"),  # most are TG's
    (["tg", "pushdown"], "pushdown"),  # a tie: the paper whose tables show both (Pushdown's quote TG's)
    (["awd-lstm", "palm-u", "palm-s", "palm-rb"], "palm"),  # reproduce-palm-*
    (["som"], "som"),  # reproduce-som-*
    (["txl-terminals", "proposal-parser"], "tg"),
    (["gpt", "proposal-parser"], None),  # no paper describes them
    ([], None),
])
def test_paper_for_picks_the_paper_describing_most_families(families, key):
    paper = papers.paper_for(families)
    assert (paper.key if paper else None) == key


def test_model_order_follows_the_papers_tables_then_the_rest_sorted():
    assert papers.model_order(["x", "txl-terminals", "tg-doc", "tg", "base-lm", "pushdown", "a"]) == [
        "pushdown", "base-lm", "tg", "txl-terminals", "tg-doc", "a", "x"]


def test_every_reproduction_loads_and_names_an_existing_full_protocol():
    for paper in papers.papers():
        assert set(paper.reproductions) >= {"demo", "cpu-small", "paper"}, paper.key
        for scale, name in paper.reproductions.items():
            spec = load_spec(name)
            families = {m.family for m in spec.models}
            assert papers.paper_for(families) is paper, (paper.key, scale)
            # the scale the report names (``synbench analyze``: the analysis section's, else the name's end)
            assert (spec.analysis.get("scale") or spec.name.rsplit("-", 1)[-1]) == scale, name
            if scale == "paper":
                assert not spec.compare_to, name
            else:
                assert spec.compare_to == paper.reproductions["paper"], name
                load_spec(spec.compare_to)


def test_the_registry_and_the_reproduce_stages_do_not_import_analysis():
    code = 'import experiments.reproduce, sys; assert not any(m.startswith("analysis") for m in sys.modules)'
    subprocess.run([sys.executable, "-c", code], cwd=REPO, check=True)
