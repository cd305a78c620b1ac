"""The experiment loop on the real single-node SLURM cluster and PostgreSQL server: submit an array, wait,
status, aggregate; requeue mid-training; resubmit only what is missing; Optuna workers sharing a study."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import optuna
import pandas as pd
import pytest

from experiments.experiment_runs import experiment_runs, folder_of
from experiments.experiment_spec import load_spec
from experiments.launchers import slurm
from experiments.runs import read_queued, run_status, write_failed
from tests.experiments.conftest import wandb_run

REPO = Path(__file__).resolve().parents[2]


def synbench(*args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "experiments.cli", *args], cwd=REPO, capture_output=True,
                          text=True, timeout=timeout)


def status(spec: Path, root: Path) -> tuple[int, list[dict]]:
    done = synbench("status", str(spec), "--runs-dir", str(root), "--json")
    return done.returncode, json.loads(done.stdout)["runs"]


def wait_for(condition, timeout: float, what: str, log: Path | None = None):
    """Poll ``condition`` until it holds; on a time-out fail with the tail of the task's ``log``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.5)
    tail = "\n".join(log.read_text(errors="replace").splitlines()[-30:]) if log and log.is_file() else ""
    pytest.fail(f"timed out after {timeout} s waiting for {what}" + (f"; the task's log ends:\n{tail}" if tail else ""))


def terminal(states: dict[str, str]) -> dict[str, str] | None:
    """``states`` once no job in it is pending, running or completing any more (a time-out's ``None`` before)."""
    return states if states and not {"PENDING", "RUNNING", "COMPLETING", "CONFIGURING"} & set(states.values()) else None


@pytest.fixture(scope="module")
def wandb_service_token(tmp_path_factory) -> str:
    """The service token W&B leaves in the environment of a process that opened a run (once per process)."""
    import wandb

    before = os.environ.pop("WANDB_SERVICE", None)
    wandb.init(mode="offline", dir=str(tmp_path_factory.mktemp("wandb")), project="synbench-test").finish()
    token = os.environ.get("WANDB_SERVICE") or before
    assert token, "W&B did not record its service in the environment"
    return token


@pytest.fixture
def inherited_wandb_service(wandb_service_token, monkeypatch):
    """A live W&B service token in the environment the runs are submitted from, as after an in-process W&B
    run (`synbench analyze`, a notebook): SLURM passes it to the task, and a run that attached to that service
    would be refused its own id when it restarts (the service still holds the first attempt)."""
    monkeypatch.setenv("WANDB_SERVICE", wandb_service_token)


@pytest.mark.slurm
def test_four_seed_array_then_only_missing(slurm_cluster, tmp_path, tiny_spec):
    spec = tiny_spec(families=("tg", "txl-terminals"), seeds="0-3")
    root = tmp_path / "runs"
    runs = experiment_runs(load_spec(spec))
    done = synbench("submit", str(spec), "--executor", "slurm", "--runs-dir", str(root), "--wait")
    assert done.returncode == 0, done.stdout + done.stderr
    code, rows = status(spec, root)
    assert code == 0 and [r["state"] for r in rows] == ["DONE"] * 8
    job = read_queued(folder_of(root, runs[0])).job_id.split("_")[0]
    assert [read_queued(folder_of(root, r)).job_id for r in runs] == [f"{job}_{i}" for i in range(8)]
    # the chained aggregation job (afterany) writes the tidy table once the array has ended
    table = root / "exp" / "aggregate" / "metrics_long.parquet"
    wait_for(table.exists, 120, "the aggregation job")
    long = pd.read_parquet(table)
    assert long[long.metric == "best_val_loss"].shape[0] == 4 * 2  # 4 seeds x 2 models
    assert sorted(long["seed"].unique()) == [0, 1, 2, 3] and set(long["family"]) == {"tg", "txl-terminals"}

    # lose one run, fail another: --only-missing sends exactly those two, as a 2-task array
    metrics = {r["run_id"]: r["metrics"] for r in rows}
    shutil.rmtree(folder_of(root, runs[2]))
    (folder_of(root, runs[5]) / "DONE").unlink()
    write_failed(folder_of(root, runs[5]), "simulated failure")
    code, rows = status(spec, root)
    assert code == 1 and [r["state"] for r in rows].count("FAILED") == 1
    dry = synbench("submit", str(spec), "--executor", "slurm", "--runs-dir", str(root), "--only-missing",
                   "--dry-run")
    assert [line.split()[1].rstrip(":") for line in dry.stdout.splitlines() if line.startswith("  run ")] == [
        runs[2].run_id, runs[5].run_id]
    done = synbench("submit", str(spec), "--executor", "slurm", "--runs-dir", str(root), "--only-missing",
                    "--wait")
    assert done.returncode == 0 and "submitted 2 of 8 runs (slurm job" in done.stdout
    assert "left alone: 6 DONE" in done.stdout
    second = read_queued(folder_of(root, runs[2])).job_id.split("_")[0]
    assert second != job and read_queued(folder_of(root, runs[0])).job_id == f"{job}_0"
    code, rows = status(spec, root)
    assert code == 0 and {r["run_id"]: r["metrics"] for r in rows} == metrics  # the same numbers again


