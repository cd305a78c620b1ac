"""synbench tune: the spec's search space, trials as run folders, pruning, retries after a killed worker, export.

Two workers sharing a PostgreSQL study are tested in test_orchestration_slurm.py (needs the server)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import optuna
import pytest
import yaml

from experiments.cli import main
from experiments.config import run_id
from experiments.experiment_runs import experiment_runs
from experiments.experiment_spec import load_spec
from experiments.tune import check_search_space, export_best, trial_config
from lightning_modules.errors import InputError

REPO = Path(__file__).resolve().parents[2]
SPACE = {
    "model.peak_lr": {"type": "float", "low": 1.0e-4, "high": 1.0e-2, "log": True},
    "model.d_model": {"type": "categorical", "choices": [16, 32]},
}


def tune_spec(tiny_spec, steps=8, **tune):
    return tiny_spec(name="tuned", steps=steps, seeds="0-2", tune={"params": SPACE, **tune})


@pytest.mark.parametrize(
    ("tune", "message", "line"),
    [
        ({"params": {"model.peak_lr": {"type": "float", "low": 0, "high": 1, "log": True}}}, "log-scale", 2),
        ({"params": {"model.peak_lr": {"type": "float", "low": "1e-4", "high": 1}}}, "write 1.0e-4", 2),
        ({"params": {"model.d_model": {"type": "categorical"}}}, "non-empty list", 2),
        ({"params": {"model.d_model": {"type": "normal"}}}, "float|int|categorical", 2),
        ({"params": {}, "budget": 3}, "unknown key", 1),
        ({"model": "nope", "params": SPACE}, "no model named 'nope'", 1),
    ],
)
def test_search_space_errors_name_file_line_and_key(tmp_path, tune, message, line):
    body = yaml.safe_dump({"tune": tune}, sort_keys=False)
    path = tmp_path / "bad.yaml"
    path.write_text("models: [{family: tg}]\nseeds: 0\n" + body)
    with pytest.raises(InputError, match=message) as e:
        load_spec(path)
    assert e.value.location.startswith(f"{path}:")
    assert int(e.value.location.rsplit(":", 1)[1]) >= 3  # inside the tune section, not the top of the file


def test_unknown_config_key_in_the_search_space_fails_before_any_trial(tmp_path, tiny_spec):
    spec = load_spec(tiny_spec(tune={"params": {"model.peak_lrr": {"type": "float", "low": 0.1, "high": 1.0}}}))
    with pytest.raises(InputError, match="tune.params.model.peak_lrr: .*unknown config key"):
        check_search_space(spec)
    assert main(["tune", str(spec.path), "--n-trials", "1", "--runs-dir", str(tmp_path)]) == 2


def test_export_writes_a_spec_that_trains_the_best_trial(tmp_path, tiny_spec):
    spec = load_spec(tune_spec(tiny_spec))
    study = optuna.create_study(storage=f"sqlite:///{tmp_path / 'o.db'}", study_name="s", direction="minimize")
    dists = {"model.peak_lr": optuna.distributions.FloatDistribution(1e-4, 1e-2, log=True),
             "model.d_model": optuna.distributions.CategoricalDistribution([16, 32])}
    for value, lr in ((5.0, 0.002), (4.0, 0.0005), (6.0, 0.009)):
        study.add_trial(optuna.trial.create_trial(params={"model.peak_lr": lr, "model.d_model": 16},
                                                  distributions=dists, value=value))
    export_best(spec, study, tmp_path / "best.yaml")
    best = load_spec(tmp_path / "best.yaml")
    assert best.name == "tuned-best" and best.seeds == spec.seeds and best.tune is None
    runs = experiment_runs(best)
    expected = trial_config(spec, {"model.peak_lr": 0.0005, "model.d_model": 16})
    assert [r.run_id for r in runs] == [run_id(expected, seed) for seed in spec.seeds]
    assert runs[0].config["model"]["peak_lr"] == 0.0005 and runs[0].config["model"]["d_model"] == 16


def trial_folders(root: Path) -> list[Path]:
    return sorted((root / "tuned" / "trials").glob("tg-*"))


def test_sqlite_study_survives_a_killed_worker(tmp_path, tiny_spec):
    """kill -9 the worker mid-trial; the next worker fails the stale trial, retries it with the same
    parameters (resuming its run folder from last.ckpt) and the study ends with exactly N finished trials."""
    spec = tune_spec(tiny_spec, steps=16, pruner="none", heartbeat_s=1, sampler_seed=3)
    root = tmp_path / "runs"
    argv = [sys.executable, "-m", "experiments.cli", "tune", str(spec), "--n-trials", "2", "--runs-dir", str(root)]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    worker = subprocess.Popen(argv, cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 300
    while not any((f / "checkpoints" / "last.ckpt").exists() for f in trial_folders(root)):
        assert worker.poll() is None and time.monotonic() < deadline, "the first trial did not checkpoint"
        time.sleep(0.1)
    os.kill(worker.pid, signal.SIGKILL)
    worker.wait()
    [killed] = trial_folders(root)
    assert not (killed / "DONE").exists()

    done = subprocess.run(argv + ["--export", str(tmp_path / "best.yaml")], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    study = optuna.load_study(study_name="tuned", storage=f"sqlite:///{root / 'tuned' / 'tune' / 'optuna.db'}")
    states = [t.state for t in study.trials]
    assert states.count(optuna.trial.TrialState.COMPLETE) == 2
    assert states.count(optuna.trial.TrialState.FAIL) == 1  # the killed trial, failed by its stale heartbeat
    failed = next(t for t in study.trials if t.state == optuna.trial.TrialState.FAIL)
    retry = next(t for t in study.trials if t.system_attrs.get("failed_trial") == failed.number)
    assert retry.params == failed.params and retry.user_attrs["run_dir"] == str(killed.resolve())
    assert (killed / "DONE").exists()
    assert (killed / "csv" / "version_1").is_dir()  # resumed from last.ckpt, not restarted
    assert (tmp_path / "best.yaml").exists()


def run_tune(*args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    return subprocess.run([sys.executable, "-m", "experiments.cli", "tune", *args], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=timeout)


def test_no_completed_trial_is_an_error_with_one_line_per_trial(tmp_path):
    from tests.experiments.conftest import write_tiny_spec

    missing = tmp_path / "no-such-treebank.mrg"
    spec = write_tiny_spec(tmp_path / "tuned.yaml", missing, seeds="0",
                           tune={"params": SPACE, "pruner": "none", "sampler_seed": 0})
    done = run_tune(str(spec), "--n-trials", "2", "--runs-dir", str(tmp_path / "runs"))
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert "Traceback" not in done.stderr and len(lines) == 3, done.stderr
    assert lines[0].startswith("synbench: trial 0 failed: ") and str(missing) in lines[0]
    assert lines[1].startswith("synbench: trial 1 failed: ")
    assert lines[2] == ("synbench: error: no trial of study 'tuned' completed (2 fail); each trial's reason is "
                        f"in its FAILED file under {tmp_path / 'runs' / 'tuned' / 'trials'}")
    assert json_of(done.stdout)["best"] is None


def json_of(text: str) -> dict:
    import json

    return json.loads(text)


def test_the_median_pruner_stops_a_worse_trial_at_a_validation_step(tmp_path, tiny_spec):
    """Two trials queued in a real SQLite study: a learning one completes, then one that cannot learn
    (peak lr 1e-9) reports a worse val/loss at step 4 than the median of the completed trials and is pruned
    there; its run folder says so and the study's best is the first trial."""
    spec = tiny_spec(name="tuned", steps=16, seeds="0",
                     tune={"params": {"model.peak_lr": {"type": "float", "low": 1.0e-9, "high": 1.0e-2,
                                                         "log": True}},
                           "pruner": {"n_startup_trials": 1, "n_warmup_steps": 0}, "sampler_seed": 0})
    storage = f"sqlite:///{tmp_path / 'study.db'}"
    study = optuna.create_study(storage=storage, study_name="tuned", direction="minimize")
    study.enqueue_trial({"model.peak_lr": 3.0e-3})
    study.enqueue_trial({"model.peak_lr": 1.0e-9})
    done = run_tune(str(spec), "--n-trials", "2", "--storage", storage, "--runs-dir", str(tmp_path / "runs"))
    assert done.returncode == 0, done.stderr[-3000:]
    trials = optuna.load_study(study_name="tuned", storage=storage).trials
    assert [t.state for t in trials] == [optuna.trial.TrialState.COMPLETE, optuna.trial.TrialState.PRUNED]
    assert list(trials[1].intermediate_values) == [8]  # reported once, at the first validation (step 8)
    assert trials[1].intermediate_values[8] > trials[0].intermediate_values[8]
    pruned = Path(trials[1].user_attrs["run_dir"])
    assert (pruned / "FAILED").read_text().startswith("pruned by Optuna (trial 1) at step 8")
    assert not (pruned / "DONE").exists()
    assert json_of(done.stdout)["best"]["number"] == 0


