"""Small numeric helpers shared by scorers, caches and the analysis: one definition each."""

from __future__ import annotations

import math
import numbers
from collections.abc import Sequence
from typing import Any

import numpy as np


def logsumexp(values: Sequence[float] | np.ndarray) -> float:
    """log Σ exp(v) in float64, stable; -inf for an empty or all -inf input."""
    values = np.asarray(values, dtype=np.float64)
    if values.size == 0:
        return -math.inf
    top = values.max()
    return float(top + np.log(np.exp(values - top).sum())) if np.isfinite(top) else float(top)


def is_number(value: Any, finite: bool = False) -> bool:
    """A real number (numpy scalars included) and not a bool; with ``finite`` also not NaN or ±inf."""
    if not isinstance(value, numbers.Real) or isinstance(value, bool):
        return False
    return not finite or math.isfinite(value)
