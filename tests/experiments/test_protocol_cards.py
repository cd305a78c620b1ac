"""Protocol cards: every paper-scale spec resolves to its card (so a spec cannot drift from the paper silently),
the printed card, ``synbench reproduce PAPER --protocol``, and the generated docs page."""

from pathlib import Path

import pytest
import yaml

from experiments import papers
from experiments import protocol_cards as cards
from experiments.cli import main
from experiments.experiment_spec import load_spec

PAPERS = ("tg", "pushdown", "dtg", "palm", "som", "compare")


def test_every_registered_paper_with_a_paper_scale_has_a_card_naming_that_spec():
    for paper in papers.papers():
        if "paper" in paper.reproductions:
            assert cards.load_card(paper.key).spec == paper.reproductions["paper"]
    assert {p.key for p in papers.papers()} >= set(PAPERS)


@pytest.mark.parametrize("paper", PAPERS)
def test_the_paper_scale_spec_resolves_to_its_card(paper):
    card = cards.load_card(paper)
    assert cards.check(card, load_spec(card.spec)) == []


def test_a_drifted_spec_fails_its_card(tmp_path, monkeypatch):
    """The DTG spec without Pushdown-LM's beam takes the method's default (300, the card's); a spec stating
    another beam, or a card the spec does not have a model of, is reported line by line."""
    spec_file = Path(cards.__file__).parent / "configs" / "experiment" / "reproduce-dtg-paper.yaml"
    data = yaml.safe_load(spec_file.read_text())
    data["evaluations"] = [e for e in data["evaluations"] if e.get("models") != ["txl-tokens", "pushdown"]]
    data["evaluations"].append({"name": "sg", "beam": 20, "models": ["txl-tokens", "pushdown"]})
    drifted = tmp_path / "reproduce-dtg-paper.yaml"
    drifted.write_text(yaml.safe_dump(data))
    problems = cards.check(cards.load_card("dtg"), load_spec(drifted))
    assert "pushdown eval.sg.beam: reproduce-dtg-paper resolves to 20, the card says 300 (Pushdown §4.2 (beam 300))" \
        in problems
    assert any(p.startswith("pushdown eval.ppl.beam: ") for p in problems)  # the ppl entry is gone: unset
    card = cards.Card("dtg", "reproduce-dtg-paper", (cards.CardLine(("nobody",), "seeds", 1, "nowhere"),))
    problems = cards.check(card, load_spec("reproduce-dtg-paper"))
    assert "seeds: the card names model 'nobody', which reproduce-dtg-paper does not have" in problems
    assert "dtg: on no line of the card" in problems and "dtg eval.sg.beam: a scoring setting the card does not state" \
        in problems


def test_the_printed_card_states_value_paper_value_and_source():
    lines = cards.card_lines(cards.load_card("dtg"), load_spec("reproduce-dtg-paper"))
    assert ("pushdown eval.sg.beam 300 (paper: 300, Pushdown §4.2 (beam 300))") in lines
    assert ("dtg eval.sg.beam 100 (paper: 100, official beam_search_standard.py (BEAM 100; the paper's text, §4.2, "
            "says 300))") in lines
    assert lines[0] == ("dtg seeds 3 (paper: 1, DTG §4 (one run per model); ours: seed statistics for the Welch "
                        "tests)")
    # a smaller scale prints the same lines with its own values: what it reduces
    demo = cards.protocol_card("dtg", load_spec("reproduce-dtg-demo")).splitlines()
    assert demo[0].endswith("(the card describes reproduce-dtg-paper; values here are this spec's)")
    assert "dtg eval.sg.beam 4 (paper: 100, official beam_search_standard.py (BEAM 100; the paper's text, §4.2, " \
           "says 300))" in demo


def test_a_malformed_card_names_its_file(tmp_path, monkeypatch):
    monkeypatch.setattr(cards, "CARDS_DIR", tmp_path)
    (tmp_path / "x.yaml").write_text("spec: s\nsettings:\n  - {models: [m], setting: seeds, paper: 1, source: s, "
                                     "ours: 2}\n")
    with pytest.raises(cards.InputError, match="'ours' and 'why' go together"):
        cards.load_card("x")
    with pytest.raises(cards.InputError, match="has no protocol card"):
        cards.load_card("y")


def test_reproduce_protocol_prints_the_card_and_runs_nothing(tmp_path, capsys):
    assert main(["reproduce", "pushdown", "--scale", "paper", "--protocol", "--runs-dir", str(tmp_path / "r")]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "protocol card of pushdown (pushdown.yaml): pushdown-table2"
    assert "pushdown eval.parse.beam 300 (paper: 300, Pushdown §5 (beam size = 300))" in out
    assert "base-lm model.pushdown_layers 0 (paper: 0, Pushdown §4.2 (Base-LM: standard self-attention))" in out
    assert all(" (paper: " in line for line in out[1:])
    assert not (tmp_path / "r").exists()
    assert main(["reproduce", "nope", "--protocol"]) == 2
    assert capsys.readouterr().err.strip() == ("synbench: error: PAPER: unknown paper 'nope' (known: compare, dtg, "
                                               "palm, pushdown, som, tg)")


def test_the_docs_page_is_the_cards_and_the_readme_links_it():
    assert cards.PAGE.read_text(encoding="utf-8") == cards.page(), "regenerate: python -m experiments.protocol_cards"
    assert "(docs/protocol-cards.md)" in (cards.PAGE.parents[1] / "README.md").read_text(encoding="utf-8")
