"""Several runs packed in one array task (``experiments.launchers.pack``): which manifest lines a task runs,
each run's share of the task, signals (save, stop, requeue once), and the real cluster."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from experiments.experiment_runs import experiment_runs, folder_of
from experiments.experiment_spec import load_spec
from experiments.launchers import slurm
from experiments.launchers.manifest import write_manifest
from experiments.launchers.pack import child_environment, packed_tasks
from experiments.runs import read_queued, run_status
from lightning_modules.errors import InputError
from tests.experiments.test_slurm_launcher import PROTOCOL_TASK, make_tasks, states, wait_for

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def task_script(tmp_path) -> Path:
    path = tmp_path / "protocol_task.py"
    path.write_text(PROTOCOL_TASK)
    return path


def test_task_i_runs_lines_i_k_to_i_k_plus_k_minus_1(tmp_path, task_script):
    manifest = tmp_path / "m.jsonl"
    write_manifest(manifest, make_tasks(tmp_path / "runs", task_script, ["quick"] * 5))
    assert [[t.index for t in packed_tasks(manifest, i, 2)] for i in range(3)] == [[0, 1], [2, 3], [4]]
    with pytest.raises(InputError, match="no task 6"):
        packed_tasks(manifest, 3, 2)


def test_runs_share_the_cpus_and_take_one_gpu_each():
    env = child_environment(3, 4, {"SLURM_CPUS_PER_TASK": "16", "CUDA_VISIBLE_DEVICES": "4,5"})
    assert (env["SLURM_CPUS_PER_TASK"], env["OMP_NUM_THREADS"], env["CUDA_VISIBLE_DEVICES"]) == ("4", "4", "5")
    assert child_environment(0, 4, {"SLURM_CPUS_PER_TASK": "2"})["OMP_NUM_THREADS"] == "1"
    assert "CUDA_VISIBLE_DEVICES" not in child_environment(0, 2, {"SLURM_CPUS_PER_TASK": "2"})


def _pack(manifest: Path, task: int, k: int, **kwargs) -> subprocess.Popen:
    env = {**os.environ, "SLURM_CPUS_PER_TASK": "2"}
    env.pop("SLURM_JOB_ID", None)
    return subprocess.Popen([sys.executable, "-m", "experiments.launchers.pack", str(manifest), str(task), str(k)],
                            cwd=REPO, env=env, **kwargs)


def test_packed_runs_run_side_by_side_each_in_its_folder(tmp_path, task_script):
    manifest = tmp_path / "m.jsonl"
    tasks = make_tasks(tmp_path / "runs", task_script, ["gate", "gate", "quick"])
    write_manifest(manifest, tasks)
    first = _pack(manifest, 0, 2)
    # both runs of task 0 work at once (each heartbeats in its own folder) until the gate opens; the last
    # task holds one run, which gets both CPUs
    wait_for(lambda: all((Path(t.run_dir) / "HEARTBEAT").exists() for t in tasks[:2]), 30, "two heartbeats")
    (tmp_path / "runs" / "GO").touch()
    assert first.wait(60) == 0
    assert _pack(manifest, 1, 2).wait(60) == 0
    metrics = [run_status(Path(t.run_dir)).metrics for t in tasks]
    assert [m["omp"] for m in metrics] == ["1", "1", "2"] and len({m["pid"] for m in metrics}) == 3


def test_a_failing_run_fails_the_task_not_its_neighbour(tmp_path, task_script):
    manifest = tmp_path / "m.jsonl"
    tasks = make_tasks(tmp_path / "runs", task_script, ["fail", "quick"])
    write_manifest(manifest, tasks)
    assert _pack(manifest, 0, 2).wait(60) == 1
    assert run_status(Path(tasks[1].run_dir)).state == "DONE"


def test_sigusr1_stops_every_run_and_requeues_once(tmp_path, task_script):
    """Outside SLURM there is nothing to requeue: the runs are stopped and the task says so."""
    manifest = tmp_path / "m.jsonl"
    tasks = make_tasks(tmp_path / "runs", task_script, ["gate", "gate"])
    write_manifest(manifest, tasks)
    pack = _pack(manifest, 0, 2, stdout=subprocess.PIPE, text=True)
    wait_for(lambda: all((Path(t.run_dir) / "HEARTBEAT").exists() for t in tasks), 30, "two heartbeats")
    start = time.monotonic()
    pack.send_signal(signal.SIGUSR1)
    out, _ = pack.communicate(timeout=30)
    assert pack.returncode == 128 + signal.SIGUSR1 and time.monotonic() - start < 20
    assert "SIGUSR1: 2 run(s) saved; not requeued" in out
    assert not any((Path(t.run_dir) / "DONE").exists() for t in tasks)


# --- the real cluster ---


@pytest.mark.slurm
def test_five_runs_two_per_task_on_the_cluster(slurm_cluster, tmp_path, task_script):
    exp = tmp_path / "exp"
    tasks = make_tasks(exp / "runs", task_script, ["gate"] * 5)
    job = slurm.submit_array(tasks, "packed", exp, slurm.SlurmOptions(time="00:05:00", mem="500M",
                                                                       runs_per_gpu=2), workdir=REPO)
    assert [read_queued(Path(t.run_dir)).job_id for t in tasks] == [f"{job}_{i // 2}" for i in range(5)]
    wait_for(lambda: "RUNNING" in states(tasks), 60, "a task running")
    (exp / "runs" / "GO").touch()
    wait_for(lambda: states(tasks) == ["DONE"] * 5, 120, "all DONE")
    metrics = [run_status(Path(t.run_dir)).metrics for t in tasks]
    assert [m["task"] for m in metrics] == [0, 0, 1, 1, 2]
    assert len({m["pid"] for m in metrics}) == 5
    log = (exp / "logs" / f"slurm-{job}_0.out").read_text()
    assert "pack slot 0: run run-0" in log and "pack slot 1: run run-1" in log


@pytest.mark.slurm
@pytest.mark.slow
def test_a_packed_task_requeues_itself_once_on_sigusr1(slurm_cluster, tmp_path, task_script):
    exp = tmp_path / "exp"
    tasks = make_tasks(exp / "runs", task_script, ["requeue", "requeue"])
    job = slurm.submit_array(tasks, "packreq", exp, slurm.SlurmOptions(time="00:05:00", mem="500M",
                                                                        runs_per_gpu=2), workdir=REPO)
    task = f"{job}_0"
    wait_for(lambda: states(tasks) == ["RUNNING", "RUNNING"], 60, "both runs RUNNING")
    subprocess.run(["scancel", "--batch", "--signal=USR1", task], check=True)
    wait_for(lambda: states(tasks) == ["DONE", "DONE"], 120, "DONE after the restart")
    assert [run_status(Path(t.run_dir)).metrics["restarts"] for t in tasks] == [1, 1]
    log = (exp / "logs" / f"slurm-{task}.out").read_text()
    assert f"requeued SLURM job {task}" in log and "restart 1" in log and "restart 2" not in log


@pytest.mark.slurm
def test_submit_runs_per_gpu_trains_the_runs_of_an_unpacked_submission(slurm_cluster, tmp_path, tiny_spec):
    """`synbench submit --runs-per-gpu 2`: three tiny TG seeds in two array tasks end with the metrics of the
    same runs trained by the local executor."""
    spec = tiny_spec(seeds="0-2", steps=4)
    root = tmp_path / "runs"
    runs = experiment_runs(load_spec(spec))
    done = subprocess.run([sys.executable, "-m", "experiments.cli", "submit", str(spec), "--executor", "slurm",
                           "--runs-per-gpu", "2", "--runs-dir", str(root), "--wait"], cwd=REPO,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    job = read_queued(folder_of(root, runs[0])).job_id.split("_")[0]
    assert [read_queued(folder_of(root, r)).job_id for r in runs] == [f"{job}_0", f"{job}_0", f"{job}_1"]
    local = subprocess.run([sys.executable, "-m", "experiments.cli", "submit", str(spec), "--runs-dir",
                            str(tmp_path / "local")], cwd=REPO, capture_output=True, text=True, timeout=600)
    assert local.returncode == 0, local.stderr
    for run in runs:
        assert run_status(folder_of(root, run)).metrics == run_status(folder_of(tmp_path / "local", run)).metrics


def test_runs_per_gpu_is_for_the_slurm_executor(tmp_path, tiny_spec):
    done = subprocess.run([sys.executable, "-m", "experiments.cli", "submit", str(tiny_spec()), "--runs-per-gpu",
                           "2", "--runs-dir", str(tmp_path / "runs")], cwd=REPO, capture_output=True, text=True)
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and "--runs-per-gpu" in done.stderr
    dry = subprocess.run([sys.executable, "-m", "experiments.cli", "submit", str(tiny_spec()), "--executor",
                          "slurm", "--runs-per-gpu", "3", "--dry-run", "--runs-dir", str(tmp_path / "runs")], cwd=REPO,
                         capture_output=True, text=True)
    assert dry.returncode == 0 and "#SBATCH --array=0-1%2" in dry.stdout  # 4 runs, 3 per task
    assert not (tmp_path / "runs").exists()  # neither wrote anything
