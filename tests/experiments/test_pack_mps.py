"""Packed runs under the array task's own MPS daemon (``launcher.slurm.mps``, ``synbench submit --mps``,
``slurm/with-mps.sh``): rendering, the daemon's life on the real cluster (started before the runs in per-task
folders, stopped and removed after success, a failed run and a SIGUSR1 requeue), and runs equal to solo runs.

MPS needs an NVIDIA GPU and driver, which this machine has not: the tests put a stand-in
``nvidia-cuda-mps-control`` on PATH that does what the script relies on (``-d`` needs the pipe and log folders
and opens a ``control`` entry in the pipe folder; ``quit`` on stdin needs that entry and closes it) and records
every call with its time and MPS folders."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from experiments.experiment_runs import experiment_runs, folder_of
from experiments.experiment_spec import load_spec
from experiments.launchers import slurm
from experiments.launchers.pack import child_environment
from experiments.runs import DONE, read_queued, run_status
from lightning_modules.errors import InputError
from tests.experiments.test_slurm_launcher import HOSTILE, PROTOCOL_TASK, make_tasks, states, wait_for

REPO = Path(__file__).resolve().parents[2]
STAND_IN = r"""#!/bin/bash
# Stand-in for NVIDIA's nvidia-cuda-mps-control (the real one needs an NVIDIA GPU): records each call.
calls="$(dirname "$0")/calls.log"
if [ "${1:-}" = -d ]; then
  [ -d "$CUDA_MPS_PIPE_DIRECTORY" ] && [ -d "$CUDA_MPS_LOG_DIRECTORY" ] || { echo "no MPS folders" >&2; exit 1; }
  : > "$CUDA_MPS_PIPE_DIRECTORY/control"
  echo "start $(date +%s.%N) $CUDA_MPS_PIPE_DIRECTORY $CUDA_MPS_LOG_DIRECTORY" >> "$calls"
else
  read -r command
  [ -e "$CUDA_MPS_PIPE_DIRECTORY/control" ] || { echo "cannot connect to the MPS daemon" >&2; exit 1; }
  rm "$CUDA_MPS_PIPE_DIRECTORY/control"
  echo "$command $(date +%s.%N) $CUDA_MPS_PIPE_DIRECTORY $CUDA_MPS_LOG_DIRECTORY" >> "$calls"
fi
"""


@pytest.fixture
def task_script(tmp_path) -> Path:
    path = tmp_path / "protocol_task.py"
    path.write_text(PROTOCOL_TASK)
    return path


@pytest.fixture
def node_tmp(tmp_path, monkeypatch) -> Path:
    """The stand-in MPS control program first on PATH, and the node's TMPDIR (jobs inherit both from sbatch's
    environment); returns TMPDIR, whose ``../mps-bin/calls.log`` lists the stand-in's calls."""
    bin_dir = tmp_path / "mps-bin"
    bin_dir.mkdir()
    (bin_dir / "nvidia-cuda-mps-control").write_text(STAND_IN)
    (bin_dir / "nvidia-cuda-mps-control").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    tmp = tmp_path / "node-tmp"
    tmp.mkdir()
    monkeypatch.setenv("TMPDIR", str(tmp))
    return tmp


def calls(node_tmp: Path) -> list[tuple[str, float, str, str]]:
    """(command, time, pipe folder, log folder) of each call of the stand-in, in order."""
    log = node_tmp.parent / "mps-bin" / "calls.log"
    rows = [line.split() for line in log.read_text().splitlines()] if log.exists() else []
    return [(c, float(t), pipe, logs) for c, t, pipe, logs in rows]


def mps_folders(node_tmp: Path) -> list[Path]:
    """The MPS folders left in the node's TMPDIR (torch keeps its own caches there too)."""
    return sorted(node_tmp.glob("synbench-mps-*"))


def without_mps_tools() -> str:
    """PATH without any folder holding nvidia-cuda-mps-control."""
    return os.pathsep.join(d for d in os.environ["PATH"].split(os.pathsep)
                           if not (Path(d) / "nvidia-cuda-mps-control").exists())


# --- no cluster ---


