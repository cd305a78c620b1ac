"""The family registry: every model family is a plug-in adapter (``adapter.Family``), found by name.

Built-in families register when this package is first asked (``tg``, ``pushdown``, ``parser`` modules). Other
families plug in without editing synbench: a module that calls ``register(MyFamily)``, named in
``$SYNBENCH_PLUGINS`` or declared as a ``synbench.plugins`` entry point (``experiments.plugins``).
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

from experiments.families.adapter import CAPABILITIES, KINDS, Family, Scoring, ScoringRequest
from experiments.plugins import PLUGINS_ENV, load_plugins
from lightning_modules.errors import InputError

BUILTIN = ("experiments.families.tg", "experiments.families.pushdown", "experiments.families.parser",
           "experiments.families.hf", "experiments.families.som", "experiments.families.dtg",
           "experiments.families.palm")

_REGISTRY: dict[str, type[Family]] = {}
_loaded = False

__all__ = ["CAPABILITIES", "KINDS", "Family", "Scoring", "ScoringRequest", "register", "get_family", "names",
           "family_of_checkpoint", "checkpoint_family"]


def register(adapter: type[Family]) -> type[Family]:
    """Register ``adapter`` under each of its ``names`` (usable as a class decorator)."""
    if not adapter.names:
        raise ValueError(f"{adapter.__name__} declares no family names")
    for name in adapter.names:
        known = _REGISTRY.get(name)
        if known is not None and known is not adapter:
            raise ValueError(f"family {name!r} is registered twice ({known.__name__}, {adapter.__name__})")
        _REGISTRY[name] = adapter
    return adapter


def _load() -> None:
    """Import the built-in families and the plug-ins (once)."""
    global _loaded
    if _loaded:
        return
    _loaded = True
    for module in BUILTIN:
        importlib.import_module(module)
    load_plugins()


def names() -> tuple[str, ...]:
    """Every registered family name."""
    _load()
    return tuple(_REGISTRY)


def get_family(name: str) -> Family:
    """The adapter of family ``name``; unknown names are an error listing the known ones."""
    _load()
    if name not in _REGISTRY:
        raise InputError(f"unknown model family {name!r} (known: {', '.join(_REGISTRY)})", "family")
    return _REGISTRY[name](name)


def inspect_encodings() -> dict[str, Family]:
    """``synbench inspect NAME``: each encoding name with the adapter that prints it."""
    _load()
    out: dict[str, Family] = {}
    for family, adapter in _REGISTRY.items():
        for name in adapter.inspect_names:
            out.setdefault(name, adapter(family))
    return out


def checkpoint_family(path: str | Path) -> tuple[Family, dict[str, Any]]:
    """The adapter and the ``synbench`` metadata of a checkpoint file (read safely)."""
    from experiments.checkpoints import read_checkpoint

    meta = read_checkpoint(path)["synbench"]
    _load()
    if meta["family"] not in _REGISTRY:
        raise InputError(f"checkpoint of unknown family {meta['family']!r} (known: {', '.join(_REGISTRY)}; "
                         f"plug-ins load from ${PLUGINS_ENV})", str(path))
    return get_family(meta["family"]), meta


def family_of_checkpoint(path: str | Path) -> str:
    return checkpoint_family(path)[0].name
