"""``synbench inspect som``: Γ, grid labels, grid view and Algorithm 1 labels as JSON; batch mode; errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from experiments.cli import main

FIG2 = "(S (NP a b) (VP (X c d) e))"  # Γ of the paper's Fig. 2: ((a b) ((c d) e))
FIG2_RECORD = {
    "words": ["a", "b", "c", "d", "e"],
    "tree": FIG2,
    "gamma": "(X (X a b) (X (X c d) e))",
    "n_slots": 3,
    "grid_labels": [3, 2, 2, 1, 1],
    "clamped": False,
    "first_sibling": [None, 1, 1, 3, 3],
    "grid": [[[1, 1], [1, 2], [1, 2], [1, 2], [1, 5]],
             [None, [2, 2], [3, 3], [3, 4], [3, 5]],
             [None, None, None, [4, 4], [5, 5]],
             [None, None, None, None, None]],
}
SHE_ATE = "\n".join("\t".join(row) for row in [
    ("1", "She", "she", "PRON", "PRP", "_", "2", "nsubj", "_", "_"),
    ("2", "ate", "eat", "VERB", "VBD", "_", "0", "root", "_", "_"),
    ("3", "the", "the", "DET", "DT", "_", "5", "det", "_", "_"),
    ("4", "red", "red", "ADJ", "JJ", "_", "5", "amod", "_", "_"),
    ("5", "apple", "apple", "NOUN", "NN", "_", "2", "obj", "_", "_"),
])


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(["inspect", "som", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_figure_2(capsys) -> None:
    code, out, err = run(capsys, "--tree", FIG2, "--slots", "3")
    assert code == 0 and err == "" and out.count("\n") == 1
    assert json.loads(out) == FIG2_RECORD


def test_figure_2_with_decisions(capsys) -> None:
    # the model writes d into slot 2: e's label follows it there (Algorithm 1's mu)
    code, out, _ = run(capsys, "--tree", FIG2, "--slots", "3", "--decisions", "3,2,2,2,2")
    record = json.loads(out)
    assert code == 0 and record["decisions"] == [3, 2, 2, 2, 2] and record["labels"] == [3, 2, 2, 1, 2]
    assert record["parse"] == "(X (X (X (X a b) c) d) e)"
    code, out, _ = run(capsys, "--tree", FIG2, "--slots", "3", "--decisions", "3,2,2,1,1")
    assert json.loads(out)["parse"] == FIG2_RECORD["gamma"]


def test_conllu_sentence(capsys) -> None:
    code, out, err = run(capsys, "--tree", SHE_ATE, "--slots", "4")
    record = json.loads(out)
    assert code == 0 and err == ""
    assert record["tree"] == "(root (root (PRON She) (VERB ate)) (obj (obj (DET the) (ADJ red)) (NOUN apple)))"
    assert record["gamma"] == "(X (X She ate) (X (X the red) apple))"
    assert record["grid_labels"] == [4, 3, 3, 2, 2] and len(record["grid"]) == 5
    code, out, _ = run(capsys, "--tree", SHE_ATE)
    assert json.loads(out)["n_slots"] == 15 and json.loads(out)["grid_labels"] == [15, 14, 14, 13, 13]


def test_clamped_when_deeper_than_the_memory(capsys) -> None:
    code, out, _ = run(capsys, "--tree", "(A a (B b (C c d)))", "--slots", "2")
    record = json.loads(out)
    assert code == 0 and record["grid_labels"] == [2, 1, 0, 0] and record["clamped"] is True


def test_trees_file_conllu_and_bracketed(capsys, tmp_path: Path, shared_data: Path) -> None:
    code, out, _ = run(capsys, "--trees-file", str(shared_data / "ud" / "UD_English-PUD" / "en_pud-ud-test.conllu.gz"),
                       "--jsonl")
    records = [json.loads(line) for line in out.splitlines()]
    assert code == 0 and len(records) == 1000
    assert all(len(r["grid_labels"]) == len(r["words"]) and not r["clamped"] for r in records)
    path = tmp_path / "trees.txt"
    path.write_text(FIG2 + "\n(S x y)\n")
    code, out, _ = run(capsys, "--trees-file", str(path), "--slots", "3")
    records = json.loads(out)
    assert code == 0 and records[0] == FIG2_RECORD and records[1]["grid_labels"] == [3, 2]


@pytest.mark.parametrize(("argv", "message"), [
    (("--tree", FIG2, "--slots", "3", "--decisions", "3,2,1,0"), "--decisions: 4 decisions for 5 words"),
    (("--tree", FIG2, "--slots", "3", "--decisions", "2,2,2,1,1"),
     "--decisions: the first word is written into slot N = 3, not 2"),
    (("--tree", FIG2, "--slots", "3", "--decisions", "3,2,2,0,1"),
     "--decisions: decision 4 is 0: the memory mask allows 1..2"),
    (("--tree", FIG2, "--slots", "3", "--decisions", "3,2,x"), "--decisions: expected comma-separated integers"),
    (("--tree", FIG2, "--slots", "1"), "--slots: needs at least 2 slots"),
    (("--tree", "1\tShe\t_\t_\t_\t_\t3\tnsubj\t_\t_"), "--tree:1: bad HEAD '3' (sentence has 1 words)"),
    (("--tree", FIG2, "--memory", "smart"), "--memory: is a tg/txl option; som does not read it"),
])
def test_bad_input(capsys, argv: tuple[str, ...], message: str) -> None:
    code, out, err = run(capsys, *argv)
    assert code == 2 and out == ""
    assert err.startswith(f"synbench: error: {message}") and err.count("\n") == 1