def test_mps_runs_the_packer_under_the_wrapper_every_value_quoted(tmp_path):
    wrapper = tmp_path / HOSTILE.format(sentinel=tmp_path / "pwned").replace("/", "_") / "with-mps.sh"
    text = slurm.render_array_script("mps", 4, tmp_path / "m.jsonl", tmp_path, slurm.SlurmOptions(
        runs_per_gpu=2, mps=True), tmp_path, python="/usr/bin/python3", with_mps=wrapper)
    assert subprocess.run(["bash", "-n"], input=text, text=True).returncode == 0
    exec_line = text.strip().splitlines()[-1]
    words = subprocess.run(["bash", "-c", 'f() { printf "%s\\0" "$@"; }; ' + exec_line.replace("exec ", "f ", 1)],
                           capture_output=True, text=True, env={"SLURM_ARRAY_TASK_ID": "1"}).stdout.split("\0")
    assert words[:7] == ["bash", str(wrapper), "/usr/bin/python3", "-m", "experiments.launchers.pack",
                         str(tmp_path / "m.jsonl"), "1"]
    assert not (tmp_path / "pwned").exists()
    plain = slurm.render_array_script("mps", 4, tmp_path / "m.jsonl", tmp_path, slurm.SlurmOptions(runs_per_gpu=2),
                                      tmp_path, python="/usr/bin/python3")
    assert plain.strip().splitlines()[-1].startswith("exec /usr/bin/python3 -m")  # off by default: no wrapper


def test_mps_setting_is_checked(tmp_path, tiny_spec):
    assert slurm.SlurmOptions.from_mapping({"mps": True}).mps and not slurm.SlurmOptions().mps
    with pytest.raises(InputError, match="launcher.slurm.mps: expected true or false"):
        slurm.SlurmOptions.from_mapping({"mps": "yes"})
    from experiments.launchers.submitit_launcher import submit_submitit

    with pytest.raises(InputError, match="launcher.slurm.mps: the MPS daemon is started by the sbatch script"):
        submit_submitit([], "x", tmp_path, slurm.SlurmOptions(mps=True))
    done = subprocess.run([sys.executable, "-m", "experiments.cli", "submit", str(tiny_spec()), "--mps",
                           "--runs-dir", str(tmp_path / "runs")], cwd=REPO, capture_output=True, text=True)
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and "--mps" in done.stderr


def test_under_mps_a_run_names_its_gpu_by_index():
    """MPS clients count the devices the daemon sees: SLURM's GPUs 4,5 are the daemon's 0,1."""
    env = {"SLURM_CPUS_PER_TASK": "4", "CUDA_VISIBLE_DEVICES": "4,5"}
    assert child_environment(3, 4, env)["CUDA_VISIBLE_DEVICES"] == "5"
    assert child_environment(3, 4, {**env, "CUDA_MPS_PIPE_DIRECTORY": "/x"})["CUDA_VISIBLE_DEVICES"] == "1"


def test_without_mps_tools_the_wrapper_stops_at_once_with_one_line(tmp_path):
    done = subprocess.run(["bash", str(REPO / "slurm" / "with-mps.sh"), "touch", str(tmp_path / "ran")],
                          capture_output=True, text=True, env={"PATH": without_mps_tools(),
                                                               "TMPDIR": str(tmp_path)}, timeout=30)
    assert done.returncode == 2 and done.stderr.count("\n") == 1
    assert done.stderr.startswith("synbench: error: launcher.slurm.mps: nvidia-cuda-mps-control is not on PATH")
    assert not (tmp_path / "ran").exists() and list(tmp_path.iterdir()) == []


