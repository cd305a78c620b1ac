"""``synbench inspect {tg,txl}``: the DESIGN.md JSON contract on the golden trees, batch mode, errors."""

from __future__ import annotations

import json

import pytest

from experiments.cli import main

TREE = "(S (NP (DT the) (JJ hungry) (NN cat)) (VP (VBZ meows)))"
TG_TOKENS = ["<s>", "(S", "(NP", "the", "hungry", "cat", "NP)", "NP)", "(VP", "meows", "VP)", "VP)", "S)",
             "S)"]
TG_TYPES = ["SOS", "ONT", "ONT", "T", "T", "T", "CNT1", "CNT2", "ONT", "T", "CNT1", "CNT2", "CNT1", "CNT2"]
TG_LABELS = ["(S", "(NP", "the", "hungry", "cat", "NP)", None, "(VP", "meows", "VP)", None, "S)", None, None]
TG_DEPTH = [0, 1, 2, 3, 3, 3, 2, 2, 2, 3, 2, 2, 1, 1]
TG_ATTEND = [  # the official full-sequence table
    [[0, 0]],
    [[0, 1], [1, 0]],
    [[0, 2], [1, 1], [2, 0]],
    [[0, 3], [1, 2], [2, 1], [3, 0]],
    [[0, 3], [1, 2], [2, 1], [3, 0], [4, 0]],
    [[0, 3], [1, 2], [2, 1], [3, 0], [4, 0], [5, 0]],
    [[2, 0], [3, -1], [4, -1], [5, -1], [6, 0]],
    [[0, 2], [1, 1], [6, 0], [7, 0]],
    [[0, 2], [1, 1], [6, 0], [8, 0]],
    [[0, 3], [1, 2], [6, 1], [8, 1], [9, 0]],
    [[8, 0], [9, -1], [10, 0]],
    [[0, 2], [1, 1], [6, 0], [10, 0], [11, 0]],
    [[1, 0], [6, -1], [10, -1], [12, 0]],
    [[0, 1], [12, 0], [13, 0]],
]
# L = M = 4, read off the official chunked golden masks (cpp_masking_test.py). Smart memory keeps the whole
# stack here, so every chunk sees the full attention; plain memory loses what is older than one chunk.
SMART_CHUNKS = [{"start": s, "attend": TG_ATTEND[s : s + 4]} for s in (0, 4, 8, 12)]
PLAIN_CHUNKS = SMART_CHUNKS[:2] + [
    {"start": 8, "attend": [[[6, 0], [8, 0]], [[6, 1], [8, 1], [9, 0]], [[8, 0], [9, -1], [10, 0]],
                            [[6, 0], [10, 0], [11, 0]]]},
    {"start": 12, "attend": [[[10, -1], [12, 0]], [[12, 0], [13, 0]]]},
]
TXL_TOKENS = ["<s>", "(S", "(NP", "the", "hungry", "cat", "NP)", "(VP", "meows", "VP)", "S)"]


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(["inspect", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def tg_record(chunks: list[dict]) -> dict:
    return {"tokens": TG_TOKENS, "types": TG_TYPES, "labels": TG_LABELS, "depth": TG_DEPTH, "chunks": chunks}


def test_tg_one_chunk(capsys):
    code, out, err = run(capsys, "tg", "--tree", TREE)
    assert code == 0 and err == ""
    assert json.loads(out) == tg_record([{"start": 0, "attend": TG_ATTEND}])


@pytest.mark.parametrize(("memory", "chunks"), [("smart", SMART_CHUNKS), ("plain", PLAIN_CHUNKS)])
def test_tg_chunked(capsys, memory, chunks):
    code, out, _ = run(capsys, "tg", "--tree", TREE, "--segment-length", "4", "--memory-length", "4",
                       "--memory", memory)
    assert code == 0 and json.loads(out) == tg_record(chunks)


def test_tg_defaults_to_smart_memory_and_memory_length_l(capsys):
    _, out, _ = run(capsys, "tg", "--tree", TREE, "--segment-length", "4")
    assert json.loads(out)["chunks"] == SMART_CHUNKS


def test_txl(capsys):
    code, out, _ = run(capsys, "txl", "--tree", TREE)
    record = json.loads(out)
    assert code == 0
    assert record["tokens"] == TXL_TOKENS
    assert record["types"] == ["SOS", "ONT", "ONT", "T", "T", "T", "CNT", "ONT", "T", "CNT", "CNT"]
    assert record["labels"] == TXL_TOKENS[1:] + [None]
    assert record["depth"] == [0] * 11
    causal = [[[j, i - j] for j in range(i + 1)] for i in range(11)]
    assert record["chunks"] == [{"start": 0, "attend": causal}]
    _, out, _ = run(capsys, "txl", "--tree", TREE, "--segment-length", "4")
    chunks = json.loads(out)["chunks"]
    assert [c["start"] for c in chunks] == [0, 4, 8]
    assert chunks[1]["attend"][0] == [[0, 4], [1, 3], [2, 2], [3, 1], [4, 0]]
    assert chunks[2]["attend"][2] == [[j, 10 - j] for j in range(4, 11)]  # chunk 0 is out of reach


def test_tree_is_cleaned(capsys):
    _, out, _ = run(capsys, "tg", "--tree", "( (S (NP-SBJ (DT the) (JJ hungry) (NN cat)) (VP (VBZ meows) "
                                            "(NP (-NONE- *T*-1)))) )")
    assert json.loads(out) == tg_record([{"start": 0, "attend": TG_ATTEND}])


def test_trees_file_jsonl(capsys, tmp_path):
    second = "(S (NP (PRP it)) (VP (VBZ sleeps)))"
    path = tmp_path / "trees.mrg"
    path.write_text(f"{TREE}\n( {second} )\n")
    code, out, _ = run(capsys, "tg", "--trees-file", str(path), "--jsonl", "--segment-length", "4")
    lines = out.splitlines()
    assert code == 0 and len(lines) == 2
    assert json.loads(lines[0]) == tg_record(SMART_CHUNKS)
    _, single, _ = run(capsys, "tg", "--tree", second, "--segment-length", "4")
    assert json.loads(lines[1]) == json.loads(single)
    _, as_list, _ = run(capsys, "tg", "--trees-file", str(path), "--segment-length", "4")
    assert json.loads(as_list) == [json.loads(line) for line in lines]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["tg", "--tree", "(S (NP the cat)"], "synbench: error: --tree:1: unbalanced brackets"),
        (["tg", "--tree", "(S (-NONE- *))"], "synbench: error: --tree: tree has no overt terminals"),
        (["tg", "--tree", TREE, "--segment-length", "4", "--memory-length", "8"],
         "synbench: error: --memory-length: must equal --segment-length (4)"),
        (["tg", "--tree", TREE, "--memory-length", "4"],
         "synbench: error: --memory-length: needs --segment-length"),
        (["tg", "--tree", TREE, "--segment-length", "0"],
         "synbench: error: --segment-length: must be a positive"),
        (["txl", "--tree", TREE, "--memory", "smart"], "synbench: error: --memory: txl has plain"),
    ],
)
def test_errors(capsys, argv, message):
    code, out, err = run(capsys, *argv)
    assert code == 2 and out == "" and err.startswith(message) and err.count("\n") == 1


def test_error_in_a_trees_file_names_the_line(capsys, tmp_path):
    path = tmp_path / "trees.txt"
    path.write_text(f"{TREE}\n{TREE}\n(S (NP the cat)\n")
    code, out, err = run(capsys, "tg", "--trees-file", str(path), "--jsonl")
    assert code == 2 and out == "" and err.startswith(f"synbench: error: {path}:3: ")
    path.write_text(f"{TREE}\n(S (-NONE- *))\n")
    code, out, err = run(capsys, "tg", "--trees-file", str(path), "--jsonl")
    assert code == 2 and out == "" and err.startswith(f"synbench: error: {path}:2: tree has no overt")
    code, out, err = run(capsys, "tg", "--trees-file", str(tmp_path / "missing.txt"))
    assert code == 2 and out == "" and "cannot read file" in err


def test_tree_or_file_is_required(capsys):
    assert main(["inspect", "tg"]) == 2
    assert capsys.readouterr().err.startswith("synbench: error: one of the arguments --tree --trees-file")
