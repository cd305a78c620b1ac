"""Probability 0 in result files. A search (a word-synchronous beam) can give a word, and so its sentence,
probability 0: no hypothesis it kept generates the word. Its log-probability is -inf and its surprisal +inf;
JSON has no Infinity, so such a value is written ``null`` (a log-probability field: -inf; a surprisal field:
+inf), and every result counts them (``zero_probability_words``, ``zero_probability_sentences``). NaN is never
written: a NaN is a bug, and raises."""

from __future__ import annotations

import math
from typing import Any

from lightning_modules.numeric import is_number


def to_json(value: float, infinity: float) -> float | None:
    """``value`` for a JSON file: itself when finite, ``None`` when it is ``infinity`` (-inf for log-probs, +inf
    for surprisals)."""
    if math.isfinite(value):
        return value
    if value == infinity:
        return None
    raise ValueError(f"{value} where a finite value or {infinity} was expected")


def from_json(value: float | None, infinity: float) -> float:
    """The value a JSON field holds: ``None`` is ``infinity``."""
    return infinity if value is None else float(value)


def is_json_value(value: Any) -> bool:
    """A finite number, or ``None`` (infinite)."""
    return value is None or is_number(value, finite=True)
