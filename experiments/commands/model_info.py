"""``synbench model-info FAMILY --preset P [--vocab-size V] [--json]``: parameter counts of a model preset.

The family's adapter builds the model on the meta device (no memory, no initialisation cost), so the 252M
configs are instant. Presets live in the family's presets file (``experiments/families/F/presets/<family>.yaml``
for the built-in families).
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from experiments.cli_options import positive_int
from lightning_modules.errors import InputError


def register(subparsers: argparse._SubParsersAction) -> None:
    from experiments.families import names

    parser = subparsers.add_parser(
        "model-info", help="print the parameter count of a model preset",
        description="Build a model preset on the meta device and print its parameter count.",
    )
    parser.add_argument("family", choices=names(), metavar="FAMILY", help=" | ".join(names()))
    parser.add_argument("--preset", required=True, help="preset name in the family's presets file")
    parser.add_argument("--vocab-size", type=positive_int, default=None, help="override the preset's vocabulary size")
    parser.add_argument("--json", action="store_true", help="print JSON")
    parser.set_defaults(func=handle)


def preset_config(family: str, preset: str) -> tuple[dict[str, Any], str]:
    """The flat model config of ``preset`` among the family's presets and where they come from."""
    from experiments.families import get_family

    presets, path = get_family(family).model_presets()
    if preset not in presets:
        raise InputError(f"no preset {preset!r} (available: {', '.join(presets)})", str(path))
    if not isinstance(presets[preset], dict):
        raise InputError(f"preset {preset!r} must be a mapping", str(path))
    return dict(presets[preset]), path


def model_info(family: str, preset: str, vocab_size: int | None = None) -> dict[str, Any]:
    """``{"parameters", "parts", "family", "preset", "config"}`` for a preset (built on the meta device)."""
    from experiments.families import get_family

    config, path = preset_config(family, preset)
    if vocab_size is not None:
        config["vocab_size"] = vocab_size
    info = get_family(family).model_info(config, prefix=f"{path}: {preset}.")
    return {**info, "family": family, "preset": preset}


def handle(args: argparse.Namespace) -> int:
    info = model_info(args.family, args.preset, args.vocab_size)
    if args.json:
        print(json.dumps(info, sort_keys=True))
        return 0
    c = info["config"]
    sizes = ", ".join(f"{key} {c[key]:,}" for key in ("vocab_size", "d_model", "n_layers", "n_heads", "d_ff")
                      if isinstance(c.get(key), int))
    print(f"{info['family']} / {info['preset']}: {info['parameters']:,} parameters ({sizes})")
    for part, n in info["parts"].items():
        print(f"  {part:<12} {n:>14,}")
    return 0
