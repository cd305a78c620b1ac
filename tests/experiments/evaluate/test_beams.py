"""The beam utilities every family's beam search shares (``experiments/evaluate/scorers/beams.py``)."""

from __future__ import annotations

import pytest
import torch

from experiments.evaluate.scorers.beams import best, check_beam_settings
from lightning_modules.errors import InputError


def test_check_beam_settings_names_the_first_bad_setting() -> None:
    check_beam_settings(1, 1, 1, 1, 0)
    check_beam_settings(5)  # a beam without word beam, action limit or batches (Pushdown's)
    for args, name in (((0,), "beam"), ((3, 0), "word_beam"), ((3, 2, 0), "max_actions"),
                       ((3, 2, 1, 0), "batch_size"), ((3, 2, 1, 1, -1), "fast_track")):
        with pytest.raises(InputError) as e:
            check_beam_settings(*args)
        assert e.value.location == name


def test_best_is_stable_and_skips_excluded_entries() -> None:
    inf = float("-inf")
    scores = torch.tensor([0.5, inf, 1.0, 0.5, inf, 1.0], dtype=torch.float64)
    assert best(scores, 3) == [2, 5, 0]
    assert best(scores, 10) == [2, 5, 0, 3]  # -inf entries never count
    assert best(torch.full((3,), inf), 2) == []
