"""benchmarks/parity_dtg_encoding.py without the official checkout: its reading of the masking library's chunk
(fed by a stand-in built from benchmarks/dtg_encoding.py's rebuild of the library, which gives the library's
golden vectors), its comparison with ``synbench inspect dtg``, and the plumbing around the oracle script."""

from __future__ import annotations

import types

import numpy as np
import pytest

from benchmarks import dtg_encoding as rebuild
from benchmarks import parity_dtg_encoding as parity
from benchmarks.parity_common import Report
from lightning_modules.data.dependency import DepTree

TREES = [("a:1", DepTree(("There", "is", "a", "difference"), (2, 0, 4, 2), ("_",) * 4)),
         ("a:6", DepTree(("The", "cat", "sat", "."), (2, 3, 0, 3), ("_",) * 4)),
         ("a:11", DepTree(("She", "eats", "fresh", "apples", "today"), (2, 0, 4, 2, 2), ("_",) * 5))]


class RebuiltRules:
    """Stands in for ``StackComposeDoubleClosingNT(512, 512)``: the library's chunk 0 from the Python rebuild."""

    def chunks_for_sequence(self, inputs, input_types, labels, label_types):
        doubled, doubled_types, doubled_labels = [], [], []
        for token, ttype, label in zip(inputs.tolist(), input_types.tolist(), labels.tolist()):
            if ttype in (parity.LEFTARC, parity.RIGHTARC):  # Transform
                doubled += [token, token]
                doubled_types += [ttype, parity.LEFTARC_2 if ttype == parity.LEFTARC else parity.RIGHTARC_2]
                doubled_labels += [0, label]
            else:
                doubled.append(token)
                doubled_types.append(ttype)
                doubled_labels.append(label)
        info = rebuild.official_attention(np.array(doubled_types, dtype=np.int32))
        chunk = rebuild.dense_chunk(np.array(doubled), np.array(doubled_labels), info)
        in_types = np.zeros(parity.LENGTH, dtype=np.int32)
        in_types[: len(doubled_types)] = doubled_types
        return [(chunk["inputs"], in_types, chunk["labels"], None, chunk["attention_mask"], chunk["relpos"],
                 None, None, None, None, None, chunk["composed_position"])]


def rebuilt_official() -> parity.Official:
    official = parity.Official.__new__(parity.Official)
    official.cpp = types.SimpleNamespace(StackComposeDoubleClosingNT=lambda **kwargs: RebuiltRules())
    return official


def official_actions() -> list[list[str]]:
    return [rebuild.official_oracle([(f, h - 1) for f, h in zip(t.forms, t.heads)]) for _, t in TREES]


def test_record_of_the_design_example() -> None:
    record = rebuilt_official().record(official_actions()[0])
    assert record["tokens"] == ["<s>", "There", "is", "left_arc", "left_arc", "a", "difference", "left_arc",
                                "left_arc", "right_arc", "right_arc", "pop_root"]
    assert record["types"] == ["SOS", "W", "W", "LA", "LA2", "W", "W", "LA", "LA2", "RA", "RA2", "POP"]
    assert record["arc_heads"] == [None, None, None, 2, 2, None, None, 6, 6, 2, 2, 0]
    assert record["labels"][2:5] == ["left_arc", None, "a"] and record["labels"][-1] == "</s>"
    attend = record["chunks"][0]["attend"]
    assert attend[3] == [[1, -1], [2, 0], [3, 0]] and attend[6] == [[0, 3], [3, 2], [5, 1], [6, 0]]
    assert attend[11] == [[0, 0], [9, -1], [11, 0]]


def test_compare_with_the_rebuilt_library() -> None:
    report = Report()
    parity.compare(TREES, official_actions(), rebuilt_official().record, report)
    assert report.compared == {"oracle actions": 3, "inspect record": 3} and report.ok


def test_a_difference_is_located_and_fails(capsys) -> None:
    official = rebuilt_official()

    def altered(actions: list[str]) -> dict:
        record = official.record(actions)
        if actions[0] == "The":
            record["chunks"][0]["attend"][9][1][1] = -2
        return record

    actions = official_actions()
    actions[2] = actions[2][:-2] + ["right_arc", "right_arc"]  # a wrong oracle line for the third sentence
    report = Report()
    parity.compare(TREES, actions, altered, report)
    assert report.identical == {"oracle actions": 2, "inspect record": 1}
    assert report.finish("title") == 1
    out = capsys.readouterr().out
    assert "a:6" in out and "chunks[0].attend[9][1][1]: ours -1  official -2" in out and "a:11" in out


def test_oracle_script_plumbing(tmp_path) -> None:
    script = tmp_path / parity.ORACLE
    script.parent.mkdir(parents=True)
    script.write_text(  # a stand-in that writes each test sentence's forms, as the real script writes actions
        "blocks = open('bllip_test_conll').read().strip().split('\\n\\n')\n"
        "assert open('bllip_dev_conll').read() == ''\n"
        "open('test.bllip_action', 'w').write(''.join(' '.join(r.split()[1] for r in b.splitlines()) + '\\n'"
        " for b in blocks))\n")
    official = parity.Official.__new__(parity.Official)
    official.official = tmp_path
    assert official.actions([t for _, t in TREES]) == [list(t.forms) for _, t in TREES]
    assert parity.conll_rows(TREES[1][1:]).splitlines()[2] == "3\tsat\t_\t_\t_\t_\t0\t_\t_\t_"


def test_refuses_a_folder_that_is_not_a_checkout(tmp_path, capsys) -> None:
    with pytest.raises(SystemExit, match="^2$"):
        parity.Official(tmp_path, tmp_path / "build")
    assert "not a Dep_Transformer_Grammars checkout" in capsys.readouterr().err
