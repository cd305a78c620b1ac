"""Numbers and values as the report's table cells: fixed or general precision, p-values, counts, mean ± sd.

Numbers are formatted for reading: past ``SCIENTIFIC_FROM`` (1e6) in scientific notation (a perplexity bound of
4.72e+32, not its 33 digits), a compact CI in about three significant digits. A value that is not a finite
real number (NaN from an empty CSV cell, text where a number belongs) is shown as ``n/a`` (or as text where
the cell is a label), never raised on.
"""

from __future__ import annotations

import math
from typing import Any

from lightning_modules.numeric import is_number

SCIENTIFIC_FROM = 1e6  # from this magnitude on, numbers are shown in scientific notation


def is_finite(value: Any) -> bool:
    """A finite real number (numpy scalars included), not a bool."""
    return is_number(value, finite=True)


def fixed(value: Any, digits: int = 2) -> str:
    """``digits`` decimals; scientific notation past 1e6 (``4.72e+32``)."""
    if not is_finite(value):
        return "n/a"
    return f"{float(value):.3g}" if abs(float(value)) >= SCIENTIFIC_FROM else f"{float(value):.{digits}f}"


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


def compact(value: Any, digits: int = 3) -> str:
    """A number in about ``digits`` significant digits: ``4.72e+32`` past 1e6, ``9143`` from 1000 (no
    decimals), ``62.5``, ``0.0702`` below (a CI bound, a mean beside a published one)."""
    if not is_finite(value):
        return "n/a"
    x = float(value)
    if abs(x) >= SCIENTIFIC_FROM:
        return f"{x:.{digits}g}"
    return f"{x:.0f}" if abs(x) >= 10 ** max(digits, 3) else f"{x:.{digits}g}"


def mean_sd(mean: Any, sd: Any, scale: float) -> str:
    """``mean ± sd`` in the metric's display scale: two decimals, or ``4.72e+32 ± 3.2e+32`` when either is
    past 1e6; ``(no sd)`` where there is none (one seed)."""
    if not is_finite(mean):
        return "n/a"
    m = float(mean) * scale
    if not is_finite(sd):
        return f"{m:.3g} (no sd)" if abs(m) >= SCIENTIFIC_FROM else f"{m:.2f} (no sd)"
    s = float(sd) * scale
    if max(abs(m), abs(s)) >= SCIENTIFIC_FROM:
        return f"{m:.3g} ± {s:.2g}"
    return f"{m:.2f} ± {s:.2f}"


def signed_percent(value: Any) -> str:
    """A relative difference in percent, signed: ``+12.5 %``, ``+9.2e+25 %`` past 1e6."""
    if not is_finite(value):
        return "n/a"
    x = float(value)
    return f"{x:+.2g} %" if abs(x) >= SCIENTIFIC_FROM else f"{x:+.1f} %"


def ci(low: Any, high: Any, scale: float) -> str:
    """A compact confidence interval ``[low, high]`` in the metric's display scale, in three significant
    digits or as many more (up to six) as tell its bounds apart; empty without one."""
    if not (is_finite(low) and is_finite(high)):
        return ""
    low, high = float(low) * scale, float(high) * scale
    digits = next((d for d in range(3, 7) if compact(low, d) != compact(high, d)), 3)
    return f"[{compact(low, digits)}, {compact(high, digits)}]"
