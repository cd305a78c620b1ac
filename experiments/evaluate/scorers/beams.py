"""Utilities shared by the families' beam searches: their settings check and the top-k of a score table.

Every beam scorer checks its settings here, so that a bad value is one ``InputError`` naming the setting as
``load_scorer`` and the scoring request name it, whatever the family; and every beam keeps its best
hypotheses with ``best`` (ties broken by index order, so searches are deterministic).
"""

from __future__ import annotations

import torch

from lightning_modules.errors import InputError


def check_beam_settings(beam: int, word_beam: int | None = None, max_actions: int | None = None,
                        batch_size: int | None = None, fast_track: int | None = None) -> None:
    """A beam's settings: ``beam`` and those of ``word_beam``, ``max_actions``, ``batch_size`` a search has (not
    None) at least 1, ``fast_track`` (None: off) at least 0; one error naming the first bad setting."""
    for name, value in (("beam", beam), ("word_beam", word_beam), ("max_actions", max_actions),
                        ("batch_size", batch_size)):
        if value is not None and value < 1:
            raise InputError("must be at least 1", name)
    if fast_track is not None and fast_track < 0:
        raise InputError("must be at least 0", "fast_track")


def best(scores: torch.Tensor, count: int) -> list[int]:
    """Indices of the ``count`` best finite entries of a 1-d ``scores``, best first (stable: ties keep index
    order; -inf entries, the excluded ones, never count)."""
    count = min(count, int(torch.isfinite(scores).sum()))
    return torch.sort(scores, descending=True, stable=True).indices[:count].tolist()
