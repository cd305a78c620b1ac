"""``is_number``: the one number check of synbench (caches, results, the aggregate, config ranges and fields)."""

from __future__ import annotations

import math

import numpy as np

from lightning_modules.numeric import is_number


def test_is_number_takes_numpy_scalars_and_rejects_bools_and_text():
    assert all(is_number(v) for v in (1, 2.5, np.float32(0.5), np.int64(3), math.inf, math.nan))
    assert not any(is_number(v) for v in (True, np.bool_(True), "1", None, [1.0], np.array([1.0])))
    assert is_number(np.float64(1.0), finite=True) and not is_number(math.nan, finite=True)
    assert not is_number(np.float32("inf"), finite=True)


def test_the_near_copies_are_gone():
    """The aggregate, the figures, config ranges and model config fields ask ``is_number`` (numpy scalars
    included), not a copy of their own."""
    from pathlib import Path

    repo = Path(__file__).resolve().parents[2]
    for path in ("analysis/aggregate.py", "analysis/figures.py", "experiments/config_ranges.py",
                 "lightning_modules/models/config_fields.py", "experiments/evaluate/rerank.py"):
        source = (repo / path).read_text(encoding="utf-8")
        assert "is_number" in source and "isinstance(value, int | float)" not in source, path
