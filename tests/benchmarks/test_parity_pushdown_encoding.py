"""benchmarks/parity_pushdown_encoding.py without the official checkout: the comparison against the records
a re-run of the official preprocessing gave (test_inspect_pushdown.py), and its stand-ins."""

from __future__ import annotations

import copy

import pytest

from benchmarks import parity_pushdown_encoding as parity
from benchmarks.parity_common import Report
from lightning_modules.data.tree import parse_tree
from tests.experiments.test_inspect_pushdown import CAT, CAT_RECORD, DOG, DOG_RECORD

OFFICIAL = {"(S (NP (DT The) (NN dog)) (VP (VBZ is) (ADJP (JJ happy))))": DOG_RECORD,
            "(S (NP (DT the) (JJ hungry) (NN cat)) (VP (VBZ meows)) (. .))": CAT_RECORD}


def test_compare_with_the_official_records() -> None:
    report = Report()
    parity.compare([("dog:1", parse_tree(DOG)), ("cat:1", parse_tree(CAT))], OFFICIAL.__getitem__, report)
    assert report.compared == {"tokens": 2, "attachment": 2, "stack_tape": 2} and report.ok


def test_a_difference_is_located_and_fails(capsys) -> None:
    wrong = copy.deepcopy(OFFICIAL)
    record = wrong["(S (NP (DT the) (JJ hungry) (NN cat)) (VP (VBZ meows)) (. .))"]
    record["stack_tape"][5][2] = 4
    report = Report()
    parity.compare([("dog:1", parse_tree(DOG)), ("cat:1", parse_tree(CAT))], wrong.__getitem__, report)
    assert report.identical == {"tokens": 2, "attachment": 2, "stack_tape": 1}
    assert report.finish("title") == 1
    out = capsys.readouterr().out
    assert "cat:1" in out and "stack_tape[5][2]: ours 3  official 4" in out


def test_whole_word_tokenizer_stands_in_for_gpt2() -> None:
    tokenizer = parity.WholeWordTokenizer.from_pretrained("gpt2")
    assert tokenizer.tokenize("hungry", add_prefix_space=True) == ["hungry"]


def test_refuses_a_folder_that_is_not_a_checkout(tmp_path, capsys) -> None:
    with pytest.raises(SystemExit, match="^2$"):
        parity.Official(tmp_path)
    assert "not a Pushdown-Layers checkout" in capsys.readouterr().err


def test_word_pieces_give_the_official_shape() -> None:
    """Pieces form a right-factored constituent: ((abc d) (Ġefg h)) encodes as the official ((a b)(c d))."""
    assert parity.PieceTokenizer().tokenize("abcdefg", add_prefix_space=True) == ["Ġabc", "def", "g"]
    assert parity.word_pieces(r"Bridgestone\/Firestone", False) == ["Bri", "dge", "sto", r"ne\/", "Fir", "est",
                                                                     "one"]
    record = parity.pieces_record("(S (NP (NN abcd)) (VP (VBZ efgh)))")
    assert record == {"tokens": ["<s>", "abc", "d", "Ġefg", "h", "<eos>"], "attachment": [0, 1, 1, 3, 2, 0],
                      "stack_tape": [[0] * 6, [0] * 6, [0, 1, 1, 0, 0, 0], [0, 1, 1, 0, 0, 0],
                                     [0, 2, 2, 2, 2, 0], [0, 2, 2, 2, 2, 0]]}


def test_word_piece_check_is_counted_separately() -> None:
    report = Report()
    trees = [("dog:1", parse_tree(DOG)), ("cat:1", parse_tree(CAT))]
    parity.compare(trees, OFFICIAL.__getitem__, report, lambda text: OFFICIAL[text])
    assert report.identical == {"tokens": 2, "attachment": 2, "stack_tape": 2, "word pieces: tokens": 0,
                                "word pieces: attachment": 0, "word pieces: stack_tape": 0}
