"""Numbers and values as the report's table cells: fixed or general precision, p-values, counts, mean ± sd.

A value that is not a finite real number (NaN from an empty CSV cell, text where a number belongs) is
shown as ``n/a`` (or as text where the cell is a label), never raised on.
"""

from __future__ import annotations

import math
from typing import Any

from lightning_modules.numeric import is_number


def is_finite(value: Any) -> bool:
    """A finite real number (numpy scalars included), not a bool."""
    return is_number(value, finite=True)


def fixed(value: Any, digits: int = 2) -> str:
    return f"{float(value):.{digits}f}" if is_finite(value) else "n/a"


def general(value: Any) -> str:
    return f"{float(value):.4g}" if is_finite(value) else "n/a"


def p_value(value: Any) -> str:
    if not is_finite(value):
        return "n/a"
    return f"{value:.1e}" if value < 1e-4 else f"{value:.4f}"


def scaled(value: Any, scale: float) -> float:
    return float(value) * scale if is_finite(value) else math.nan


def label(value: Any) -> str:
    """A layer or similar key: a number compactly, anything else as text."""
    return general(value) if is_finite(value) else str(value)


def count(value: Any) -> str:
    return str(int(value)) if is_finite(value) else "n/a"


def text(value: Any) -> str:
    """A table value as text; NaN (an empty CSV cell) as an empty string."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    return str(value)


def readable(value: Any) -> str:
    """Integers with thousands separators (parameter counts), anything else as text."""
    return f"{value:,}" if isinstance(value, int) and not isinstance(value, bool) else str(value)


def mean_sd(mean: Any, sd: Any, scale: float) -> str:
    if not is_finite(mean):
        return "n/a"
    if not is_finite(sd):
        return f"{mean * scale:.2f} (no sd)"
    return f"{mean * scale:.2f} ± {sd * scale:.2f}"