def test_wrapper_passes_sigusr1_on_and_cleans_up(tmp_path, node_tmp):
    """Outside SLURM: the packed runs get the signal through the wrapper, save and stop; the daemon is stopped,
    its folder removed, and the packer's status (nothing to requeue here) is the wrapper's."""
    from experiments.launchers.manifest import write_manifest

    script = tmp_path / "protocol_task.py"
    script.write_text(PROTOCOL_TASK)
    tasks = make_tasks(tmp_path / "runs", script, ["gate", "gate"])
    write_manifest(tmp_path / "m.jsonl", tasks)
    env = {**os.environ, "SLURM_CPUS_PER_TASK": "2"}
    env.pop("SLURM_JOB_ID", None)
    wrapper = subprocess.Popen(["bash", str(REPO / "slurm" / "with-mps.sh"), sys.executable, "-m",
                                "experiments.launchers.pack", str(tmp_path / "m.jsonl"), "0", "2"],
                               cwd=REPO, env=env, stdout=subprocess.PIPE, text=True)
    wait_for(lambda: all((Path(t.run_dir) / "HEARTBEAT").exists() for t in tasks), 30, "two heartbeats")
    wrapper.send_signal(signal.SIGUSR1)
    out, _ = wrapper.communicate(timeout=120)  # the packer imports Lightning to requeue: slow on a loaded machine
    assert wrapper.returncode == 128 + signal.SIGUSR1, out
    assert "SIGUSR1: 2 run(s) saved; not requeued" in out and "MPS control daemon started" in out
    [start, stop] = calls(node_tmp)
    assert (start[0], stop[0], start[2:]) == ("start", "quit", stop[2:])
    assert Path(start[2]).parent == node_tmp / f"synbench-mps-local{wrapper.pid}-0"
    assert mps_folders(node_tmp) == []


# --- the real cluster ---


def _check_task_daemons(node_tmp: Path, job: str, n_tasks: int) -> list[tuple[str, float, str, str]]:
    """Each task started one daemon in its own folder and stopped it; every folder is gone."""
    rows = calls(node_tmp)
    assert sorted(r[0] for r in rows) == ["quit"] * n_tasks + ["start"] * n_tasks
    folders = {r[2] for r in rows}
    assert folders == {str(node_tmp / f"synbench-mps-{job}-{i}" / "pipe") for i in range(n_tasks)}
    for folder in folders:
        start, stop = [r for r in rows if r[2] == folder]
        assert start[0] == "start" and stop[0] == "quit" and start[3] == str(Path(folder).parent / "log")
    assert mps_folders(node_tmp) == []
    return rows


@pytest.mark.slurm
def test_each_task_runs_its_packed_runs_under_its_own_daemon(slurm_cluster, tmp_path, task_script, node_tmp):
    exp = tmp_path / "exp"
    tasks = make_tasks(exp / "runs", task_script, ["quick"] * 4)
    job = slurm.submit_array(tasks, "mps", exp, slurm.SlurmOptions(time="00:05:00", mem="500M", runs_per_gpu=2,
                                                                    mps=True, max_parallel=2), workdir=REPO)
    wait_for(lambda: states(tasks) == ["DONE"] * 4, 120, "all DONE")
    wait_for(lambda: len(calls(node_tmp)) == 4 and not mps_folders(node_tmp), 30, "both daemons stopped")
    rows = _check_task_daemons(node_tmp, job, 2)
    metrics = [run_status(Path(t.run_dir)).metrics for t in tasks]
    by_folder = {r[2]: r for r in rows if r[0] == "start"}
    for t, m in zip(tasks, metrics):
        # the run saw its task's folders, and the daemon up in them (started before the runs) ...
        assert m["mps_pipe"] in by_folder and m["mps_log"] == str(Path(m["mps_pipe"]).parent / "log")
        assert m["mps_pipe_files"] == ["control"]
        # ... which was stopped after the run ended
        quit_time = next(r[1] for r in rows if r[0] == "quit" and r[2] == m["mps_pipe"])
        assert (Path(t.run_dir) / DONE).stat().st_mtime <= quit_time
    assert [m["task"] for m in metrics] == [0, 0, 1, 1]
    assert metrics[0]["mps_pipe"] == metrics[1]["mps_pipe"] != metrics[2]["mps_pipe"] == metrics[3]["mps_pipe"]


@pytest.mark.slurm
def test_a_failed_run_still_stops_the_daemon(slurm_cluster, tmp_path, task_script, node_tmp):
    exp = tmp_path / "exp"
    tasks = make_tasks(exp / "runs", task_script, ["fail", "quick"])
    job = slurm.submit_array(tasks, "mpsfail", exp, slurm.SlurmOptions(time="00:05:00", mem="500M",
                                                                        runs_per_gpu=2, mps=True), workdir=REPO)
    wait_for(lambda: slurm.job_states([f"{job}_0"], poll_s=0).get(f"{job}_0") == "FAILED", 60, "task FAILED")
    wait_for(lambda: len(calls(node_tmp)) == 2, 30, "the daemon stopped")
    _check_task_daemons(node_tmp, job, 1)
    assert run_status(Path(tasks[1].run_dir)).state == "DONE"


