"""``synbench eval sg --suites DIR``: any folder of SyntaxGym suites from a model, end to end: scored as the built-in
suites, its own overall score, cached, a changed folder scored again, and a suite of unknown structure as one
``FILE:LINE`` error."""

from __future__ import annotations

import json

from experiments.cli import main
from lightning_modules.data.checksums import file_sha256
from tests.conftest import SHARED_DATA

STAGED = SHARED_DATA / "syntaxgym_hu2020" / "json"


def run(capsys, *argv):
    code = main(["eval", "sg", *map(str, argv)])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def write_suite(folder, name: str, source: str = "number_src", items: int = 2, indent: int | None = None) -> dict:
    """A suite of the staged ``source`` renamed ``name`` and cut to its first ``items`` items."""
    suite = json.loads((STAGED / f"{source}.json").read_text())
    suite["meta"]["name"], suite["items"] = name, suite["items"][:items]
    (folder / f"{name}.json").write_text(json.dumps(suite, indent=indent))
    return suite


def test_a_folder_of_suites_scores_as_the_builtin_ones_and_a_changed_one_again(capsys, tiny_lm, prepared_data_dir,
                                                                               tmp_path):
    folder = tmp_path / "my-suites"
    folder.mkdir()
    write_suite(folder, "agreement_mine")
    write_suite(folder, "mvrr", source="mvrr")
    code, out, err = run(capsys, tiny_lm, "--suites", folder, "--items-per-suite", 2, "--json")
    assert code == 0 and "computed 4 of 4 items" in err
    result = json.loads(out)
    assert sorted(result["suites"]) == ["agreement_mine", "mvrr"]
    assert result["score_suite_set"] == "folder" and result["score"] == (
        result["suites"]["agreement_mine"]["accuracy"] + result["suites"]["mvrr"]["accuracy"]) / 2
    assert result["suite_set_scores"]["hu2020-31"] is None  # never mistaken for the paper's overall score
    assert result["settings"]["suites_dir"] == str(folder)
    record = json.loads((tmp_path / result["out"] / "results.json").read_text())
    assert record["data"]["suites"]["sha256"] == file_sha256(folder)
    assert record["config"]["suites_sha256"] == file_sha256(folder)

    # the same suite scores as the built-in one: the same region surprisals from the same model
    code, out, _ = run(capsys, tiny_lm, "--suites", "mvrr", "--items-per-suite", 2, "--data-dir",
                       prepared_data_dir, "--json")
    builtin = json.loads(out)
    assert builtin["suites"]["mvrr"] == result["suites"]["mvrr"]
    ours = [json.loads(x) for x in open(f"{result['out']}/items.jsonl")]
    theirs = [json.loads(x) for x in open(f"{builtin['out']}/items.jsonl")]
    assert [r["regions"] for r in ours if r["suite"] == "mvrr"] == [r["regions"] for r in theirs]

    code, out, err = run(capsys, tiny_lm, "--suites", folder, "--items-per-suite", 2, "--json")
    assert code == 0 and "computed 0 of 4 items" in err and json.loads(out) == result  # from the cache

    fixed = tmp_path / "out"
    assert run(capsys, tiny_lm, "--suites", folder, "--out", fixed)[0] == 0
    suite = write_suite(folder, "agreement_mine")
    suite["predictions"] = [{"type": "formula", "formula": "(7;%mismatch_sing%) > (7;%match_sing%)"}]
    (folder / "agreement_mine.json").write_text(json.dumps(suite))  # the folder changes (not its words)
    code, out, err = run(capsys, tiny_lm, "--suites", folder, "--out", fixed, "--json")
    assert code == 0 and "computed 4 of 4 items" in err  # scored again, never the old folder's cache
    assert json.loads((fixed / "results.json").read_text())["data"]["suites"]["sha256"] == file_sha256(folder)

    code, out, err = run(capsys, tiny_lm, "--suites", folder, "--suites-sha256", "0" * 64)
    assert code == 2 and err.startswith(f"synbench: error: {folder}: changed since the evaluation was planned")


def test_a_suite_of_unknown_structure_is_one_error_line_at_its_line(capsys, tiny_lm, tmp_path):
    folder = tmp_path / "suites"
    folder.mkdir()
    suite = write_suite(folder, "broken", indent=1)
    del suite["items"][1]["item_number"]
    path = folder / "broken.json"
    text = json.dumps(suite, indent=1)
    path.write_text(text)
    code, out, err = run(capsys, tiny_lm, "--suites", folder, "--out", tmp_path / "out")
    assert code == 2 and not out and err.count("\n") == 1
    items_line = next(k for k, x in enumerate(text.splitlines(), 1) if x.startswith(' "items"'))
    second = [k for k, x in enumerate(text.splitlines(), 1) if x == "  {" and k > items_line][1]  # items[1] opens
    assert err == f"synbench: error: {path}:{second}: items[1]: missing item_number\n"
    path.write_text("[1, 2]\n")
    code, out, err = run(capsys, tiny_lm, "--suites", folder)
    assert code == 2 and err == f"synbench: error: {path}:1: (top level): a suite is a JSON object\n"
    assert not (tmp_path / "out").exists()
    code, out, err = run(capsys, tiny_lm, "--suites", tmp_path / "none")
    assert code == 2 and "suites folder not found" in err
