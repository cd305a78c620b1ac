"""``synbench inspect dtg``: the DESIGN.md JSON contract (one sentence, --tree, --jsonl over a UD file, the three
systems), and one-line errors (non-projective trees, several sentences without --jsonl, other families' options)."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from experiments.cli import main
from lightning_modules.data.dependency import parse_conllu, to_conllu

THERE = (
    "# sent_id = fig1\n# text = There is a difference\n"
    "1\tThere\tthere\tPRON\tEX\t_\t2\texpl\t_\t_\n"
    "2-3\tisa\t_\t_\t_\t_\t_\t_\t_\t_\n"
    "2\tis\tbe\tVERB\tVBZ\t_\t0\troot\t_\t_\n"
    "3\ta\ta\tDET\tDT\t_\t4\tdet\t_\t_\n"
    "3.1\tghost\t_\t_\t_\t_\t_\t_\t_\t_\n"
    "4\tdifference\tdifference\tNOUN\tNN\t_\t2\tnsubj\t_\t_\n\n"
)
THERE_RECORD = {
    "tokens": ["<s>", "There", "is", "left_arc", "left_arc", "a", "difference", "left_arc", "left_arc", "right_arc",
               "right_arc", "pop_root"],
    "types": ["SOS", "W", "W", "LA", "LA2", "W", "W", "LA", "LA2", "RA", "RA2", "POP"],
    "labels": ["There", "is", "left_arc", None, "a", "difference", "left_arc", None, "right_arc", None, "pop_root",
               "</s>"],
    "arc_heads": [None, None, None, 2, 2, None, None, 6, 6, 2, 2, 0],
    "chunks": [{"start": 0, "attend": [
        [[0, 0]], [[0, 1], [1, 0]], [[0, 2], [1, 1], [2, 0]], [[1, -1], [2, 0], [3, 0]], [[0, 1], [3, 0], [4, 0]],
        [[0, 2], [3, 1], [5, 0]], [[0, 3], [3, 2], [5, 1], [6, 0]], [[5, -1], [6, 0], [7, 0]],
        [[0, 2], [3, 1], [7, 0], [8, 0]], [[3, 0], [7, -1], [9, 0]], [[0, 1], [9, 0], [10, 0]],
        [[0, 0], [9, -1], [11, 0]]]}],
}
CROSSING = "1\ta\t_\t_\t_\t_\t3\t_\t_\t_\n2\tb\t_\t_\t_\t_\t4\t_\t_\t_\n3\tc\t_\t_\t_\t_\t0\t_\t_\t_\n" \
           "4\td\t_\t_\t_\t_\t3\t_\t_\t_\n\n"


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(["inspect", "dtg", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_one_sentence_file_prints_one_object(tmp_path: Path, capsys) -> None:
    path = tmp_path / "one.conllu"
    path.write_text(THERE)  # the 2-3 range and the 3.1 empty node are not words
    code, out, err = run(capsys, "--trees-file", str(path))
    assert code == 0 and err == "" and out.count("\n") == 1
    assert json.loads(out) == THERE_RECORD
    assert run(capsys, "--trees-file", str(path), "--system", "standard")[1] == out


def test_tree_argument(capsys) -> None:
    code, out, _ = run(capsys, "--tree", THERE)
    assert code == 0 and json.loads(out) == THERE_RECORD


@pytest.mark.parametrize(("system", "tokens"), [
    ("eager", "<s> There is left_arc left_arc right_arc right_arc a difference left_arc left_arc right_arc right_arc "
              "pop pop pop"),
    ("swift", "<s> There is left_arc[1] left_arc[1] right_arc[1] right_arc[1] a difference left_arc[1] left_arc[1] "
              "right_arc[1] right_arc[1]"),
])
def test_other_systems(capsys, system: str, tokens: str) -> None:
    code, out, _ = run(capsys, "--tree", THERE, "--system", system)
    record = json.loads(out)
    assert code == 0 and " ".join(record["tokens"]) == tokens
    assert record["labels"][-1] == "</s>" and len(record["chunks"][0]["attend"]) == len(record["tokens"])


def test_jsonl_over_the_projective_ewt_test_sentences(shared_data: Path, tmp_path: Path, capsys) -> None:
    with gzip.open(shared_data / "ud/UD_English-EWT/en_ewt-ud-test.conllu.gz", "rt", encoding="utf-8") as f:
        trees = [t for _, t in parse_conllu(f.read())]
    projective = [t for t in trees if t.is_projective()][:300]
    path = tmp_path / "projective.conllu"
    path.write_text("".join(to_conllu(t) for t in projective), encoding="utf-8")
    code, out, err = run(capsys, "--trees-file", str(path), "--jsonl")
    records = [json.loads(line) for line in out.splitlines()]
    assert code == 0 and err == "" and len(records) == 300
    for tree, record in zip(projective, records):
        n = len(tree)
        assert len(record["tokens"]) == 3 * n
        assert [tok for tok, ty in zip(record["tokens"], record["types"]) if ty == "W"] == list(tree.forms)
        assert record["tokens"][-1] == "pop_root" and record["labels"][-1] == "</s>"


def test_non_projective_sentence_is_a_one_line_error(tmp_path: Path, capsys) -> None:
    path = tmp_path / "mixed.conllu"
    path.write_text(THERE + CROSSING)
    code, out, err = run(capsys, "--trees-file", str(path), "--jsonl")
    assert code == 2 and out == ""
    assert err == (f"synbench: error: {path}:10: non-projective dependency tree: arc 3 -> 1 ('a') crosses another "
                   "arc; this transition system needs projective trees\n")


def test_several_sentences_need_jsonl(tmp_path: Path, capsys) -> None:
    path = tmp_path / "two.conllu"
    path.write_text(THERE + THERE)
    code, out, err = run(capsys, "--trees-file", str(path))
    assert code == 2 and out == ""
    assert err == (f"synbench: error: {path}: holds 2 inputs; without --jsonl it must hold one (--jsonl prints one "
                   "object per line)\n")


def test_bad_input_and_foreign_options(tmp_path: Path, capsys) -> None:
    code, _, err = run(capsys, "--tree", "1\tx\t_\t_\t_\t_\t2\t_\t_\t_\n")
    assert code == 2 and err == "synbench: error: --tree:1: bad HEAD '2' (sentence has 1 words)\n"
    code, _, err = run(capsys, "--tree", THERE, "--relpos", "linear")
    assert code == 2 and err == "synbench: error: --relpos: is a tg/txl option; dtg does not read it\n"
    assert main(["inspect", "tg", "--tree", "(S (NN x))", "--system", "eager"]) == 2
    assert capsys.readouterr().err == "synbench: error: --system: is a dtg option; tg does not read it\n"