@pytest.mark.slurm
@pytest.mark.slow
@pytest.mark.parametrize("how", ["scontrol requeue", "SIGUSR1"])
def test_requeued_task_resumes_and_matches_an_uninterrupted_run(slurm_cluster, tmp_path, tiny_spec, how, request,
                                                                inherited_wandb_service):
    """`scontrol requeue` (SLURM kills the task with SIGTERM and queues it again) or the time-limit warning
    SIGUSR1 (the task saves and requeues itself) mid-training: the task restarts, resumes from last.ckpt and
    ends with exactly the metrics of an uninterrupted local run of the same config and seed (submitted from a
    process with a W&B service of its own)."""
    spec = tiny_spec(seeds="5", steps=60, wandb="offline")
    root = tmp_path / "runs"
    [run] = experiment_runs(load_spec(spec))
    folder = folder_of(root, run)
    done = synbench("submit", str(spec), "--executor", "slurm", "--runs-dir", str(root))
    assert done.returncode == 0, done.stderr
    task = read_queued(folder).job_id
    log = root / "exp" / "logs" / f"slurm-{task}.out"
    request.addfinalizer(lambda: subprocess.run(["scancel", task.split("_")[0]], capture_output=True))
    wait_for(lambda: (folder / "checkpoints" / "last.ckpt").exists(), 300, "the first checkpoint", log)
    assert not (folder / "DONE").exists(), "too fast to interrupt: raise steps"
    if how == "SIGUSR1":
        subprocess.run(["scancel", "--batch", "--signal=USR1", task], check=True)
    else:
        subprocess.run(["scontrol", "requeue", task], check=True)
    wait_for(lambda: slurm.job_states([task], poll_s=0).get(task) == "PENDING", 60, "the task back in the queue",
             log)
    wait_for(lambda: run_status(folder).state == "DONE", 400, "DONE after the restart", log)

    # the uninterrupted reference: the same spec run by the local executor (1 thread per run, like the task)
    assert synbench("submit", str(spec), "--runs-dir", str(tmp_path / "reference")).returncode == 0
    reference = run_status(folder_of(tmp_path / "reference", run)).metrics
    assert reference["global_step"] == 60 and run_status(folder).metrics == reference
    log = log.read_text()
    assert "restart 0" in log and "restart 1" in log
    if how == "SIGUSR1":
        assert "SIGUSR1 at step" in log and f"requeued SLURM job {task}" in log
    assert len(list(folder.glob("csv/version_*"))) == 2  # two attempts, one CSV segment each
    segments = sorted(folder.glob(f"wandb/offline-run-*-{run.run_id}"))
    assert len(segments) == 2  # W&B: both attempts under id = run id, for `synbench sync` to join
    # The W&B records of each attempt: id, group, job type, tags. On `scontrol requeue` SLURM sends SIGTERM to
    # every process of the task, W&B's own service (wandb-core) included, which exits without flushing: the
    # first segment may hold only its header (the CSV segments are complete). On SIGUSR1 the task saves,
    # finishes its W&B run and then requeues itself: both segments are complete, the second continuing
    # where the first stopped.
    attempts = [wandb_run(s) for s in segments]
    complete = attempts if how == "SIGUSR1" else attempts[1:]
    for record, _ in complete:
        assert (record.run_id, record.run_group, record.job_type) == (run.run_id, "exp", "train")
        assert list(record.tags) == ["tg", "seed=5"] and record.project == "synbench"
    steps = [s for _, s in attempts]
    assert steps[1][0] > 0 and steps[1][-1] == 59 and steps[1] == sorted(steps[1])
    if how == "SIGUSR1":
        assert steps[0][0] == 0 and steps[1][0] > steps[0][-1]
    dry = synbench("sync", str(spec), "--runs-dir", str(root), "--dry-run")
    assert f"--id {run.run_id} {segments[0]} {segments[1]}" in dry.stdout


@pytest.mark.postgres
def test_two_tune_workers_share_a_postgres_study(postgres_url, tmp_path, tiny_spec):
    spec = tiny_spec(name="tuned", seeds="0", tune={
        "params": {"model.peak_lr": {"type": "float", "low": 1.0e-4, "high": 1.0e-2, "log": True}},
        "pruner": "none", "sampler_seed": 0})
    study = f"tune-{os.getpid()}-{time.monotonic_ns()}"
    done = synbench("tune", str(spec), "--n-trials", "4", "--workers", "2", "--storage", postgres_url,
                    "--study", study, "--runs-dir", str(tmp_path / "runs"))
    assert done.returncode == 0, done.stderr[-3000:]
    try:
        trials = optuna.load_study(study_name=study, storage=postgres_url).trials
        assert [t.state for t in trials].count(optuna.trial.TrialState.COMPLETE) == 4
        assert len({t.user_attrs["worker"] for t in trials}) == 2  # both workers ran trials
        assert all(Path(t.user_attrs["run_dir"], "DONE").exists() for t in trials)
    finally:
        optuna.delete_study(study_name=study, storage=postgres_url)


