"""Tolerances for float32 results that the suite computes two ways, named once.

torch picks its CPU kernels by instruction set (AVX-512, AVX2 or scalar code: ``ATEN_CPU_CAPABILITY``), and MKL
and oneDNN pick theirs by CPU too, so a float32 reduction sums in an order that depends on the machine. Two
computations of the same quantity (a batched and a one-by-one pass, a sum split into parts, a scorer and the
network's own log-probabilities) then differ by a few units in the last place of the *largest partial sums*:
float32's resolution is 1.2e-7 relative, and a sum of n terms may round by about n times that. An absolute
tolerance that passes on one CPU (1e-6 on a log-probability of -26) fails on another. ``.ci/run`` reruns the
numerically sensitive modules under a second kernel set to catch such comparisons.

Exact equality stays where the code is deterministic by construction: integers, encodings, indexing, the same
kernel on the same input in one process.
"""

from __future__ import annotations

import pytest

#: float32 sums and log-sum-exps of log-probabilities: 1e-5 relative is ~100 units in the last place, enough for
#: reductions over thousands of terms in any order, and far below any difference a test is there to catch.
FLOAT32_RTOL = 1e-5
#: The absolute floor, for values near 0 (a word's log-probability close to 0, a gradient entry): a float32
#: value computed from partial results of magnitude ~1 carries ~1e-6 of rounding, ten times that is safe.
FLOAT32_ATOL = 1e-5


def close32(expected, *, scale: float = 1.0):
    """``pytest.approx`` for float32 results computed another way: relative ``FLOAT32_RTOL``, at least
    ``FLOAT32_ATOL * scale`` absolute. ``scale`` is the magnitude of the quantities a value was derived from when
    that is larger than the value itself (a word's log-probability taken as the difference of two prefix totals
    of magnitude ~``scale``; a part of a sum split in two)."""
    return pytest.approx(expected, rel=FLOAT32_RTOL, abs=FLOAT32_ATOL * scale)


#: ``torch.testing.assert_close`` / ``np.testing.assert_allclose`` keyword arguments of the same tolerance.
FLOAT32 = {"rtol": FLOAT32_RTOL, "atol": FLOAT32_ATOL}
