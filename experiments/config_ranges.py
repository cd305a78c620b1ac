"""The ranges config values must lie in: a value out of range is one error naming the key, before training.

Rules by key name, so a new family's keys are covered without listing them: every number is finite; integers
(sizes, steps, counts, intervals) are >= 1 unless listed in ``NON_NEGATIVE``; floats (rates, weights, norms,
epsilons) are >= 0; dropouts and Adam betas lie in [0, 1); keys whose default is null but whose values are
integers (``INTEGER_OR_NULL``: ``train.keep_every``) must be integers. Keys with other ranges (``min_rel <= 0``)
are listed, and a family adds its own through ``Family.config_ranges``. Relations between keys (``n_heads``
dividing ``d_model``) stay with the model config that owns them.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from lightning_modules.errors import InputError
from lightning_modules.numeric import is_number


@dataclass(frozen=True)
class Range:
    """``low <= value <= high``, with open ends where ``low_open`` / ``high_open``."""

    low: float = -math.inf
    high: float = math.inf
    low_open: bool = False
    high_open: bool = False

    def contains(self, value: float) -> bool:
        above = value > self.low if self.low_open else value >= self.low
        below = value < self.high if self.high_open else value <= self.high
        return above and below

    def __str__(self) -> str:
        low = "-inf" if self.low == -math.inf else f"{self.low:g}"
        high = "inf" if self.high == math.inf else f"{self.high:g}"
        opening = "(" if self.low_open or self.low == -math.inf else "["
        closing = ")" if self.high_open or self.high == math.inf else "]"
        return f"{opening}{low}, {high}{closing}"


POSITIVE_INT = Range(1)
NON_NEGATIVE_VALUE = Range(0)
FRACTION = Range(0, 1, high_open=True)
NON_NEGATIVE = ("generation_seed", "min_count", "memory_length", "warmup_steps", "min_length")
# integers whose default is null (so no slot type to check a value against): an integer in range, or null
INTEGER_OR_NULL = ("keep_every",)
SPECIAL = {
    "min_rel": Range(high=0),
    "pushdown_layers": Range(-1),
    "peak_lr": Range(0, low_open=True),
    "adam_beta1": FRACTION,
    "adam_beta2": FRACTION,
}


def range_of(key: str, value: int | float, extra: Mapping[str, Range]) -> Range:
    """The range of ``key`` (its last component) for a slot of ``value``'s type (an int slot or a float one)."""
    name = key.rsplit(".", 1)[-1]
    if name in extra:
        return extra[name]
    if name in SPECIAL:
        return SPECIAL[name]
    if "dropout" in name:
        return FRACTION
    if isinstance(value, int) and name not in NON_NEGATIVE:
        return POSITIVE_INT
    return NON_NEGATIVE_VALUE


def check_ranges(cfg: Mapping[str, Any], extra: Mapping[str, Range] | None = None,
                 reference: Mapping[str, Any] | None = None, prefix: str = "") -> None:
    """Raise ``InputError`` at the first number of ``cfg`` (nested sections) outside its range; ``reference``
    (the preset's defaults) gives each slot's type, so ``-1`` in a float slot is judged as a float."""
    reference = reference or {}
    for key, value in cfg.items():
        path = f"{prefix}{key}"
        slot = reference.get(key)
        if key in INTEGER_OR_NULL and value is not None and (isinstance(value, bool) or not isinstance(value, int)):
            raise InputError(f"expected an integer or null, got {value!r}", path)
        if isinstance(value, Mapping):
            check_ranges(value, extra, slot if isinstance(slot, Mapping) else None, f"{path}.")
        elif is_number(value):
            if not math.isfinite(value):
                raise InputError(f"expected a finite number, got {value!r}", path)
            typed = float(value) if isinstance(slot, float) else value
            allowed = range_of(path, typed, extra or {})
            if not allowed.contains(value):
                raise InputError(f"{value!r} is out of range {allowed}", path)
