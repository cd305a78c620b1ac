"""``synbench data stats``: the issue's numbers, JSON shape, table output, and errors (exit 2, FILE:LINE)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from experiments.cli import main

REPO_ROOT = Path(__file__).resolve().parents[2]

# Counts recorded in the datasets' SOURCE.md files (verified there independently of this project).
UD_COUNTS = {
    "ud-gum": (1464, 28397),
    "ud-partut": (153, 3408),
    "ud-lines": (1121, 19984),
    "ud-pud": (1000, 21180),
    "ud-pronouns": (285, 1705),
}


def stats_json(capsys: pytest.CaptureFixture[str], *args: str) -> dict:
    assert main(["data", "stats", *args, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_ptb_sample(prepared_data_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    stats = stats_json(capsys, "ptb-sample", "--data-dir", str(prepared_data_dir))
    assert list(stats) == ["train", "valid", "test", "total"]
    assert stats["total"]["sentences"] == 3914
    assert stats["total"]["words"] == 94084  # overt tokens: 100676 preterminals minus 6592 -NONE-
    assert stats["total"]["documents"] == 199
    for key in ("sentences", "words", "documents"):
        assert sum(stats[s][key] for s in ("train", "valid", "test")) == stats["total"][key]
    assert stats["total"]["max_depth"] == max(stats[s]["max_depth"] for s in ("train", "valid", "test"))
    total = stats["total"]
    assert sum(total["pos_tags"].values()) == total["words"]  # one preterminal per overt word after cleaning
    assert "-NONE-" not in total["pos_tags"] and "NP-SBJ" not in total["phrase_labels"]
    assert {"NP", "VP", "S", "SBAR"} <= set(total["phrase_labels"]) and "-LRB-" in total["pos_tags"]


def test_ud_ewt(prepared_data_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    stats = stats_json(capsys, "ud-ewt", "--data-dir", str(prepared_data_dir))
    assert {s: (c["sentences"], c["words"]) for s, c in stats.items()} == {
        "train": (12544, 204577),
        "dev": (2001, 25147),
        "test": (2077, 25094),
        "total": (16622, 254818),
    }
    assert "phrase_labels" not in stats["total"]


@pytest.mark.parametrize("name", sorted(UD_COUNTS))
def test_ud_test_sets(prepared_data_dir: Path, capsys: pytest.CaptureFixture[str], name: str) -> None:
    stats = stats_json(capsys, name, "--data-dir", str(prepared_data_dir))
    assert (stats["test"]["sentences"], stats["test"]["words"]) == UD_COUNTS[name]


def test_file_argument_and_table(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "t.mrg"
    path.write_text("( (S (NP-SBJ-1 (NNP Ann)) (VP (VBD left) (NP (-NONE- *-1))) (. .)) )\n")
    stats = stats_json(capsys, str(path))
    assert (
        stats["file"]
        == stats["total"]
        == {
            "documents": 1,
            "sentences": 1,
            "words": 3,
            "max_depth": 4,  # S -> VP -> VBD -> left
            "phrase_labels": {"NP": 1, "S": 1, "VP": 1},
            "pos_tags": {".": 1, "NNP": 1, "VBD": 1},
        }
    )
    assert main(["data", "stats", str(path)]) == 0
    out = capsys.readouterr().out
    assert "total" in out and "phrase labels (total): NP 1, S 1, VP 1" in out


def test_table_uses_thousands_separators(prepared_data_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["data", "stats", "ptb-sample", "--data-dir", str(prepared_data_dir)]) == 0
    assert "3,914" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("name", "content", "line", "message"),
    [
        ("unbalanced.mrg", "(S (NP (NN a))\n\n", 1, "unbalanced brackets"),
        ("nolabel.mrg", "(S (NN a))\n(S () (NN b))\n", 2, "bracket without a label"),
        ("empty.mrg", "", 1, "no trees found (empty file)"),
        (
            "badhead.conllu",
            "1\ta\t_\t_\t_\t_\t0\troot\t_\t_\n2\tb\t_\t_\t_\t_\t7\tdep\t_\t_\n",
            2,
            "bad HEAD",
        ),
        ("columns.conllu", "1\ta\t_\t_\t_\t_\t0\troot\t_\n", 1, "expected 10 tab-separated columns"),
        (
            "cycle.conllu",
            "1\ta\t_\t_\t_\t_\t0\troot\t_\t_\n2\tb\t_\t_\t_\t_\t3\tdep\t_\t_\n"
            "3\tc\t_\t_\t_\t_\t2\tdep\t_\t_\n",
            2,
            "cycle",
        ),
    ],
)
def test_malformed_input(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str, content: str, line: int, message: str
) -> None:
    path = tmp_path / name
    path.write_text(content)
    assert main(["data", "stats", str(path), "--json"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith(f"synbench: error: {path}:{line}: ") and message in captured.err
    assert captured.err.count("\n") == 1


def test_unprepared_and_unknown_corpora(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["data", "stats", "ptb-sample", "--data-dir", str(tmp_path)]) == 2
    assert "not prepared" in capsys.readouterr().err
    assert main(["data", "stats", "nothing-here", "--data-dir", str(tmp_path)]) == 2
    assert capsys.readouterr().err.startswith("synbench: error: unknown corpus 'nothing-here'")


def test_exit_status_in_a_subprocess(tmp_path: Path) -> None:
    path = tmp_path / "bad.mrg"
    path.write_text("(S (NP (NN a)))\n(S (VP (VB b))\n")
    done = subprocess.run(
        [sys.executable, "-m", "experiments.cli", "data", "stats", str(path)],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2
    assert done.stderr == f"synbench: error: {path}:2: unbalanced brackets: '(' is never closed\n"