@pytest.mark.slurm
@pytest.mark.postgres
def test_tune_workers_run_as_a_slurm_array(slurm_cluster, postgres_url, tmp_path, tiny_spec):
    """``tune --executor slurm``: the workers are the tasks of one array job on the real cluster, sharing a
    PostgreSQL study; ``--wait`` returns once they ended, with the study's summary and the exported best."""
    spec = tiny_spec(name="tuned", seeds="0", tune={
        "params": {"model.peak_lr": {"type": "float", "low": 1.0e-4, "high": 1.0e-2, "log": True}},
        "pruner": "none", "sampler_seed": 0})
    study = f"tune-slurm-{os.getpid()}-{time.monotonic_ns()}"
    root = tmp_path / "runs"
    done = synbench("tune", str(spec), "--n-trials", "3", "--workers", "2", "--executor", "slurm", "--wait",
                    "--storage", postgres_url, "--study", study, "--runs-dir", str(root),
                    "--export", str(tmp_path / "best.yaml"))
    logs = sorted((root / "tuned" / "logs").glob("*"))
    assert done.returncode == 0, done.stderr[-3000:] + "".join(p.read_text()[-2000:] for p in logs)
    job = re.search(r"submitted as SLURM array job (\d+)", done.stdout).group(1)
    try:
        trials = optuna.load_study(study_name=study, storage=postgres_url).trials
        assert [t.state for t in trials].count(optuna.trial.TrialState.COMPLETE) == 3
        assert len({t.user_attrs["worker"] for t in trials}) == 2  # both array tasks ran trials
        assert all(Path(t.user_attrs["run_dir"], "DONE").exists() for t in trials)
    finally:
        optuna.delete_study(study_name=study, storage=postgres_url)
    tasks = [f"{job}_0", f"{job}_1"]
    ended = wait_for(lambda: terminal(slurm.job_states(tasks)), 60, "both array tasks to end")
    assert ended == dict.fromkeys(tasks, "COMPLETED")
    assert (tmp_path / "best.yaml").exists()


@pytest.fixture
def max_array_size_3(slurm_cluster):
    """The cluster's MaxArraySize lowered to 3 for one test (``scontrol reconfigure``), then restored."""
    conf = Path("/etc/slurm/slurm.conf")
    original = conf.read_text()
    conf.write_text(original + "MaxArraySize=3\n")
    subprocess.run(["scontrol", "reconfigure"], check=True, capture_output=True)
    wait_for(lambda: slurm.max_array_size() == 3, 30, "MaxArraySize=3 in effect")
    yield 3
    conf.write_text(original)
    subprocess.run(["scontrol", "reconfigure"], check=True, capture_output=True)
    wait_for(lambda: slurm.max_array_size() == 1001, 30, "MaxArraySize restored")


@pytest.mark.slurm
def test_a_submission_larger_than_max_array_size_is_split(max_array_size_3, tmp_path, tiny_spec):
    """7 runs on a cluster whose arrays hold at most 3 tasks: three array jobs (3 + 3 + 1), all waited for,
    and one aggregation job after all of them."""
    spec = tiny_spec(seeds="0-6", steps=4)
    root = tmp_path / "runs"
    runs = experiment_runs(load_spec(spec))
    done = synbench("submit", str(spec), "--executor", "slurm", "--runs-dir", str(root), "--wait")
    assert done.returncode == 0, done.stdout + done.stderr
    jobs = re.search(r"slurm job ([\d:]+), aggregation job (\d+)", done.stdout)
    arrays, aggregate_job = jobs.group(1).split(":"), jobs.group(2)
    assert len(arrays) == 3
    queued = [read_queued(folder_of(root, r)).job_id for r in runs]
    assert queued == [f"{arrays[i // 3]}_{i % 3}" for i in range(7)]
    code, rows = status(spec, root)
    assert code == 0 and [r["state"] for r in rows] == ["DONE"] * 7
    table = root / "exp" / "aggregate" / "metrics_long.parquet"
    wait_for(table.exists, 120, "the aggregation job")
    assert pd.read_parquet(table).query("metric == 'best_val_loss'").shape[0] == 7
    # the table is written before the aggregation job ends: wait for SLURM to say it ended, and how
    ended = wait_for(lambda: terminal(slurm.job_states([aggregate_job])), 60, "the aggregation job to end")
    assert ended == {aggregate_job: "COMPLETED"}
    manifests = sorted((root / "exp" / "submissions").glob("*/manifest.jsonl"))
    assert [len(m.read_text().splitlines()) for m in manifests] == [3, 3, 1]