def test_two_workers_share_a_journal_storage(tmp_path, tiny_spec):
    spec = tune_spec(tiny_spec, pruner="none", sampler_seed=1)
    journal = tmp_path / "study.journal"
    done = run_tune(str(spec), "--n-trials", "4", "--workers", "2", "--storage", f"journal:{journal}",
                    "--runs-dir", str(tmp_path / "runs"))
    assert done.returncode == 0, done.stderr[-3000:]
    from experiments.tune import open_storage

    trials = optuna.load_study(study_name="tuned", storage=open_storage(f"journal:{journal}", None)).trials
    assert [t.state for t in trials].count(optuna.trial.TrialState.COMPLETE) == 4
    assert len({t.user_attrs["worker"] for t in trials}) == 2  # both workers ran trials
    assert len({t.user_attrs["run_id"] for t in trials}) == 4 and all(
        Path(t.user_attrs["run_dir"], "DONE").exists() for t in trials)


def _claim_waiters(storage: str, claim_file: Path | None) -> int:
    """How many processes wait for the study's claim: blocked flock entries (``->``) on the claim file's
    inode in /proc/locks, or advisory locks PostgreSQL has not granted."""
    if claim_file is not None:
        inode = f":{claim_file.stat().st_ino} "
        return sum("->" in line and inode in line for line in Path("/proc/locks").read_text().splitlines())
    import sqlalchemy

    with sqlalchemy.create_engine(storage, poolclass=sqlalchemy.pool.NullPool).connect() as c:
        return c.execute(sqlalchemy.text(
            "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted")).scalar()


