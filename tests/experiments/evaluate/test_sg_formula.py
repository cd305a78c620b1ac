"""SyntaxGym prediction formulas: syntaxgym-core's golden cases, precedence, typing, round trip."""

from __future__ import annotations

import pytest

from experiments.evaluate.sg_formula import (
    BinaryOp,
    FormulaError,
    Number,
    Region,
    evaluate,
    parse_formula,
    regions,
)

# cpllab/syntaxgym-core test/test_prediction.py: each of these formulas evaluates to True.
GOLDEN_TRUE = ["5 - 4 - 3 < 0", "5+4=9-1+1", "5-(3+2)=0", "(5-3)+2=4", "(5-3)+((2+1)-(2+2))=1"]

MVRR = ("[(5;%reduced_ambig%) > (5;%unreduced_ambig%)] & [(5;%reduced_ambig%) > (5;%reduced_unambig%)] & "
        "[[(5;%reduced_ambig%) - (5;%unreduced_ambig%)] > [(5;%reduced_unambig%) - (5;%unreduced_unambig%)]]")


@pytest.mark.parametrize("text", GOLDEN_TRUE)
def test_golden_cases(text: str) -> None:
    formula = parse_formula(text)
    assert evaluate(formula, {}) is True
    assert parse_formula(str(formula)) == formula  # str -> parse round trip is stable


def test_plus_and_minus_share_one_left_associative_level() -> None:
    # an older syntaxgym grammar bound + tighter than -, giving 5 - (3 + 2) = 0
    assert parse_formula("5 - 3 + 2 = 4") == BinaryOp(
        "=", BinaryOp("+", BinaryOp("-", Number(5.0), Number(3.0)), Number(2.0)), Number(4.0)
    )


def test_comparisons_bind_looser_than_arithmetic_and_tighter_than_logic() -> None:
    f = parse_formula("1 + 1 > 1 & 2 < 1 | 0 < 1")
    assert f.op == "|" and f.left.op == "&" and f.left.left.op == ">" and f.left.left.left.op == "+"
    assert evaluate(f, {}) is True
    assert evaluate(parse_formula("1 > 2 & [2 < 1 | 0 < 1]"), {}) is False


def test_regions_star_and_brackets() -> None:
    values = {("a", 1): 1.0, ("a", 2): 2.5, ("b", 1): 3.0, ("b", 2): 0.0}
    assert evaluate(parse_formula("(*;%a%) < (*;%b%)"), values) is False  # 3.5 < 3.0
    assert evaluate(parse_formula("[(1;%a%) + (2;%a%)] = 3.5"), values) is True
    assert evaluate(parse_formula("( (1;%b%) - (1;%a%) ) > 1.5"), values) is True
    assert regions(parse_formula(MVRR)) == {(c, 5) for c in ("reduced_ambig", "unreduced_ambig",
                                                              "reduced_unambig", "unreduced_unambig")}
    assert regions(parse_formula("(*;%x-y_z%) > 0")) == {("x-y_z", None)}


def test_equality_is_numpy_isclose() -> None:
    # |a - b| <= 1e-3 + 1e-5 * |b|
    assert evaluate(parse_formula("1000 = 1000.0109"), {}) is True
    assert evaluate(parse_formula("1000 = 1000.0112"), {}) is False
    assert evaluate(parse_formula("0 = 0.0009"), {}) is True
    assert evaluate(parse_formula("0 = 0.0011"), {}) is False


def test_literals() -> None:
    expected = BinaryOp("<", Number(-3.0), BinaryOp("-", Number(5.0), Number(-2.5)))
    assert parse_formula("-3 < 5 - -2.5e0") == expected
    assert parse_formula("(12;%c%) > .5") == BinaryOp(">", Region(12, "c"), Number(0.5))


@pytest.mark.parametrize(("text", "message"), [
    ("1 < 2 < 3", "cannot parse"),  # syntaxgym-core would silently evaluate 1 < 2
    ("(1;%a%)", "is a number"),
    ("[1 < 2] + 1", "takes numbers"),
    ("1 < 2 & 3", "combines comparisons"),
    ("(1;%a%) < ", "cannot parse"),
    ("(1;a) < 2", "cannot parse"),
    ("[1 < 2)", "cannot parse"),
    ("__import__('os') < 1", "cannot parse"),
    ("", "cannot parse"),
])
def test_malformed_formulas(text: str, message: str) -> None:
    with pytest.raises(FormulaError, match=message):
        parse_formula(text)
