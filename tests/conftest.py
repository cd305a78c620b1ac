"""Shared fixtures: the local copy of the data (``../shared/data``) and one data directory prepared from it.

``prepared_data_dir`` runs ``synbench prepare --from ../shared/data`` once per test session into a temporary
folder and sets nothing global (no ``SYNBENCH_DATA``): pass it as ``data_dir=`` / ``--data-dir``. Treat it as
read-only; tests that corrupt or re-stage files prepare their own folder.
"""

from __future__ import annotations

from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent
SHARED_DATA = REPO_ROOT.parent / "shared" / "data"


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """``../shared/data`` next to the repository; tests that need it are skipped when it is missing."""
    if not SHARED_DATA.is_dir():
        pytest.skip(f"the local data copy {SHARED_DATA} is missing (CI clones the repo next to ../shared)")
    return SHARED_DATA


@pytest.fixture(scope="session")
def prepared_data_dir(shared_data: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A data directory with every dataset staged from ``../shared/data`` (verified against the pins)."""
    from experiments.prepare import prepare

    data_dir = tmp_path_factory.mktemp("synbench-data")
    problems = [p for report in prepare(data_dir, source=shared_data) for p in report.problems]
    assert not problems, problems
    return data_dir
