"""Syntactic Ordered Memory (Shen et al. 2021): the family adapter.

SOM is a string model: its parser is part of how it computes p(x_{t+1} | x_<=t), so a sentence's
probability is exact given the decisions it takes (greedy in evaluation). ``synbench inspect som`` prints
Γ, its grid labels, the grid view and Algorithm 1's labels (``experiments.families.som.inspect``).
"""

from __future__ import annotations

import argparse
from typing import Any

from experiments.families import register
from experiments.families.adapter import Family, InspectOption


@register
class SOMFamily(Family):
    """Syntactic Ordered Memory: Γ from UD trees, grid labels, Algorithm 1 (Shen et al. 2021)."""

    names = ("som",)
    paper = "som"
    inspect_names = ("som",)
    inspect_options = (
        InspectOption("--slots", {"type": int, "metavar": "N",
                                  "help": "som: memory slots N (default 15, the paper's)"}),
        InspectOption("--decisions", {"metavar": "T1,...,TT",
                                      "help": "som: the model's decisions, one slot per word (the first N): "
                                              "adds Algorithm 1's labels and the parse they build"}),
    )

    def kind(self, config: dict[str, Any] | None = None) -> str:
        return "string"

    # -- inspect -------------------------------------------------------------------------------------------
    def inspect_sources(self, args: argparse.Namespace) -> list[tuple[str, Any]]:
        from experiments.families.som.inspect import sources

        return sources(args)

    def inspect(self, name: str, item: Any, args: argparse.Namespace) -> dict[str, Any]:
        from experiments.families.som.inspect import record

        return record(item, args.slots, args.decisions)
