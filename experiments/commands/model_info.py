"""``synbench model-info FAMILY --preset P [--vocab-size V] [--json]``: parameter counts of a model preset.

The model is built on the meta device (no memory, no initialisation cost), so the 252M configs are instant.
Presets live in ``experiments/configs/model/<family>.yaml``.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from lightning_modules.errors import InputError

MODEL_FAMILIES = ("tg", "txl-trees", "txl-terminals")
PUSHDOWN_FAMILIES = ("pushdown", "base-lm")


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "model-info", help="print the parameter count of a model preset",
        description="Build a model preset on the meta device and print its parameter count.",
    )
    parser.add_argument("family", choices=MODEL_FAMILIES + PUSHDOWN_FAMILIES, help="model family")
    parser.add_argument("--preset", required=True,
                        help="preset name in experiments/configs/model/FAMILY.yaml")
    parser.add_argument("--vocab-size", type=int, default=None, help="override the preset's vocabulary size")
    parser.add_argument("--json", action="store_true", help="print JSON")
    parser.set_defaults(func=handle)


def preset_config(family: str, preset: str) -> tuple[dict[str, Any], Path]:
    """The flat model config of ``preset`` in ``configs/model/<family>.yaml`` and that file's path."""
    from experiments.config import configs_dir, load_yaml

    path = configs_dir() / "model" / f"{family}.yaml"
    presets = load_yaml(path)
    if preset not in presets:
        raise InputError(f"no preset {preset!r} (available: {', '.join(presets)})", str(path))
    if not isinstance(presets[preset], dict):
        raise InputError(f"preset {preset!r} must be a mapping", str(path))
    return dict(presets[preset]), path


def model_info(family: str, preset: str, vocab_size: int | None = None) -> dict[str, Any]:
    """``{"parameters", "parts", "family", "preset", "config"}`` for a preset (built on the meta device)."""
    import torch

    from lightning_modules.models import pushdown, tg

    config, path = preset_config(family, preset)
    if vocab_size is not None:
        if vocab_size < 1:
            raise InputError(f"must be positive, got {vocab_size}", "--vocab-size")
        config["vocab_size"] = vocab_size
    prefix = f"{path}: {preset}."
    if family in PUSHDOWN_FAMILIES:
        pd_cfg = pushdown.config_from_dict(config, prefix=prefix, family=family)
        with torch.device("meta"):
            pd_module = pushdown.build(pd_cfg, family)
        return {"parameters": pushdown.parameter_count(pd_module), "family": family, "preset": preset,
                "parts": pushdown.parameter_breakdown(pd_module), "config": pushdown.asdict(pd_cfg)}
    cfg = tg.config_from_dict(config, prefix=prefix)
    with torch.device("meta"):
        module = tg.build(cfg)
    return {"parameters": tg.parameter_count(module), "parts": tg.parameter_breakdown(module),
            "family": family, "preset": preset, "config": tg.asdict(cfg)}


def handle(args: argparse.Namespace) -> int:
    info = model_info(args.family, args.preset, args.vocab_size)
    if args.json:
        print(json.dumps(info, sort_keys=True))
        return 0
    c = info["config"]
    print(f"{info['family']} / {info['preset']}: {info['parameters']:,} parameters "
          f"(vocab {c['vocab_size']:,}, d_model {c['d_model']}, {c['n_layers']} layers, "
          f"{c['n_heads']} heads, d_ff {c['d_ff']})")
    for part, n in info["parts"].items():
        print(f"  {part:<12} {n:>14,}")
    return 0
