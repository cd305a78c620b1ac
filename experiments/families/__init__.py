"""The family registry: every model family is a plug-in adapter (``adapter.Family``), found by name.

Every sub-package of this package is a built-in family and registers itself when imported (``register``);
they are imported when the registry is first asked, so adding a family is adding its folder. Other families
plug in the same way without editing synbench: a module that calls ``register(MyFamily)``, named in
``$SYNBENCH_PLUGINS`` or declared as a ``synbench.plugins`` entry point (``experiments.plugins``).
"""

from __future__ import annotations

import importlib
import pkgutil
from pathlib import Path
from typing import Any

from experiments.families.adapter import CAPABILITIES, KINDS, Family, Method, Scoring, ScoringRequest
from experiments.plugins import PLUGINS_ENV, load_plugins
from lightning_modules.errors import InputError

_REGISTRY: dict[str, type[Family]] = {}
_loaded = False

__all__ = ["CAPABILITIES", "KINDS", "Family", "Method", "Scoring", "ScoringRequest", "register", "get_family",
           "names", "checkpoint_family", "model_family", "inspect_encodings"]


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
    """Import the built-in families (the sub-packages of this package) and the plug-ins (once)."""
    global _loaded
    if _loaded:
        return
    _loaded = True
    for module in sorted(pkgutil.iter_modules(__path__, f"{__name__}."), key=lambda m: m.name):
        if module.ispkg:
            importlib.import_module(module.name)
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
        inspection = adapter(family).inspection()
        for name in inspection.names if inspection else ():
            out.setdefault(name, adapter(family))
    return out


def source_family(source: str) -> Family | None:
    """The adapter of the family whose models are named ``PREFIX...`` (``hf:DIR``), or None."""
    _load()
    for name, adapter in _REGISTRY.items():
        if adapter.source_prefix and str(source).startswith(adapter.source_prefix):
            return adapter(name)
    return None


def checkpoint_family(path: str | Path) -> tuple[Family, dict[str, Any]]:
    """The adapter and the ``synbench`` metadata of a checkpoint file (read safely)."""
    from experiments.checkpoints import read_checkpoint

    meta = read_checkpoint(path)["synbench"]
    _load()
    if meta["family"] not in _REGISTRY:
        raise InputError(f"checkpoint of unknown family {meta['family']!r} (known: {', '.join(_REGISTRY)}; "
                         f"plug-ins load from ${PLUGINS_ENV})", str(path))
    return get_family(meta["family"]), meta


def model_family(model: str | Path) -> tuple[Family, dict[str, Any]]:
    """The adapter and metadata of a model: a source named by a family's prefix (``hf:DIR``: metadata
    ``{"family", "source", "config": {}}``) or a checkpoint file."""
    adapter = source_family(str(model))
    if adapter is not None:
        return adapter, {"family": adapter.name, "source": str(model), "config": {}}
    return checkpoint_family(model)


def declared_defaults(option: str, method: str | None = None) -> str:
    """The defaults every registered family declares for a scoring-method ``option`` (of ``method``, else of
    any method reading it), e.g. ``100 (dtg, tg, ...); 300 (pushdown)``: the CLI's help states them as
    declared, never a copy. ``n`` with ``method`` None or ``propose`` includes the N of each family with the
    ``propose`` capability (its proposing part's). Families in name order: the registry's order depends on
    which modules were imported first."""
    _load()
    by_value: dict[str, list[str]] = {}
    for name in sorted(_REGISTRY):
        family = get_family(name)
        values = {m.options[option] for m in family.methods() if option in m.options and method in (None, m.name)}
        proposing = family.proposing() if option == "n" and method in (None, "propose") else None
        if proposing is not None:
            values.add(proposing.n)
        for value in values:
            by_value.setdefault("every word kept" if value is None else str(value), []).append(name)
    return "; ".join(f"{value} ({', '.join(names)})" for value, names in by_value.items())