@pytest.mark.slurm
def test_without_mps_tools_the_task_fails_at_once(slurm_cluster, tmp_path, task_script, monkeypatch):
    monkeypatch.setenv("PATH", without_mps_tools())
    exp = tmp_path / "exp"
    tasks = make_tasks(exp / "runs", task_script, ["quick"])
    job = slurm.submit_array(tasks, "nomps", exp, slurm.SlurmOptions(time="00:05:00", mem="500M", mps=True),
                             workdir=REPO)
    wait_for(lambda: slurm.job_states([f"{job}_0"], poll_s=0).get(f"{job}_0") == "FAILED", 60, "task FAILED")
    log = (exp / "logs" / f"slurm-{job}_0.out").read_text().splitlines()
    errors = [line for line in log if line.startswith("synbench: error:")]
    assert len(errors) == 1 and "launcher.slurm.mps: nvidia-cuda-mps-control is not on PATH" in errors[0]
    assert not (Path(tasks[0].run_dir) / "HEARTBEAT").exists()


@pytest.mark.slurm
@pytest.mark.slow
def test_sigusr1_reaches_the_packer_through_the_daemon_wrapper(slurm_cluster, tmp_path, task_script, node_tmp):
    """The time-limit warning goes to the batch process, the wrapper: the packer still gets it, saves its runs
    and requeues the task once; each attempt starts and stops its daemon."""
    exp = tmp_path / "exp"
    tasks = make_tasks(exp / "runs", task_script, ["requeue", "requeue"])
    job = slurm.submit_array(tasks, "mpsreq", exp, slurm.SlurmOptions(time="00:05:00", mem="500M",
                                                                       runs_per_gpu=2, mps=True), workdir=REPO)
    task = f"{job}_0"
    wait_for(lambda: states(tasks) == ["RUNNING", "RUNNING"], 60, "both runs RUNNING")
    subprocess.run(["scancel", "--batch", "--signal=USR1", task], check=True)
    wait_for(lambda: states(tasks) == ["DONE", "DONE"], 120, "DONE after the restart")
    wait_for(lambda: len(calls(node_tmp)) == 4 and not mps_folders(node_tmp), 30, "the daemon stopped twice")
    assert [run_status(Path(t.run_dir)).metrics["restarts"] for t in tasks] == [1, 1]
    assert [r[0] for r in calls(node_tmp)] == ["start", "quit", "start", "quit"]
    assert len({r[2] for r in calls(node_tmp)}) == 1  # a requeued task keeps its job id, so its folder name
    log = (exp / "logs" / f"slurm-{task}.out").read_text()
    assert f"requeued SLURM job {task}" in log and "restart 1" in log and "restart 2" not in log


@pytest.mark.slurm
def test_runs_packed_under_mps_end_as_their_solo_runs(slurm_cluster, tmp_path, tiny_spec, node_tmp):
    """`synbench submit --runs-per-gpu 2 --mps`: two tiny TG seeds in one array task end with the metrics of
    the same runs trained one at a time by the local executor."""
    spec = tiny_spec(seeds="0-1", steps=4)
    runs = experiment_runs(load_spec(spec))
    done = subprocess.run([sys.executable, "-m", "experiments.cli", "submit", str(spec), "--executor", "slurm",
                           "--runs-per-gpu", "2", "--mps", "--runs-dir", str(tmp_path / "runs"), "--wait"],
                          cwd=REPO, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    assert [read_queued(folder_of(tmp_path / "runs", r)).job_id.split("_")[1] for r in runs] == ["0", "0"]
    wait_for(lambda: [c[0] for c in calls(node_tmp)] == ["start", "quit"], 30, "the daemon stopped")
    local = subprocess.run([sys.executable, "-m", "experiments.cli", "submit", str(spec), "--runs-dir",
                            str(tmp_path / "local")], cwd=REPO, capture_output=True, text=True, timeout=600)
    assert local.returncode == 0, local.stderr
    for run in runs:
        packed = run_status(folder_of(tmp_path / "runs", run)).metrics
        assert packed == run_status(folder_of(tmp_path / "local", run)).metrics and packed["global_step"] == 4
