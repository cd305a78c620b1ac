"""Fixtures of the experiments tests: the real SLURM cluster fixture, shared with tests/slurm."""

from __future__ import annotations

import importlib.util
from pathlib import Path

# tests/ is not a package, so the fixture module is loaded by path (one definition for both folders).
_spec = importlib.util.spec_from_file_location(
    "synbench_slurm_fixtures", Path(__file__).resolve().parents[1] / "slurm" / "conftest.py"
)
_fixtures = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_fixtures)
slurm_cluster = _fixtures.slurm_cluster
