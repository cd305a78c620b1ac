"""``synbench inspect rnng``: a tree's top-down and in-order actions and stack sizes, as JSON."""

from __future__ import annotations

import json

from experiments.cli import main


def test_one_tree(capsys):
    assert main(["inspect", "rnng", "--tree", "(ROOT (S (NP-SBJ (DT The) (NN cat)) (VP (VBZ meows)) (. .)))"]) == 0
    record = json.loads(capsys.readouterr().out)
    assert record["words"] == ["The", "cat", "meows", "."] and record["nonterminals"] == ["NP", "S", "VP"]
    assert record["top_down"] == {"actions": ["NT(S)", "NT(NP)", "SHIFT", "SHIFT", "REDUCE", "NT(VP)", "SHIFT",
                                              "REDUCE", "SHIFT", "REDUCE"], "stack_size": 4}
    assert record["in_order"]["actions"] == ["SHIFT", "NT(NP)", "SHIFT", "REDUCE", "NT(S)", "SHIFT", "NT(VP)",
                                             "REDUCE", "SHIFT", "REDUCE", "FINISH"]


def test_a_file_of_trees_and_a_bad_one(tmp_path, capsys):
    trees = tmp_path / "trees.txt"
    trees.write_text("(S (NP (PRP It)) (VP (VBZ works)))\n(S (NP (DT a) (NN b)))\n")
    assert main(["inspect", "rnng", "--trees-file", str(trees), "--jsonl"]) == 0
    records = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [r["top_down"]["stack_size"] for r in records] == [4, 4]  # NT(S) (NP ..) NT(VP) word: 4
    bad = tmp_path / "bad.txt"
    bad.write_text("(S (-NONE- *))\n")
    assert main(["inspect", "rnng", "--trees-file", str(bad)]) == 2
    assert f"{bad}:1" in capsys.readouterr().err
