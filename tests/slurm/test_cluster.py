"""The real services the orchestration tests rely on: the single-node SLURM cluster (with accounting) and a
PostgreSQL server shared by Optuna workers."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid

import optuna
import pytest

WORKER = r"""
import os, sys, optuna
optuna.logging.set_verbosity(optuna.logging.WARNING)
study = optuna.load_study(study_name=sys.argv[2], storage=sys.argv[1])
def objective(trial):
    trial.set_user_attr("pid", os.getpid())
    x = trial.suggest_float("x", -10, 10)
    return (x - 2) ** 2
study.optimize(objective, n_trials=int(sys.argv[3]))
"""


def _run(*cmd: str) -> str:
    return subprocess.run(cmd, capture_output=True, text=True, check=True, timeout=60).stdout


@pytest.mark.slurm
def test_node_is_up_and_accounting_answers(slurm_cluster):
    assert _run("sinfo", "-h", "-o", "%P %a %T").split()[:2] == ["debug*", "up"]
    job = _run(
        "sbatch",
        "--parsable",
        "--array=0-1",
        "-o",
        str(slurm_cluster / "test-%A_%a.out"),
        "--wrap",
        "exit $SLURM_ARRAY_TASK_ID",
    ).strip()
    deadline = time.monotonic() + 60
    rows: dict[str, str] = {}
    while time.monotonic() < deadline:  # sacct lags the controller by a second or two: poll
        out = _run("sacct", "-n", "-P", "-X", "-j", job, "-o", "JobID,State,ExitCode")
        rows = {line.split("|")[0]: line.split("|", 1)[1] for line in out.splitlines()}
        if rows.get(f"{job}_0", "").startswith("COMPLETED") and rows.get(f"{job}_1", "").startswith("FAILED"):
            break
        time.sleep(0.5)
    assert rows == {f"{job}_0": "COMPLETED|0:0", f"{job}_1": "FAILED|1:0"}


@pytest.mark.slurm
def test_cluster_up_is_idempotent(slurm_cluster):
    from pathlib import Path

    repo = Path(__file__).resolve().parents[2]
    pid = (slurm_cluster / "slurmctld.pid").read_text().strip()
    subprocess.run(
        ["bash", str(repo / "slurm" / "cluster-up.sh")], check=True, capture_output=True, timeout=60
    )
    assert (slurm_cluster / "slurmctld.pid").read_text().strip() == pid  # the running controller was kept


@pytest.mark.postgres
def test_two_optuna_workers_share_a_postgres_study(postgres_url):
    name = f"test-{uuid.uuid4().hex[:8]}"
    # Create the study (and the schema) once, before the workers: concurrent creation races on CREATE TYPE.
    optuna.create_study(study_name=name, storage=postgres_url, direction="minimize")
    try:
        env = {**os.environ, "PYTHONWARNINGS": "ignore"}
        workers = [
            subprocess.Popen([sys.executable, "-c", WORKER, postgres_url, name, "8"], env=env)
            for _ in range(2)
        ]
        assert [w.wait(timeout=120) for w in workers] == [0, 0]
        study = optuna.load_study(study_name=name, storage=postgres_url)
        complete = [t for t in study.trials if t.state == optuna.trial.TrialState.COMPLETE]
        assert len(complete) == 16
        assert {t.user_attrs["pid"] for t in complete} == {w.pid for w in workers}
        assert study.best_value == min(t.value for t in complete)
    finally:
        optuna.delete_study(study_name=name, storage=postgres_url)
