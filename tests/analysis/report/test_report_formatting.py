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
