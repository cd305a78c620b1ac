"""Shared fixtures and the suite's no-silent-skip policy.

The local copy of the data (``../shared/data``) must exist: without it the run stops at once with one line
naming the missing folder (the data tests are most of the suite; a green run without them would mean nothing).
With ``SYNBENCH_NO_SKIPS=1`` (set by ``.ci/run``) every skipped test fails with its skip reason and any
deselection (``-m``, ``-k``) fails the run: a green CI ran every test. A plain ``pytest`` on a machine without
the services (SLURM, PostgreSQL, root) still skips those tests, with the reason.

``prepared_data_dir`` runs ``synbench prepare --from ../shared/data`` once per test session into a temporary
folder; pass it as ``data_dir=`` / ``--data-dir``. Treat it as read-only; tests that corrupt or re-stage files
prepare their own folder. Every test also runs with ``SYNBENCH_DATA`` set to it (``_default_data_dir``): no test
reads the user's ``~/.cache/synbench/data``, so whether it was prepared, or whether an earlier test prepared it,
changes no outcome. Tests of the default location unset it themselves.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent
SHARED_DATA = REPO_ROOT.parent / "shared" / "data"
NO_SKIPS = os.environ.get("SYNBENCH_NO_SKIPS") == "1"


def pytest_sessionstart(session: pytest.Session) -> None:
    if not SHARED_DATA.is_dir():
        pytest.exit(f"synbench tests: the local data copy {SHARED_DATA} is missing (the repository must sit "
                    "next to ../shared, as CI clones it)", returncode=2)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    """Under ``SYNBENCH_NO_SKIPS=1`` a skip is a failure that names what was missing."""
    outcome = yield
    report = outcome.get_result()
    if NO_SKIPS and report.skipped and not hasattr(report, "wasxfail"):
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        report.outcome = "failed"
        report.longrepr = f"skipped under SYNBENCH_NO_SKIPS=1 (CI runs every test): {reason}"


def pytest_deselected(items: list[pytest.Item]) -> None:
    if NO_SKIPS and items:
        pytest.exit(f"synbench tests: {len(items)} tests deselected (e.g. {items[0].nodeid}) under "
                    "SYNBENCH_NO_SKIPS=1: CI runs every test", returncode=2)


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """``../shared/data`` next to the repository (checked at session start)."""
    return SHARED_DATA


@pytest.fixture(scope="session")
def prepared_data_dir(shared_data: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A data directory with every dataset staged from ``../shared/data`` (verified against the pins)."""
    from experiments.prepare import prepare

    data_dir = tmp_path_factory.mktemp("synbench-data")
    problems = [p for report in prepare(data_dir, source=shared_data) for p in report.problems]
    assert not problems, problems
    return data_dir


@pytest.fixture(scope="session", autouse=True)
def _default_data_dir(prepared_data_dir: Path):
    """``SYNBENCH_DATA`` is the prepared folder for the whole session (and the processes tests start)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("SYNBENCH_DATA", str(prepared_data_dir))
        yield


@pytest.fixture
def one_thread():
    """One torch thread for a test (``pytestmark = pytest.mark.usefixtures("one_thread")``): tiny sequential
    networks run fastest on one, and two spin against each other on a loaded machine."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)
