"""Which seeds train together: the seed groups of a config, and what a group changes in its runs' identity.

Torch-free (spec expansion, ``status``, ``submit`` and ``aggregate`` use it). A model's seeds are cut into
consecutive groups of ``seeds_per_process`` (spec key, top level or per model; ``submit --seeds-per-process``):
seeds ``0-9`` with S = 4 are the groups ``0-3``, ``4-7``, ``8-9``. Without dropout a group computes what its
seeds' solo runs compute, so grouping is only a way of running them (the run ids are the solo ones). With
dropout the masks are the group's (``experiments.seed_group``): each run's config then records its group in
``runtime.seed_group`` (part of the run id), so the grouping is part of the experiment and every command that
expands the spec (``status``, ``aggregate``, ``evaluate``) computes the same run ids.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def dropout_settings(cfg: dict[str, Any]) -> dict[str, float]:
    """The model's dropout rates above 0 (``model.*dropout*``): where a group's numbers differ from solo runs."""
    return {k: v for k, v in cfg["model"].items() if "dropout" in k and isinstance(v, int | float) and v > 0}


def group_label(seeds: Sequence[int]) -> str:
    """``runtime.seed_group`` of a group: its seeds, comma-separated."""
    return ",".join(str(s) for s in seeds)


def group_config(cfg: dict[str, Any], seeds: Sequence[int]) -> dict[str, Any]:
    """The config each seed of a group records: unchanged when the group computes what solo runs compute (one
    seed, or no dropout) or already names its group (a rerun of part of a group keeps the group's id); else
    with ``runtime.seed_group`` naming the group (part of the run id)."""
    if len(seeds) < 2 or not dropout_settings(cfg) or cfg["runtime"].get("seed_group"):
        return cfg
    return {**cfg, "runtime": {**cfg["runtime"], "seed_group": group_label(seeds)}}


def group_seed(cfg: dict[str, Any], seeds: Sequence[int]) -> int:
    """The seed of a group's dropout masks: the first seed of the group it belongs to (``runtime.seed_group``),
    so a rerun of its unfinished seeds draws from the same seed; else the first of ``seeds``."""
    recorded = cfg["runtime"].get("seed_group")
    return int(str(recorded).split(",")[0]) if recorded else int(seeds[0])


def seed_groups(seeds: Sequence[int], per_process: int) -> list[tuple[int, ...]]:
    """``seeds`` cut, in order, into consecutive groups of ``per_process`` (the last may be shorter)."""
    return [tuple(seeds[i:i + per_process]) for i in range(0, len(seeds), per_process)]


def changes_results(cfg: dict[str, Any]) -> bool:
    """Whether training this config's seeds as a group gives other numbers than their solo runs (dropout)."""
    return bool(dropout_settings(cfg))
