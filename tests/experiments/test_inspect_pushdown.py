"""``synbench inspect pushdown``: the DESIGN.md JSON contract on golden trees, batch mode, errors."""

from __future__ import annotations

import json

import pytest

from experiments.cli import main

# Fig. 2 of the paper; vectors from a re-run of the official preprocessing (as in test_pushdown.py)
DOG = "(S (NP (DT The) (NN dog)) (VP (VBZ is) (ADJP (JJ happy))))"
DOG_RECORD = {
    "tokens": ["<s>", "The", "dog", "is", "happy", "<eos>"],
    "attachment": [0, 1, 1, 3, 2, 0],
    "stack_tape": [[0, 0, 0, 0, 0, 0], [0, 0, 0, 0, 0, 0], [0, 1, 1, 0, 0, 0], [0, 1, 1, 0, 0, 0],
                   [0, 2, 2, 2, 2, 0], [0, 2, 2, 2, 2, 0]],
}
CAT = "( (S (NP (DT the) (JJ hungry) (NN cat)) (VP (VBZ meows)) (. .)) )"
CAT_RECORD = {
    "tokens": ["<s>", "the", "hungry", "cat", "meows", ".", "<eos>"],
    "attachment": [0, 1, 2, 1, 4, 3, 0],
    "stack_tape": [[0, 0, 0, 0, 0, 0, 0], [0, 0, 0, 0, 0, 0, 0], [0, 0, 0, 0, 0, 0, 0], [0, 1, 2, 2, 0, 0, 0],
                   [0, 1, 2, 2, 0, 0, 0], [0, 2, 3, 3, 2, 2, 0], [0, 2, 3, 3, 2, 2, 0]],
}


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(["inspect", "pushdown", *argv])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize(("tree", "record"), [(DOG, DOG_RECORD), (CAT, CAT_RECORD)])
def test_one_tree(capsys, tree: str, record: dict) -> None:
    code, out, err = run(capsys, "--tree", tree)
    assert code == 0 and err == "" and out.count("\n") == 1
    assert json.loads(out) == record


def test_one_word(capsys) -> None:
    _, out, _ = run(capsys, "--tree", "(ROOT (INTJ (UH Yes)))")
    assert json.loads(out) == {"tokens": ["<s>", "Yes", "<eos>"], "attachment": [0, 1, 0],
                               "stack_tape": [[0, 0, 0]] * 3}


def test_tree_is_cleaned(capsys) -> None:
    _, out, _ = run(capsys, "--tree", "( (S (NP-SBJ-1 (DT The) (NN dog)) (VP (VBZ is) (ADJP-PRD (JJ happy)) "
                                      "(S (NP (-NONE- *-1))))) )")
    assert json.loads(out) == DOG_RECORD


def test_trees_file_jsonl_and_list(capsys, tmp_path) -> None:
    path = tmp_path / "trees.mrg"
    path.write_text(f"{DOG}\n{CAT}\n")
    code, out, _ = run(capsys, "--trees-file", str(path), "--jsonl")
    assert code == 0 and [json.loads(line) for line in out.splitlines()] == [DOG_RECORD, CAT_RECORD]
    code, out, _ = run(capsys, "--trees-file", str(path))
    assert code == 0 and out.count("\n") == 1 and json.loads(out) == [DOG_RECORD, CAT_RECORD]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--tree", "(S (NP the dog)"], "synbench: error: --tree:1: unbalanced brackets"),
        (["--tree", "(S (-NONE- *))"], "synbench: error: --tree: tree has no overt terminals"),
        (["--tree", DOG, "--segment-length", "4"], "synbench: error: --segment-length: is a tg/txl option"),
        (["--tree", DOG, "--memory", "plain"], "synbench: error: --memory: is a tg/txl option"),
        (["--tree", DOG, "--relpos", "depth"], "synbench: error: --relpos: is a tg/txl option"),
        (["--tree", DOG, "--tree-transform", "left"], "synbench: error: --tree-transform: is a tg/txl"),
    ],
)
def test_errors(capsys, argv: list[str], message: str) -> None:
    code, out, err = run(capsys, *argv)
    assert code == 2 and out == "" and err.startswith(message) and err.count("\n") == 1


def test_error_in_a_trees_file_names_the_line(capsys, tmp_path) -> None:
    path = tmp_path / "trees.txt"
    path.write_text(f"{DOG}\n{CAT}\n(S (-NONE- *T*))\n{DOG}\n")
    code, out, err = run(capsys, "--trees-file", str(path), "--jsonl")
    assert code == 2 and out == "" and err.startswith(f"synbench: error: {path}:3: tree has no overt")
    path.write_text(f"{DOG}\n\n(S (NP the dog)\n")
    code, out, err = run(capsys, "--trees-file", str(path), "--jsonl")
    assert code == 2 and out == "" and err.startswith(f"synbench: error: {path}:3: unbalanced")
