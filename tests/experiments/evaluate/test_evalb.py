"""synbench evalb against numbers printed by the official EVALB (evalb.c, COLLINS.prm / LABELED 0).

The expected values below were produced by compiling EVALB's evalb.c and running it on exactly these
lines (with MAX_ERROR raised so it does not abort); they are data, not re-derived here.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from experiments.cli import main
from experiments.evaluate.evalb import COLLINS, UNLABELED, evaluate_lines, format_report, parse_line
from lightning_modules.errors import InputError

LONG = " ".join(f"(NN w{i})" for i in range(41))
# (gold line, test line): what each case exercises
CASES = [
    ("(S (NP (DT The) (NN dog)) (VP (VBZ barks)) (. .))",
     "(S (NP (DT The) (NN dog)) (VP (VBZ barks)) (. .))"),
    ("(S (NP (DT the) (NN cat)) (VP (VBD sat) (PP (IN on) (NP (DT the) (NN mat)))))",
     "(S (DT the) (NN cat) (VP (VBD sat) (IN on) (NP (DT the) (NN mat))))"),  # missing brackets
    ("(S (NP (PRP He)) (VP (VBD gave) (PRT (RP up))))", "(S (NP (PRP He)) (VP (VBD gave) (ADVP (RP up))))"),
    ("(S (NP-SBJ (-NONE- *)) (VP (VB go) (ADVP-TMP (RB now))) (. .))",  # -NONE-, function tags
     "(S (VP (VB go) (ADVP (RB now))) (, .))"),  # a deleted punctuation tag differs: not an error
    ("(TOP (S (NP (NNP John)) (VP (VBZ runs))))", "(S (NP (NNP John)) (VP (VBZ runs)))"),
    ("(S (NP (NNS Dogs)) (VP (VBP bark)))", "(S (NP (NN Dogs)) (VP (VB bark)))"),  # POS errors
    ("(S (NP (NNS Dogs)) (VP (VBP bark)))", ""),  # skip
    ("(S (NP (NNS Dogs)) (VP (VBP bark) (ADVP (RB loudly))))",
     "(S (NP (NNS Dogs)) (VP (VBP bark)))"),  # length differs
    ("(S (NP (NNS Dogs)) (VP (VBP bark)))", "(S (NP (NNS Cats)) (VP (VBP bark)))"),  # words differ
    ("(S (NP (NNS Dogs)) (VP (VBP bark)) (. !))", "(S (NP (. Dogs)) (VP (VBP bark)) (. !))"),  # word deleted
    (f"(S (NP {LONG}) (VP (VBZ ends)) (. .))", f"(S (NP {LONG} (VBZ ends)) (. .))"),  # length 43 > 40
    ("(S (NP (DT a) (NN b)) (VP (VB c) (NP (DT d) (NN e))))",
     "(S (DT a) (VP (NP (NN b) (VB c)) (DT d) (NN e)))"),  # crossing brackets
    ("(S (VP (VB Go)))", "(S (S (VP (VB Go))))"),  # unary chain
    ("( (S (NP (PRP I)) (VP (VBP see))))", "( (S (NP (PRP I)) (VP (VBP see))))"),  # PTB wrapper is scored
    ("(S (NN dog))", "(X (NN dog))"),  # label mismatch
    ("(S (, ,) (. .))", "(S (, ,) (. .))"),  # only punctuation: nothing left, a skip
]
# EVALB's per-sentence columns: id, len, status, recall, precision, matched, gold, test, crossing, words, tags
ROWS_COLLINS = [
    (1, 4, 0, 100.0, 100.0, 3, 3, 3, 0, 3, 3), (2, 6, 0, 60.0, 100.0, 3, 5, 3, 0, 6, 6),
    (3, 3, 0, 100.0, 100.0, 4, 4, 4, 0, 3, 3), (4, 3, 0, 100.0, 100.0, 3, 3, 3, 0, 2, 2),
    (5, 2, 0, 100.0, 100.0, 3, 3, 3, 0, 2, 2), (6, 2, 0, 100.0, 100.0, 3, 3, 3, 0, 2, 0),
    (7, 2, 2, 0.0, 0.0, 0, 0, 0, 0, 0, 0), (8, 3, 1, 0.0, 0.0, 0, 0, 0, 0, 0, 0),
    (9, 2, 1, 0.0, 0.0, 0, 0, 0, 0, 0, 0), (10, 3, 1, 0.0, 0.0, 0, 0, 0, 0, 0, 0),
    (11, 43, 0, 33.33, 50.0, 1, 3, 2, 0, 42, 42), (12, 5, 0, 25.0, 33.33, 1, 4, 3, 2, 5, 5),
    (13, 1, 0, 100.0, 66.67, 2, 2, 3, 0, 1, 1), (14, 2, 0, 100.0, 100.0, 4, 4, 4, 0, 2, 2),
    (15, 1, 0, 0.0, 0.0, 0, 1, 1, 0, 1, 1), (16, 2, 2, 0.0, 0.0, 0, 0, 0, 0, 0, 0),
]
ROWS_UNLABELED = [*ROWS_COLLINS[:14], (15, 1, 0, 100.0, 100.0, 1, 1, 1, 0, 1, 1), ROWS_COLLINS[15]]
# sentences, errors, skips, valid, recall, precision, F1, complete match, tagging accuracy
SUMMARY_COLLINS = {
    "all": (16, 3, 2, 11, 77.14, 84.38, 80.60, 54.55, 97.10),
    "len40": (15, 3, 2, 10, 81.25, 86.67, 83.87, 60.00, 92.59),
}
SUMMARY_UNLABELED = {
    "all": (16, 3, 2, 11, 80.00, 87.50, 83.58, 63.64, 97.10),
    "len40": (15, 3, 2, 10, 84.38, 90.00, 87.10, 70.00, 92.59),
}
STATUS = {0: "ok", 1: "error", 2: "skip"}
KEYS = ("sentences", "error_sentences", "skip_sentences", "valid_sentences", "bracket_recall",
        "bracket_precision", "bracket_f1", "complete_match", "tagging_accuracy")


@pytest.fixture
def files(tmp_path: Path) -> tuple[Path, Path]:
    gold, test = tmp_path / "gold.txt", tmp_path / "test.txt"
    gold.write_text("".join(g + "\n" for g, _ in CASES))
    test.write_text("".join(t + "\n" for _, t in CASES))
    return gold, test


@pytest.mark.parametrize(("param", "rows", "summary"), [
    ("collins", ROWS_COLLINS, SUMMARY_COLLINS), ("unlabeled", ROWS_UNLABELED, SUMMARY_UNLABELED),
])
def test_matches_official_evalb(files, capsys, param, rows, summary) -> None:
    assert main(["evalb", str(files[0]), str(files[1]), "--param", param, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert set(out) == {"all", "len40", "per_sentence"}
    got = [
        (r["id"], r["length"], {v: k for k, v in STATUS.items()}[r["status"]], r["recall"], r["precision"],
         r["matched"], r["gold"], r["test"], r["crossing"], r["words"], r["correct_tags"])
        for r in out["per_sentence"]
    ]
    assert got == rows
    for section, expected in summary.items():
        assert tuple(out[section][k] for k in KEYS) == expected


def test_text_report_is_evalbs(files, capsys) -> None:
    assert main(["evalb", str(files[0]), str(files[1])]) == 0
    text = capsys.readouterr().out
    assert "  11   43    0   33.33  50.00     1      3    2      0     42    42   100.00\n" in text
    assert "                 77.14  84.38     27    35    32      2     69    67    97.10\n" in text
    assert "-- len<=40 --\nNumber of sentence        =     15\n" in text
    assert "Bracketing FMeasure       =  83.87\n" in text


def test_more_than_ten_errors_do_not_abort() -> None:
    # EVALB with COLLINS.prm (MAX_ERROR 10) exits at the 12th error without a summary; we go on.
    gold = ["(S (NP (NN a)) (VP (VB b)))"] * 13
    test = ["(S (NP (NN x)) (VP (VB b)))"] * 12 + ["(S (NP (NN a)) (VP (VB b)))"]
    out = evaluate_lines(gold, test, COLLINS).as_dict()["all"]
    assert (out["sentences"], out["error_sentences"], out["valid_sentences"]) == (13, 12, 1)
    assert (out["bracket_recall"], out["bracket_precision"], out["bracket_f1"]) == (100.0, 100.0, 100.0)


def test_nan_f1_is_null() -> None:
    result = evaluate_lines(["(S (NN dog))"], ["(X (NN dog))"], COLLINS)
    summary = result.as_dict()["all"]
    assert [summary[k] for k in ("bracket_recall", "bracket_precision", "bracket_f1")] == [0.0, 0.0, None]
    assert "Bracketing FMeasure       =   -nan\n" in format_report(result)  # as EVALB prints it


def test_unequal_line_counts_score_the_common_prefix(tmp_path, capsys) -> None:
    gold, test = tmp_path / "g", tmp_path / "t"
    gold.write_text("(S (NN a))\n(S (NN b))\n")
    test.write_text("(S (NN a))\n")
    assert main(["evalb", str(gold), str(test), "--json"]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out)["all"]["sentences"] == 1
    assert "has 2 lines" in captured.err


def test_length_counts_punctuation_but_not_traces() -> None:
    parsed = parse_line("(S (NP (-NONE- *T*)) (VP (VB go)) (. .) (`` ``))", UNLABELED, "x:1")
    assert (parsed.length, parsed.words, parsed.tags) == (3, ["go"], ["VB"])


@pytest.mark.parametrize(("line", "message"), [
    ("(S (NP (DT the) (NN dog))", "never closed"),
    ("(S (NP (DT the)))) ", "without a matching"),
    ("(S (NP the dog))", "more than one element"),
    ("(S (NP (DT the)) dog)", "outside a preterminal"),
    ("(S (NP))", "empty bracket"),
    ("(S (NN a)) (S (NN b))", "more than one tree"),
])
def test_malformed_lines_exit_2_with_location(tmp_path, capsys, line, message) -> None:
    gold, test = tmp_path / "gold.txt", tmp_path / "test.txt"
    gold.write_text("(S (NN a))\n(S (NN a))\n")
    test.write_text("(S (NN a))\n" + line + "\n")
    assert main(["evalb", str(gold), str(test), "--json"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith(f"synbench: error: {test}:2: ") and message in captured.err


def test_missing_file_exits_2(tmp_path, capsys) -> None:
    assert main(["evalb", str(tmp_path / "nope"), str(tmp_path / "nope2")]) == 2
    assert capsys.readouterr().err.startswith(f"synbench: error: {tmp_path / 'nope'}: cannot read file")


def test_parse_errors_raise_input_error() -> None:
    with pytest.raises(InputError):
        parse_line("(S", COLLINS, "f:1")
