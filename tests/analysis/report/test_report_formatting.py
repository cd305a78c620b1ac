"""Numbers as the report's table cells (``analysis.report.formatting``): anything that is not a finite real
number (NaN, ±inf, None, a bool, text) is ``n/a``, never an exception; numpy scalars are numbers."""

from __future__ import annotations

import math

import numpy as np
import pytest

from analysis.report import formatting as fmt

NOT_NUMBERS = [math.nan, math.inf, -math.inf, None, True, "1.5", np.float64("nan")]


@pytest.mark.parametrize("value", NOT_NUMBERS)
def test_what_is_not_a_finite_number_is_n_a(value) -> None:
    assert not fmt.is_finite(value)
    assert fmt.fixed(value) == fmt.general(value) == fmt.p_value(value) == fmt.count(value) == "n/a"
    assert fmt.mean_sd(value, 0.1, 1.0) == "n/a"
    assert math.isnan(fmt.scaled(value, 100.0))


def test_numbers_numpy_scalars_included() -> None:
    assert fmt.is_finite(np.float32(0.5)) and fmt.is_finite(np.int64(3)) and fmt.is_finite(2)
    assert fmt.fixed(np.float64(1.005), 1) == "1.0" and fmt.fixed(2) == "2.00"
    assert fmt.general(1075.49) == "1075" and fmt.general(0.000123456) == "0.0001235"
    assert fmt.p_value(3.9e-06) == "3.9e-06" and fmt.p_value(0.07021) == "0.0702"
    assert fmt.count(np.float64(3.0)) == "3"
    assert fmt.scaled(0.61, 100.0) == pytest.approx(61.0)


def test_mean_sd_in_the_metric_s_scale_and_without_a_usable_sd() -> None:
    assert fmt.mean_sd(0.61, 0.02, 100.0) == "61.00 ± 2.00"
    assert fmt.mean_sd(70.0, math.nan, 1.0) == fmt.mean_sd(70.0, "wide", 1.0) == "70.00 (no sd)"


def test_labels_and_text_cells() -> None:
    assert fmt.label(1.0) == "1" and fmt.label("pos") == "pos" and fmt.label(0.25) == "0.25"
    assert fmt.text(math.nan) == fmt.text(None) == "" and fmt.text("holm") == "holm" and fmt.text(3) == "3"
    assert fmt.readable(1234567) == "1,234,567" and fmt.readable(True) == "True" and fmt.readable("x") == "x"


def test_numbers_past_a_million_are_in_scientific_notation() -> None:
    assert fmt.mean_sd(4.72144e32, 3.18e32, 1.0) == "4.72e+32 ± 3.2e+32"
    assert fmt.mean_sd(5115628.14, 937896.07, 1.0) == "5.12e+06 ± 9.4e+05"  # its sd with it, though below 1e6
    assert fmt.mean_sd(9420.43, 504.25, 1.0) == "9420.43 ± 504.25" and fmt.mean_sd(2e7, None, 1.0) == "2e+07 (no sd)"
    assert fmt.fixed(4.72e32) == "4.72e+32" and fmt.fixed(999_999.0) == "999999.00"
    assert fmt.compact(4.72e32) == "4.72e+32" and fmt.compact(9142.69) == "9143" and fmt.compact(0.07021) == "0.0702"
    assert fmt.signed_percent(12.5) == "+12.5 %" and fmt.signed_percent(9.2e25) == "+9.2e+25 %"


def test_a_compact_ci_in_the_metric_s_scale_tells_its_bounds_apart() -> None:
    assert fmt.ci(0.0968, 0.129, 100.0) == "[9.68, 12.9]" and fmt.ci(9063.87, 9776.99, 1.0) == "[9064, 9777]"
    assert fmt.ci(2.47e32, 6.97e32, 1.0) == "[2.47e+32, 6.97e+32]"
    assert fmt.ci(399.5, 400.5, 1.0) == "[399.5, 400.5]"  # three digits would read [400, 400]
    assert fmt.ci(33.86, 33.86, 1.0) == "[33.9, 33.9]" and fmt.ci(math.nan, 1.0, 1.0) == ""
