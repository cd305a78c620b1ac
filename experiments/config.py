"""Configs: YAML presets composed with ``key=value`` overrides, validated, hashed.

A resolved config is a plain nested dict with four sections: ``model`` (architecture), ``data`` (corpus and
encoding), ``train`` (optimisation and schedule) and ``runtime`` (paths, logging, devices — everything that
must not change results). The run identity hashes everything except ``runtime``, so moving a run folder or
switching W&B online never forks a run, while any change that could change a number does.
"""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any

import yaml

from experiments.config_ranges import check_ranges
from experiments.presets import merge
from lightning_modules.errors import InputError

VOLATILE_SECTIONS = ("runtime",)
# runtime settings that change what training computes (numerics; the effective batch: train.batch_size per
# process; the seeds of a group whose dropout masks differ from solo runs'; compiled kernels, which round
# differently and draw their own dropout masks): part of the run's identity when they differ from these
# defaults, so ids of default runs stay put
RESULT_RUNTIME = {"precision": "32-true", "devices": 1, "seed_group": None, "compile": "none"}
# train settings added after runs existed, left out of the identity while unset (null) so earlier run ids stay
# put; once set, part of it: a run that keeps checkpoints over training (``keep_every``) is another folder that
# has them, not a finished run without them
UNSET_TRAIN = ("keep_every",)
_FLOAT = re.compile(r"[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?")


def parse_overrides(items: list[str]) -> dict[str, Any]:
    """``["train.lr=3e-4", "model.n_layers=2"]`` -> nested dict; values parsed as YAML scalars."""
    out: dict[str, Any] = {}
    for item in items:
        key, sep, raw = item.partition("=")
        if not sep or not key or any(not part for part in key.split(".")):
            raise InputError(f"override {item!r} is not KEY=VALUE (e.g. train.max_steps=200)")
        try:
            value = yaml.safe_load(raw) if raw != "" else ""
        except yaml.YAMLError:
            raise InputError(f"cannot parse value {raw!r}", key) from None
        if isinstance(value, str) and _FLOAT.fullmatch(raw.strip()):
            value = float(raw)  # YAML 1.1 reads "3e-4" as a string; users mean a number
        node = out
        parts = key.split(".")
        for part in parts[:-1]:
            node = node.setdefault(part, {})
            if not isinstance(node, dict):
                raise InputError("conflicting overrides", key)
        node[parts[-1]] = value
    return out


def check_types(cfg: dict[str, Any], reference: dict[str, Any], prefix: str = "") -> None:
    """Every value must have the type of the default it replaces (ints may fill float slots; null is free)."""
    for key, value in cfg.items():
        path = f"{prefix}{key}"
        if key not in reference:
            continue
        ref = reference[key]
        if isinstance(ref, dict):
            if not isinstance(value, dict):
                raise InputError(f"expected a mapping, got {value!r}", path)
            check_types(value, ref, f"{path}.")
        elif ref is None or value is None:
            continue
        elif isinstance(ref, bool) != isinstance(value, bool):
            raise InputError(f"expected {type(ref).__name__}, got {value!r}", path)
        elif isinstance(ref, float) and isinstance(value, int | float):
            continue
        elif not isinstance(value, type(ref)):
            raise InputError(f"expected {type(ref).__name__}, got {value!r}", path)


def config_hash(cfg: dict[str, Any]) -> str:
    """Stable hash of everything that can change results: all sections but ``runtime``, and of ``runtime``
    the ``RESULT_RUNTIME`` settings that differ from their defaults (bf16 or two processes: another run); the
    ``UNSET_TRAIN`` settings only when set."""
    payload = {k: v for k, v in cfg.items() if k not in VOLATILE_SECTIONS}
    if isinstance(payload.get("train"), dict):
        payload["train"] = {k: v for k, v in payload["train"].items() if not (k in UNSET_TRAIN and v is None)}
    runtime = cfg.get("runtime") if isinstance(cfg.get("runtime"), dict) else {}
    changed = {k: runtime[k] for k, default in RESULT_RUNTIME.items() if runtime.get(k, default) != default}
    if changed:
        payload["runtime"] = changed
    text = json.dumps(payload, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def run_id(cfg: dict[str, Any], seed: int) -> str:
    """Run identity: short config hash plus seed, e.g. ``FAMILY-3f9a1c02d4-s7``."""
    family = cfg.get("family", "run")
    return f"{family}-{config_hash(cfg)[:10]}-s{seed}"


def resolve_train_config(family: str, preset: str, overrides: list[str] | None = None) -> dict[str, Any]:
    """Compose the family's model preset (``experiments/families/F/presets/FAMILY.yaml[preset]`` for the
    built-in families) with its data/train/runtime preset (the ``configs/train.yaml`` preset it names, or of
    its own name; both from the family's adapter) and overrides.

    Unknown keys, values of the wrong type and values out of range (``experiments.config_ranges``) are errors
    naming the config key, so a typo never trains a silently different model.
    """
    from experiments.families import get_family

    adapter = get_family(family)
    models, _ = adapter.model_presets()
    train_defaults = adapter.train_presets()
    if preset not in models or preset not in train_defaults:
        presets = sorted(set(models) & set(train_defaults))
        raise InputError(f"unknown preset {preset!r} for {family} (known: {', '.join(presets)})", "--preset")
    base = {"family": family, "preset": preset, "model": models[preset], **train_defaults[preset],
            "runtime": train_defaults["runtime"]}
    cfg = merge(base, parse_overrides(overrides or []), strict=True)
    check_types(cfg, base)
    check_ranges(cfg, adapter.config_ranges, base)
    return cfg
