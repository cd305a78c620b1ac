"""Dependency Transformer Grammars (Zhao et al. 2024) and their Transformer-XL (trans) baseline: the adapter.

``dtg`` generates a sentence with its projective dependency tree as a generative arc-standard, arc-eager or
arc-swift transition sequence (the system is a config value), with STACK/COMPOSE attention; ``txl-trans`` is
a Transformer-XL over the same sequence with causal attention and linear relative positions.
"""

from __future__ import annotations

import argparse
from typing import Any

from experiments.families import register
from experiments.families.adapter import Family, InspectOption


@register
class DTGFamily(Family):
    """Dependency Transformer Grammars (Zhao et al. 2024): generative transition sequences over CoNLL-U trees."""

    names = ("dtg",)
    inspect_names = ("dtg",)
    inspect_options = (
        InspectOption("--system", {"choices": ("standard", "eager", "swift"),
                                   "help": "dtg: transition system (default: standard, the official code's)"}),
    )
    inspect_one_input_per_file = True

    def kind(self, config: dict[str, Any] | None = None) -> str:
        return "joint"

    def inspect_sources(self, args: argparse.Namespace) -> list[tuple[str, Any]]:
        from experiments.families.dtg.inspect import read_sources

        return read_sources(args)

    def inspect(self, name: str, item: Any, args: argparse.Namespace) -> dict[str, Any]:
        from experiments.families.dtg.inspect import inspect_sentence

        return inspect_sentence(item, args.system or "standard")
