"""SyntaxGym prediction formulas: a real parser (pyparsing) and a typed evaluator — never ``eval``.

Grammar, as in cpllab/syntaxgym-core ``prediction.py`` (loosest binding last)::

    atom     := "(" (DIGITS | "*") ";%" CONDITION "%" ")"  |  NUMBER  |  "(" expr ")"  |  "[" expr "]"
    sum      := atom (("+" | "-") atom)*          left-associative, one precedence level
    compare  := sum [("<" | ">" | "=") sum]
    expr     := compare (("&" | "|") compare)*    left-associative, one precedence level

``(N;%c%)`` is the surprisal of region N in condition c, ``(*;%c%)`` the sum over all regions of c;
``=`` is ``numpy.isclose(a, b, rtol=1e-5, atol=1e-3)``. The Hu et al. (2020) suites group with ``[ ]``,
syntaxgym-core with ``( )``; both are accepted. Formulas are type-checked (arithmetic on numbers,
comparisons give truth values, ``& |`` combine truth values, the whole formula is a truth value); a chained
comparison ``a < b < c`` is rejected, where syntaxgym-core would silently evaluate ``a < b``.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

import numpy as np
import pyparsing as pp

EQUALITY_RTOL = 1e-5
EQUALITY_ATOL = 1e-3


class FormulaError(ValueError):
    """A formula that does not parse or is ill-typed."""


@dataclass(frozen=True)
class Region:
    region: int | None  # None for "*": all regions of the condition
    condition: str

    def __str__(self) -> str:
        return f"({'*' if self.region is None else self.region};%{self.condition}%)"


@dataclass(frozen=True)
class Number:
    value: float

    def __str__(self) -> str:
        return repr(self.value)


@dataclass(frozen=True)
class BinaryOp:
    op: str
    left: Formula
    right: Formula

    def __str__(self) -> str:
        return f"[{self.left} {self.op} {self.right}]"


Formula = Region | Number | BinaryOp
ARITHMETIC, COMPARISON, LOGICAL = ("+", "-"), ("<", ">", "="), ("&", "|")


@cache
def _grammar() -> pp.ParserElement:
    expr = pp.Forward()
    region = (
        pp.Suppress("(")
        + (pp.Word(pp.nums) | pp.Literal("*"))
        + pp.Suppress(";%")
        + pp.Word(pp.alphanums + "_-")
        + pp.Suppress("%")
        + pp.Suppress(")")
    ).set_parse_action(lambda t: Region(None if t[0] == "*" else int(t[0]), t[1]))
    number = pp.pyparsing_common.number.copy().set_parse_action(lambda t: Number(float(t[0])))
    group = pp.Suppress("(") + expr + pp.Suppress(")") | pp.Suppress("[") + expr + pp.Suppress("]")
    atom = region | number | group
    sum_ = (atom + pp.ZeroOrMore(pp.one_of("+ -") + atom)).set_parse_action(_chain)
    compare = (sum_ + pp.Optional(pp.one_of("< > =") + sum_)).set_parse_action(_chain)
    expr <<= (compare + pp.ZeroOrMore(pp.one_of("& |") + compare)).set_parse_action(_chain)
    return expr


def _chain(tokens: pp.ParseResults) -> Formula:
    """Fold ``x op y op z`` to the left: ``[[x op y] op z]``."""
    items = list(tokens)
    node = items[0]
    for i in range(1, len(items), 2):
        node = BinaryOp(items[i], node, items[i + 1])
    return node


def parse_formula(text: str) -> Formula:
    """Parse and type-check a prediction formula; ``FormulaError`` says what is wrong and where."""
    try:
        formula = _grammar().parse_string(text, parse_all=True)[0]
    except pp.ParseBaseException as e:
        raise FormulaError(f"cannot parse formula {text!r} at character {e.loc + 1}: {e.msg}") from None
    if _type(formula) != "bool":
        raise FormulaError(f"formula {text!r} is a number, not a prediction (no comparison at the top)")
    return formula


def _type(f: Formula) -> str:
    if isinstance(f, Region | Number):
        return "num"
    left, right = _type(f.left), _type(f.right)
    if f.op in LOGICAL:
        if left != "bool" or right != "bool":
            raise FormulaError(f"'{f.op}' combines comparisons, but an operand of {f} is a number")
        return "bool"
    if left != "num" or right != "num":
        raise FormulaError(f"'{f.op}' takes numbers, but an operand of {f} is a comparison")
    return "bool" if f.op in COMPARISON else "num"


def regions(f: Formula) -> set[tuple[str, int | None]]:
    """The ``(condition, region)`` pairs a formula refers to (region ``None`` for ``*``)."""
    if isinstance(f, Region):
        return {(f.condition, f.region)}
    if isinstance(f, BinaryOp):
        return regions(f.left) | regions(f.right)
    return set()


def evaluate(f: Formula, surprisal: dict[tuple[str, int], float]) -> bool | float:
    """Evaluate on one item: ``surprisal[(condition, region)]`` holds every region of every condition."""
    if isinstance(f, Number):
        return f.value
    if isinstance(f, Region):
        if f.region is None:
            return sum(v for (c, _), v in surprisal.items() if c == f.condition)
        return surprisal[(f.condition, f.region)]
    a, b = evaluate(f.left, surprisal), evaluate(f.right, surprisal)
    if f.op == "+":
        return a + b
    if f.op == "-":
        return a - b
    if f.op == "<":
        return a < b
    if f.op == ">":
        return a > b
    if f.op == "=":
        return bool(np.isclose(a, b, rtol=EQUALITY_RTOL, atol=EQUALITY_ATOL))
    if f.op == "&":
        return a and b
    return a or b
