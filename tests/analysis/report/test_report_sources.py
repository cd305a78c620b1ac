"""Reading the analysis folder: a missing, unreadable or malformed file is a problem the report states, never
an exception (``analysis.report.sources``)."""

from __future__ import annotations

import json

import pytest
from report_folder import analysis_folder, write_csv

from analysis import report
from analysis.report.sources import CSV_COLUMNS, read_sources
from lightning_modules.errors import InputError


def test_missing_and_unreadable_files_are_reported_not_raised(tmp_path) -> None:
    folder = analysis_folder(tmp_path)
    for name in ("summary.csv", "variance.csv", "mdl.csv", "settings.json"):
        (folder / name).unlink()
    (folder / "regressions.json").write_text("{not json")
    (folder / "welch.csv").write_text("metric,model_a\nppl,tg\n")
    md, page = (p.read_text() for p in report.write_report(folder))
    for text in (md, page):
        assert "settings: missing: settings.json not found. The scale, seeds and reduced settings" in text
        assert "results: missing: summary.csv not found." in text
        assert "variance components: missing: variance.csv not found." in text
        assert "MDL probing: missing: mdl.csv not found." in text
        assert "regressions: unreadable: regressions.json:" in text
    assert "Welch tests: malformed: welch.csv lacks the column(s) model_b, t, df, p, p_adjusted." in md
    assert report.headline_table(folder) == "results: missing: summary.csv not found.\n"
    with pytest.raises(InputError, match="not an analysis folder"):
        report.write_report(tmp_path / "nowhere")


def test_a_complete_folder_is_read_without_problems(tmp_path) -> None:
    folder = analysis_folder(tmp_path)
    sources = read_sources(folder)
    assert sources.problems == {} and sources.out_dir == folder and sources.analysis_dir == folder
    assert set(sources.tables) == set(CSV_COLUMNS) and sources.settings["experiment"] == "tg-demo"
    assert set(sources.regressions) == {"frequency", "copying"} and sources.figure_notes == []
    assert read_sources(folder, tmp_path / "out").out_dir == tmp_path / "out"


def test_labels_stay_text_and_only_empty_cells_are_missing(tmp_path) -> None:
    folder = analysis_folder(tmp_path)
    write_csv(folder / "summary.csv", [{"metric": "1", "model": "NA", "n": 3, "mean": None, "sd": 0.1}])
    summary = read_sources(folder).tables["summary"]
    assert summary["metric"].tolist() == ["1"] and summary["model"].tolist() == ["NA"]
    assert summary["mean"].isna().all()


def test_each_unusable_file_has_its_problem(tmp_path) -> None:
    folder = analysis_folder(tmp_path)
    (folder / "settings.json").write_text("[1, 2]")
    (folder / "regressions.json").write_text('"text"')
    (folder / "summary.csv").write_text("metric,model,n,mean,sd\n")
    (folder / "welch.csv").write_bytes(b"\xff\xfe\x00")
    (folder / "figures").mkdir()
    (folder / "figures" / "notes.json").write_text(json.dumps(["sg_circuits: no circuits"]))
    sources = read_sources(folder)
    assert sources.problems["settings"] == "malformed: settings.json is not a JSON object"
    assert sources.problems["regressions"] == "malformed: regressions.json is not a JSON object"
    assert sources.problems["summary"] == "empty: summary.csv has no rows"
    assert sources.problems["welch"].startswith("unreadable: welch.csv: ")
    assert sources.settings == {} and sources.regressions is None and "summary" not in sources.tables
    assert sources.figure_notes == ["sg_circuits: no circuits"]
    assert set(sources.tables) == {"variance", "mdl"}
