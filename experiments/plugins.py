"""Plug-ins: modules that register model families, evaluation tasks or papers without editing synbench.

A plug-in is a Python module that calls ``experiments.families.register``, ``experiments.evaluate.tasks.register``
or ``experiments.papers.register`` when imported. It is imported when named in ``$SYNBENCH_PLUGINS``
(comma-separated module names; the variable reaches SLURM and local workers with the environment) or declared
as a ``synbench.plugins`` entry point of an installed package. Every registry loads them before its first
answer, so a family defined in a plug-in trains, evaluates and appears in reports like a built-in one.
"""

from __future__ import annotations

import importlib
import os
from importlib.metadata import entry_points

from lightning_modules.errors import InputError

PLUGINS_ENV = "SYNBENCH_PLUGINS"
ENTRY_POINT_GROUP = "synbench.plugins"

_loaded = False


def load_plugins() -> None:
    """Import the ``synbench.plugins`` entry points and the modules of ``$SYNBENCH_PLUGINS`` (once)."""
    global _loaded
    if _loaded:
        return
    _loaded = True
    for entry in entry_points(group=ENTRY_POINT_GROUP):
        entry.load()
    for module in filter(None, (m.strip() for m in os.environ.get(PLUGINS_ENV, "").split(","))):
        try:
            importlib.import_module(module)
        except ImportError as e:
            raise InputError(f"cannot import plug-in {module!r}: {e}", PLUGINS_ENV) from None
