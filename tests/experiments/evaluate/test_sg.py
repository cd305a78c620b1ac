"""SyntaxGym scoring end to end on the real Hu et al. (2020) suites with synthetic region surprisals."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from experiments.cli import main
from experiments.evaluate.sg import (
    Circuits,
    condition_text,
    load_circuits,
    load_suites,
    read_surprisals,
    region_sums,
    score,
)
from experiments.evaluate.tokenize import tokenize
from lightning_modules.errors import InputError
from tests.conftest import SHARED_DATA

DATA = SHARED_DATA / "syntaxgym_hu2020"
SUITES_DIR = DATA / "json"


@pytest.fixture(scope="module")
def suites():
    return load_suites(SUITES_DIR)


def designed_values(name: str, item: int, condition: str, region: int, rng: random.Random) -> float:
    """Region surprisals whose pass/fail pattern is known by hand (other regions are random)."""
    if name == "number_src" and region == 7:  # passes iff the item number is odd
        return {"match_sing": 1.0, "mismatch_sing": 2.0 if item % 2 else 0.5,
                "match_plural": 1.0, "mismatch_plural": 3.0}[condition]
    if name == "npz_ambig" and region == 5:  # [5>3] & [5>4] & [5-3 > 4-x]: passes iff x = 3.5, i.e. item % 3
        return {"ambig_nocomma": 5.0, "ambig_comma": 3.0, "unambig_nocomma": 4.0,
                "unambig_comma": 3.5 if item % 3 else 1.0}[condition]
    if name == "fgd_hierarchy" and region == 6:  # first prediction always holds; '=' holds within 1e-3
        return {"what_nogap": 2.0, "that_nogap": 1.0, "what_subjgap": 1.0, "that_subjgap": 1.0005}.get(
            condition, rng.uniform(0, 10))
    if name == "fgd_hierarchy" and region == 9:  # second prediction holds iff the item number is even
        values = {"what_nogap": 3.0, "that_nogap": 3.0005 if item % 2 == 0 else 3.5}
        return values.get(condition, rng.uniform(0, 10))
    return rng.uniform(0, 10)


def write_surprisals(path: Path, suites, names) -> None:
    rng = random.Random(0)
    lines = []
    for name in names:
        suite = suites[name]
        for it in suite.items:
            for condition in suite.conditions:
                for region in range(1, len(suite.region_names) + 1):
                    if it.is_empty(condition, region):
                        continue  # empty regions may be omitted
                    value = designed_values(name, it.number, condition, region, rng)
                    lines.append(json.dumps({"suite": name, "item": it.number, "condition": condition,
                                             "region": region, "surprisal": value}))
    path.write_text("\n".join(lines) + "\n")


def test_loads_all_34_suites(suites) -> None:
    assert len(suites) == 34 and sum(len(s.items) for s in suites.values()) == 842
    assert len(suites["fgd_hierarchy"].predictions) == 2 and len(suites["nn-nv-rpl"].items) == 1


def test_circuit_table_matches_the_data_folder() -> None:
    shared = json.loads((DATA / "circuits.json").read_text())
    ours = load_circuits()
    expected = {}
    for suite, info in shared["suites"].items():
        if not info["excluded_in_paper_analysis"]:
            expected.setdefault(info["circuit"], set()).add(suite)
    assert {k: set(v) for k, v in ours.circuits.items()} == expected
    assert len(ours.paper_suites) == 31


def test_end_to_end_on_three_suites(tmp_path, capsys, suites) -> None:
    path = tmp_path / "surprisals.jsonl"
    write_surprisals(path, suites, ["number_src", "npz_ambig", "fgd_hierarchy"])
    assert main(["eval", "sg", "--surprisals", str(path), "--suites-dir", str(SUITES_DIR), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert set(out) == {"suites", "circuits", "score", "score_suite_set", "suite_set_scores"}
    assert set(out["suites"]) == {"number_src", "npz_ambig", "fgd_hierarchy"}
    number = out["suites"]["number_src"]
    assert number["items"] == {str(i): i % 2 == 1 for i in range(1, 20)}
    assert number["accuracy"] == pytest.approx(10 / 19)
    assert number["items_all_predictions"] == number["items"]
    npz = out["suites"]["npz_ambig"]
    assert npz["items"] == {str(i): i % 3 != 0 for i in range(1, 25)}
    assert npz["accuracy"] == pytest.approx(16 / 24)
    fgd = out["suites"]["fgd_hierarchy"]
    assert fgd["accuracy"] == 1.0  # only the first prediction decides an item
    assert fgd["items_all_predictions"] == {str(i): i % 2 == 0 for i in range(1, 25)}
    assert fgd["accuracy_all_predictions"] == 0.5
    # partial runs: circuits with missing suites and the overall scores are null
    assert out["circuits"]["Agreement"] is None and out["score"] is None
    assert out["score_suite_set"] == "hu2020-31" and out["suite_set_scores"] == {"hu2020-31": None, "all-34": None}


def test_circuits_and_overall_are_means_of_suite_accuracies(tmp_path, suites) -> None:
    path = tmp_path / "s.jsonl"
    write_surprisals(path, suites, ["number_src", "npz_ambig", "fgd_hierarchy"])
    table = read_surprisals(path, suites)
    out = score(suites, table, Circuits({"A": ("number_src", "npz_ambig"), "B": ("fgd_hierarchy",)}))
    assert out["circuits"] == {"A": pytest.approx((10 / 19 + 16 / 24) / 2), "B": 1.0}
    assert out["score"] == pytest.approx((10 / 19 + 16 / 24 + 1.0) / 3)


def test_overall_score_uses_the_31_paper_suites_and_all_34_beside(tmp_path, suites) -> None:
    path = tmp_path / "all.jsonl"
    write_surprisals(path, suites, sorted(suites))
    out = score(suites, read_surprisals(path, suites))
    paper = load_circuits().paper_suites
    expected = sum(out["suites"][s]["accuracy"] for s in paper) / 31
    assert out["score"] == pytest.approx(expected)
    assert set(out["suites"]) - set(paper) == {"fgd-embed3", "fgd-embed4", "nn-nv-rpl"}
    # the official DTG script's set: every one of the 34 suites, each named in the result
    assert out["suite_set_scores"]["hu2020-31"] == out["score"] and out["score_suite_set"] == "hu2020-31"
    every = sum(out["suites"][s]["accuracy"] for s in suites) / 34
    assert out["suite_set_scores"]["all-34"] == pytest.approx(every) and every != pytest.approx(expected)
    for circuit, members in load_circuits().circuits.items():
        assert out["circuits"][circuit] == pytest.approx(sum(out["suites"][s]["accuracy"] for s in members)
                                                         / len(members))


def test_region_sums_by_character_offsets(suites) -> None:
    regions = suites["npz_ambig"].items[0].conditions["ambig_nocomma"]  # region 3 is empty
    text, spans = condition_text(regions)
    assert text == "As the criminal shot the woman yelled at the top of her lungs" and spans[2] is None
    tokens = tokenize(text)
    sums = region_sums(spans, [(t.start, t.end) for t in tokens], [1.0] * len(tokens))
    assert sums == [3.0, 1.0, 0.0, 2.0, 1.0, 6.0]


def bad_line(tmp_path: Path, suites, record: dict | str, drop: tuple | None = None) -> Path:
    path = tmp_path / "s.jsonl"
    write_surprisals(path, suites, ["number_src"])
    lines = path.read_text().splitlines()
    if drop:
        keys = ("item", "condition", "region")
        lines = [ln for ln in lines if tuple(json.loads(ln)[k] for k in keys) != drop]
    lines.insert(2, record if isinstance(record, str) else json.dumps(record))
    path.write_text("\n".join(lines) + "\n")
    return path


def rec(**changes) -> dict:
    record = {"suite": "number_src", "item": 1, "condition": "match_sing", "region": 1, "surprisal": 1.0}
    return {**record, **changes}


@pytest.mark.parametrize(("record", "message"), [
    ("{not json", "invalid JSON"),
    (rec(suite="nope"), "unknown suite"),
    (rec(item=99), "no item"),
    (rec(condition="x"), "no condition"),
    (rec(region=9), "no region"),
    (rec(surprisal="x"), "a number"),
    (rec(condition="match_plural"), "duplicate"),  # the file's first line is item 1, match_plural, region 1
    ({"suite": "number_src", "item": 1}, "expected"),
])
def test_malformed_surprisal_lines_exit_2(tmp_path, capsys, suites, record, message) -> None:
    path = bad_line(tmp_path, suites, record)
    assert main(["eval", "sg", "--surprisals", str(path), "--suites-dir", str(SUITES_DIR), "--json"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith(f"synbench: error: {path}:3: ") and message in captured.err


def test_missing_nonempty_region_is_an_error(tmp_path, suites) -> None:
    path = bad_line(tmp_path, suites, "", drop=(4, "mismatch_plural", 7))
    expected = "missing surprisal for suite number_src item 4 condition mismatch_plural region 7"
    with pytest.raises(InputError, match=expected):
        read_surprisals(path, suites)


def test_malformed_suites_exit_2(tmp_path, capsys) -> None:
    suite = json.loads((SUITES_DIR / "number_src.json").read_text())
    suite["predictions"][0]["formula"] = "[(7;%match_sing%) < (7;%mismatch_sing%)] &"
    (tmp_path / "number_src.json").write_text(json.dumps(suite))
    surprisals = tmp_path / "s.jsonl"
    surprisals.write_text("")
    assert main(["eval", "sg", "--surprisals", str(surprisals), "--suites-dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"synbench: error: {tmp_path / 'number_src.json'}:1: predictions[0]: cannot parse")

    suite = json.loads((SUITES_DIR / "number_src.json").read_text())
    suite["predictions"][0]["formula"] = "(7;%nope%) < 1"
    (tmp_path / "number_src.json").write_text(json.dumps(suite))
    assert main(["eval", "sg", "--surprisals", str(surprisals), "--suites-dir", str(tmp_path)]) == 2
    assert "unknown condition 'nope'" in capsys.readouterr().err

    del suite["items"][0]["conditions"][0]["regions"][3]
    (tmp_path / "number_src.json").write_text(json.dumps(suite))
    assert main(["eval", "sg", "--surprisals", str(surprisals), "--suites-dir", str(tmp_path)]) == 2
    assert "items[0].conditions[0]: expected 8 regions" in capsys.readouterr().err

    (tmp_path / "number_src.json").write_text("{\n  \"meta\": \n}")
    assert main(["eval", "sg", "--surprisals", str(surprisals), "--suites-dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"synbench: error: {tmp_path / 'number_src.json'}:3: invalid JSON")
