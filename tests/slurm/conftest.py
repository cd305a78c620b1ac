"""Session fixtures for the real services: the single-node SLURM cluster and a throw-away PostgreSQL server.

Each fixture starts its service with the repository's idempotent script when it is not running yet (and stops
it again at the end of the session only if it started it), and skips with the reason when the service is not
installed or the tests do not run as root (the scripts start daemons as root, like `.ci/run`).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SLURM_DIR = Path(os.environ.get("SLURM_CI_DIR", "/tmp/synbench-slurm"))
PG_BIN = Path("/usr/lib/postgresql/15/bin")


def _alive(pid_file: Path) -> bool:
    """Whether the process named on the first line of ``pid_file`` runs."""
    try:
        os.kill(int(pid_file.read_text().split()[0]), 0)
        return True
    except (OSError, ValueError, IndexError):
        return False


def _script(name: str, *args: str) -> str:
    done = subprocess.run(
        ["bash", str(REPO / "slurm" / name), *args], capture_output=True, text=True, timeout=300
    )
    if done.returncode != 0:
        pytest.fail(f"slurm/{name} failed:\n{done.stdout}\n{done.stderr}")
    return done.stdout


@pytest.fixture(scope="session")
def slurm_cluster() -> Path:
    """A running single-node SLURM cluster with accounting (sacct); yields its state folder."""
    if shutil.which("slurmctld") is None:
        pytest.skip("slurmctld is not installed (run slurm/install-deps.sh)")
    if os.geteuid() != 0:
        pytest.skip("starting the SLURM daemons needs root")
    started = not all(_alive(SLURM_DIR / f"{d}.pid") for d in ("slurmctld", "slurmd", "slurmdbd", "mysqld"))
    if started:
        _script("cluster-up.sh")
    yield SLURM_DIR
    if started:
        _script("cluster-down.sh")


@pytest.fixture(scope="session")
def postgres_url() -> str:
    """The URL of a running PostgreSQL server with an empty-or-reused database ``synbench``: the server
    ``.ci/run`` started (``SYNBENCH_PG_URL``), else one this fixture starts."""
    if os.environ.get("SYNBENCH_PG_URL"):
        yield os.environ["SYNBENCH_PG_URL"]
        return
    if not (PG_BIN / "initdb").exists():
        pytest.skip("PostgreSQL 15 is not installed (run slurm/install-deps.sh)")
    if os.geteuid() != 0:
        pytest.skip("starting the PostgreSQL server as the postgres user needs root")
    pg_dir = Path(os.environ.get("SYNBENCH_PG_DIR", "/tmp/synbench-pg"))
    started = not _alive(pg_dir / "data" / "postmaster.pid")
    url = _script("postgres-up.sh").strip().splitlines()[-1]
    yield url
    if started:
        _script("postgres-down.sh")
