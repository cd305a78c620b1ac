"""Local executor and the manifest runner: the same manifest tasks, run on this machine."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from experiments.experiment_spec import Run
from experiments.launchers import local
from experiments.launchers.manifest import Task, read_manifest, read_task, tasks_for_runs, write_manifest
from experiments.runs import read_queued, run_status
from lightning_modules.errors import InputError

REPO = Path(__file__).resolve().parents[2]
TASK = (
    "import json, os, sys; from experiments.runs import write_done; "
    "code = int(sys.argv[2]); code and sys.exit(code); "
    "write_done(sys.argv[1], {'omp': os.environ['OMP_NUM_THREADS'], 'pid': os.getpid(), "
    "'argv': sys.argv[3:]})"
)


def task(i: int, root: Path, code: int = 0, *extra: str) -> Task:
    run_dir = root / f"run-{i}"
    return Task(i, f"run-{i}", i, str(run_dir), (sys.executable, "-c", TASK, str(run_dir), str(code), *extra))


def test_manifest_round_trip_and_errors(tmp_path):
    tasks = [task(0, tmp_path, 0, "a b", "it's"), task(1, tmp_path)]
    write_manifest(tmp_path / "m.jsonl", tasks)
    assert read_manifest(tmp_path / "m.jsonl") == tasks
    assert read_task(tmp_path / "m.jsonl", 1) == tasks[1]
    with pytest.raises(InputError, match="has no task 2"):
        read_task(tmp_path / "m.jsonl", 2)
    (tmp_path / "bad.jsonl").write_text(
        json.dumps({"index": 0, "run_id": "r", "seed": 0, "run_dir": "d", "argv": []}) + "\n"
    )
    with pytest.raises(InputError, match="non-empty") as e:
        read_manifest(tmp_path / "bad.jsonl")
    assert e.value.location == f"{tmp_path / 'bad.jsonl'}:1"


def test_manifest_runner_execs_the_selected_line(tmp_path):
    tasks = [task(i, tmp_path, 0, f"line {i}") for i in range(3)]
    write_manifest(tmp_path / "m.jsonl", tasks)
    done = subprocess.run(
        [sys.executable, "-m", "experiments.launchers.manifest", str(tmp_path / "m.jsonl"), "1"],
        cwd=REPO,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    assert [run_status(Path(t.run_dir)).state for t in tasks] == ["PENDING", "DONE", "PENDING"]
    assert run_status(Path(tasks[1].run_dir)).metrics["argv"] == ["line 1"]
    bad = subprocess.run(
        [sys.executable, "-m", "experiments.launchers.manifest", str(tmp_path / "m.jsonl"), "7"],
        cwd=REPO,
        capture_output=True,
        text=True,
    )
    assert bad.returncode == 2 and "synbench: error:" in bad.stderr and "has no task 7" in bad.stderr


def test_run_local_runs_all_tasks_and_marks_failures(tmp_path):
    tasks = [task(0, tmp_path / "runs"), task(1, tmp_path / "runs", 3), task(2, tmp_path / "runs")]
    codes = local.run_local(tasks, tmp_path / "logs", max_parallel=2, workdir=REPO)
    assert codes == {"run-0": 0, "run-1": 3, "run-2": 0}
    statuses = [run_status(Path(t.run_dir)) for t in tasks]
    assert [s.state for s in statuses] == ["DONE", "FAILED", "DONE"]
    assert statuses[1].error.startswith("exit status 3 (log: ")
    assert statuses[0].metrics["omp"] == str(local.default_threads(2))
    assert (tmp_path / "logs" / "local-run-1.out").read_text().startswith("synbench: local task 1")
    job_id = read_queued(Path(tasks[0].run_dir)).job_id
    assert job_id == f"local-{os.getpid()}-0"
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    assert local.job_status([job_id, f"local-{dead.pid}-0", "12_3"]) == {
        job_id: "active",
        f"local-{dead.pid}-0": "ended",
    }


def test_tasks_for_runs_builds_the_train_command(tmp_path):
    run = Run("smoke", "tg-abc-s3", 3, "tg", "cpu-small", "tg", "ptb-sample", ("train.max_steps=20",), (), {})
    [t] = tasks_for_runs([run], tmp_path)
    assert t.run_dir == str((tmp_path / "smoke" / "tg-abc-s3").resolve())
    assert t.argv[1:] == (
        "-m",
        "experiments.cli",
        "train",
        "tg",
        "train.max_steps=20",
        "runtime.experiment=smoke",
        "--preset",
        "cpu-small",
        "--seed",
        "3",
        "--run-dir",
        t.run_dir,
    )