@pytest.mark.parametrize("backend", ["sqlite", "journal", pytest.param("postgres", marks=pytest.mark.postgres)])
def test_a_worker_counts_the_budget_only_under_the_claim(backend, request, tmp_path, tiny_spec):
    """The race two workers ran into (both counted 2 of 3 finished trials, both started the third): while a
    worker holds the study's claim, having counted and about to start the last trial, another worker waits
    for the claim before it counts; once that trial exists and the claim is released, it finds the budget
    spent and returns without training."""
    from experiments.tune import ClaimLock, create_study, open_storage

    spec = tiny_spec(name="tuned", seeds="0", tune={"params": SPACE, "pruner": "none", "sampler_seed": 0})
    tune = load_spec(spec).tune
    storage = {"sqlite": f"sqlite:///{tmp_path / 'study.db'}", "journal": f"journal:{tmp_path / 'study.journal'}",
               "postgres": request.getfixturevalue("postgres_url") if backend == "postgres" else ""}[backend]
    name = f"claim-{os.getpid()}-{time.monotonic_ns()}"
    study = create_study(open_storage(storage, tune), name, tune)
    claim = ClaimLock(storage, name)
    claim.acquire()
    claim_file = {"sqlite": tmp_path / "study.db.claim", "journal": tmp_path / "study.journal.claim"}.get(backend)
    worker = subprocess.Popen([sys.executable, "-m", "experiments.tune", str(spec), "--storage", storage,
                               "--study", name, "--n-trials", "1", "--runs-dir", str(tmp_path / "runs")],
                              cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        while _claim_waiters(storage, claim_file) == 0:
            assert worker.poll() is None, worker.communicate()
            assert time.monotonic() < deadline, "the worker never waited for the claim"
            time.sleep(0.2)
        assert study.trials == []  # it waits without having started a trial
        study.tell(study.ask(), 1.0)  # the last trial of the budget, started and finished under the claim
        claim.release()
        out, err = worker.communicate(timeout=120)
        assert worker.returncode == 0, err[-3000:]
        assert len(study.trials) == 1 and not (tmp_path / "runs" / "tuned" / "trials").exists()
    finally:
        claim.release()
        worker.kill()
        if backend == "postgres":
            optuna.delete_study(study_name=name, storage=storage)
