"""SLURM executor against the real single-node cluster: arrays from manifests, states, requeue, quoting,
afterany aggregation, submitit. Rendering tests need no cluster."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from experiments.launchers import slurm
from experiments.launchers.manifest import Task, read_manifest
from experiments.runs import read_queued, run_status
from lightning_modules.errors import InputError

REPO = Path(__file__).resolve().parents[2]
HOSTILE = "a b'c\"d $(touch {sentinel}) `touch {sentinel}` ;&| %x"

# A training stand-in that follows the run-folder protocol: heartbeat while working, DONE written last.
# argv: RUN_DIR MODE [EXTRA...] (DONE records the task, restarts, threads, extra, pid and the MPS folders it
# was given and found); MODE "quick" finishes at once, "gate" waits for RUN_DIR/../GO, "requeue"
# works until it is requeued once, "fail" exits 1.
PROTOCOL_TASK = r"""
import json, os, sys, time
from pathlib import Path
from experiments.runs import write_done, write_heartbeat
run_dir, mode = Path(sys.argv[1]), sys.argv[2]
run_dir.mkdir(parents=True, exist_ok=True)
restarts = int(os.environ.get("SLURM_RESTART_COUNT", "0"))
write_heartbeat(run_dir, 0)
if mode == "fail":
    sys.exit(1)
step = 0
while (mode == "gate" and not (run_dir.parent / "GO").exists()) or (mode == "requeue" and restarts == 0):
    step += 1
    write_heartbeat(run_dir, step)
    time.sleep(0.2)
    if step > 600:
        sys.exit("gave up waiting")
mps_pipe = os.environ.get("CUDA_MPS_PIPE_DIRECTORY")
write_done(run_dir, {"task": int(os.environ.get("SLURM_ARRAY_TASK_ID", -1)), "restarts": restarts,
                     "omp": os.environ.get("OMP_NUM_THREADS"), "extra": sys.argv[3:], "pid": os.getpid(),
                     "mps_pipe": mps_pipe, "mps_log": os.environ.get("CUDA_MPS_LOG_DIRECTORY"),
                     "mps_pipe_files": sorted(os.listdir(mps_pipe)) if mps_pipe else None})
"""


@pytest.fixture
def task_script(tmp_path) -> Path:
    path = tmp_path / "protocol_task.py"
    path.write_text(PROTOCOL_TASK)
    return path


def make_tasks(
    root: Path, script: Path, modes: list[str], extra: list[list[str]] | None = None
) -> list[Task]:
    tasks = []
    for i, mode in enumerate(modes):
        run_dir = root / f"run-{i}"
        tasks.append(
            Task(
                i,
                f"run-{i}",
                i,
                str(run_dir),
                (sys.executable, str(script), str(run_dir), mode, *(extra[i] if extra else [])),
            )
        )
    return tasks


def wait_for(condition, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.2)
    pytest.fail(f"timed out after {timeout} s waiting for {what}")


def states(tasks: list[Task], stale_after_s: float = 10) -> list[str]:
    """What `synbench status` reports: the run folders read together with the scheduler's view."""
    ids = [read_queued(Path(t.run_dir)).job_id for t in tasks]
    jobs = slurm.job_status(ids, poll_s=0)
    return [run_status(Path(t.run_dir), jobs=jobs, stale_after_s=stale_after_s).state for t in tasks]


# --- rendering (no cluster) ---


def test_rendered_script_has_the_array_contract(tmp_path):
    options = slurm.SlurmOptions(
        partition="debug",
        time="00:10:00",
        cpus_per_task=2,
        mem="3G",
        gres="gpu:1",
        max_parallel=5,
        additional={"constraint": "v100"},
    )
    text = slurm.render_array_script(
        "smoke", 100, tmp_path / "m.jsonl", tmp_path / "logs", options, tmp_path, python="/usr/bin/python3"
    )
    for line in (
        "#SBATCH --array=0-99%5",
        "#SBATCH --signal=B:SIGUSR1@90",
        "#SBATCH --requeue",
        "#SBATCH --open-mode=append",
        "#SBATCH --job-name=synbench-smoke",
        "#SBATCH --ntasks=1",
        "#SBATCH --cpus-per-task=2",
        "#SBATCH --partition=debug",
        "#SBATCH --time=00:10:00",
        "#SBATCH --mem=3G",
        "#SBATCH --gres=gpu:1",
        "#SBATCH --constraint=v100",
        f"#SBATCH --output={tmp_path}/logs/slurm-%A_%a.out",
        'export SLURM_CPUS_PER_TASK="$CPUS" OMP_NUM_THREADS="$CPUS" MKL_NUM_THREADS="$CPUS"',
        f'exec /usr/bin/python3 -m experiments.launchers.pack {tmp_path}/m.jsonl "$SLURM_ARRAY_TASK_ID" 1',
    ):
        assert line in text.splitlines(), line
    assert "@" not in text.replace("@90", "")
    assert subprocess.run(["bash", "-n"], input=text, text=True).returncode == 0


def test_hostile_values_are_quoted_or_refused(tmp_path):
    sentinel = tmp_path / "pwned"
    hostile = HOSTILE.format(sentinel=sentinel)
    folder = tmp_path / hostile.replace("/", "_")
    options = slurm.SlurmOptions(
        partition=hostile, job_name=hostile, account=hostile, additional={"comment": hostile}
    )
    text = slurm.render_array_script(hostile, 2, folder / "m.jsonl", folder, options, folder, python=hostile)
    assert subprocess.run(["bash", "-n"], input=text, text=True).returncode == 0
    # a shell that parses the exec line sees exactly the hostile strings as words
    exec_line = text.strip().splitlines()[-1]
    words = subprocess.run(
        ["bash", "-c", 'f() { printf "%s\\0" "$@"; }; ' + exec_line.replace("exec ", "f ", 1)],
        capture_output=True,
        text=True,
        env={"SLURM_ARRAY_TASK_ID": "1"},
    ).stdout.split("\0")
    assert words[:6] == [hostile, "-m", "experiments.launchers.pack", str(folder.resolve() / "m.jsonl"), "1", "1"]
    assert not sentinel.exists()
    for bad in ("two\nlines", "back\\slash", "nul\0"):
        with pytest.raises(InputError, match="not allowed"):
            slurm.render_array_script(
                "x", 1, tmp_path / "m", tmp_path, slurm.SlurmOptions(job_name=bad), tmp_path
            )
        with pytest.raises(InputError, match="not allowed"):
            slurm.render_array_script(bad, 1, tmp_path / "m", tmp_path, slurm.SlurmOptions(), tmp_path)


def test_gpu_options_render_gres_and_per_gpu_resources(tmp_path):
    options = slurm.SlurmOptions.from_mapping(
        {"gpus": 2, "gpu_type": "h100", "cpus_per_gpu": 8, "mem_per_gpu": "64G", "runs_per_gpu": 3})
    text = slurm.render_array_script("gpu", 13, tmp_path / "m.jsonl", tmp_path / "logs", options, tmp_path,
                                     python="/usr/bin/python3")
    lines = text.splitlines()
    for line in ("#SBATCH --gres=gpu:h100:2", "#SBATCH --cpus-per-gpu=8", "#SBATCH --mem-per-gpu=64G",
                 "#SBATCH --array=0-2%32",  # 13 runs, 3 per GPU x 2 GPUs = 6 per task: 3 tasks
                 f'exec /usr/bin/python3 -m experiments.launchers.pack {tmp_path}/m.jsonl "$SLURM_ARRAY_TASK_ID" 6'):
        assert line in lines, line
    # SLURM refuses --cpus-per-task beside --cpus-per-gpu and --mem beside --mem-per-gpu
    assert not any(line.startswith(("#SBATCH --cpus-per-task", "#SBATCH --mem=")) for line in lines)
    assert subprocess.run(["bash", "-n"], input=text, text=True).returncode == 0
    plain = slurm.render_array_script("gpu", 4, tmp_path / "m.jsonl", tmp_path, slurm.SlurmOptions(gpus=1),
                                      tmp_path)
    assert "#SBATCH --gres=gpu:1" in plain.splitlines() and "#SBATCH --mem=2G" in plain.splitlines()
    # every value shell-quoted, as the other options
    hostile = slurm.SlurmOptions.from_mapping({"gpus": 1, "gpu_type": "a b;c", "mem_per_gpu": "$(x)"})
    text = slurm.render_array_script("gpu", 1, tmp_path / "m.jsonl", tmp_path, hostile, tmp_path)
    assert "#SBATCH --gres='gpu:a b;c:1'" in text and "#SBATCH --mem-per-gpu='$(x)'" in text


def test_the_cpus_of_a_gpu_task_reach_the_runs(tmp_path):
    """The script's thread count: --cpus-per-task, else --cpus-per-gpu times the task's GPUs."""
    text = slurm.render_array_script("gpu", 1, tmp_path / "m.jsonl", tmp_path, slurm.SlurmOptions(), tmp_path)
    [line] = [line for line in text.splitlines() if line.startswith("CPUS=")]
    for env, cpus in (({"SLURM_CPUS_PER_TASK": "3"}, "3"),
                      ({"SLURM_CPUS_PER_GPU": "8", "SLURM_GPUS_ON_NODE": "2"}, "16")):
        out = subprocess.run(["bash", "-c", line + '; echo "$CPUS"'], env=env, capture_output=True, text=True)
        assert out.stdout.strip() == cpus


def test_options_validation():
    assert slurm.SlurmOptions.from_mapping({"mem": 2000, "max_parallel": 3}).mem == "2000"
    for options, message in (
        ({"time": 600}, "quote it"),
        ({"cpus": 2}, "unknown option"),
        ({"max_parallel": 0}, "positive integer"),
        ({"additional": {"Bad Opt": 1}}, "option names"),
        ({"partition": True}, "expected a string"),
        ({"gpus": 0}, "positive integer"),
        ({"runs_per_gpu": 0}, "positive integer"),
        ({"gpus": 1, "gres": "gpu:1"}, "either gres or gpus"),
        ({"cpus_per_gpu": 4}, "needs launcher.slurm.gpus"),
    ):
        with pytest.raises(InputError, match=message):
            slurm.SlurmOptions.from_mapping(options, "exp.yaml:9")


def test_parse_squeue_and_sacct_lines():
    text = "12_3|RUNNING\n12_[4-6,9%2]|PENDING\n13|CANCELLED by 0\n14_0|COMPLETED\n"
    assert slurm._parse_states(text) == {
        "12_3": "RUNNING",
        "12_4": "PENDING",
        "12_5": "PENDING",
        "12_6": "PENDING",
        "12_9": "PENDING",
        "13": "CANCELLED",
        "14_0": "COMPLETED",
    }


# --- the real cluster ---


@pytest.mark.slurm
def test_four_task_array_states_and_manifest_selection(slurm_cluster, tmp_path, task_script):
    exp = tmp_path / "exp"
    extra = [[f"arg {i}", "$(x)"] for i in range(4)]
    tasks = make_tasks(exp / "runs", task_script, ["gate"] * 4, extra)
    job = slurm.submit_array(
        tasks, "four", exp, slurm.SlurmOptions(max_parallel=2, time="00:05:00", mem="500M"), workdir=REPO
    )
    assert [read_queued(Path(t.run_dir)).job_id for t in tasks] == [f"{job}_{i}" for i in range(4)]
    submission = next((exp / "submissions").iterdir())
    assert read_manifest(submission / "manifest.jsonl") == tasks
    assert (submission / "JOB_ID").read_text().strip() == job
    # %2 throttle: two tasks run (fresh heartbeats), two wait in the queue
    wait_for(lambda: sorted(states(tasks)) == ["PENDING", "PENDING", "RUNNING", "RUNNING"], 30, "2 running")
    (exp / "runs" / "GO").touch()
    wait_for(lambda: states(tasks) == ["DONE"] * 4, 60, "all DONE")
    for i, t in enumerate(tasks):
        metrics = run_status(Path(t.run_dir)).metrics
        assert metrics["task"] == i and metrics["extra"] == extra[i] and metrics["restarts"] == 0
        assert metrics["omp"] == "1"
        assert (exp / "logs" / f"slurm-{job}_{i}.out").read_text().startswith(f"synbench: job {job}_{i} ")
    # DONE is written just before each process exits: the scheduler catches up a moment later
    ids = [f"{job}_{i}" for i in range(4)]
    wait_for(lambda: slurm.job_states(ids) == dict.fromkeys(ids, "COMPLETED"), 30, "COMPLETED in SLURM")


@pytest.mark.slurm
def test_hostile_values_survive_a_real_submission(slurm_cluster, tmp_path, task_script):
    sentinel = tmp_path / "pwned"
    hostile = HOSTILE.format(sentinel=sentinel)
    exp = tmp_path / "it's a $(dir) %j"
    tasks = make_tasks(exp / "runs", task_script, ["quick"], [[hostile]])
    options = slurm.SlurmOptions(
        job_name=hostile, time="00:05:00", mem="500M", additional={"comment": hostile}
    )
    job = slurm.submit_array(tasks, "hostile", exp, options, workdir=REPO)
    wait_for(lambda: states(tasks) == ["DONE"], 60, "DONE")
    assert run_status(Path(tasks[0].run_dir)).metrics["extra"] == [hostile]
    shown = subprocess.run(["scontrol", "show", "job", f"{job}_0"], capture_output=True, text=True).stdout
    assert f"JobName={hostile}" in shown and f"Comment={hostile}" in shown
    assert (exp / "logs" / f"slurm-{job}_0.out").exists()
    assert not sentinel.exists()


@pytest.mark.slurm
def test_aggregation_runs_after_the_array_even_when_a_task_failed(slurm_cluster, tmp_path, task_script):
    exp = tmp_path / "exp"
    tasks = make_tasks(exp / "runs", task_script, ["quick", "fail", "quick"])
    options = slurm.SlurmOptions(time="00:05:00", mem="500M")
    job = slurm.submit_array(tasks, "agg", exp, options, workdir=REPO)
    summary = tmp_path / "summary.json"
    aggregate = [
        sys.executable,
        "-c",
        "import json, sys; from pathlib import Path; "
        "json.dump(sorted(p.parent.name for p in Path(sys.argv[1]).glob('*/DONE')), open(sys.argv[2], 'w'))",
        str(exp / "runs"),
        str(summary),
    ]
    agg_job = slurm.submit_after(aggregate, job, "agg", exp, options, workdir=REPO)
    wait_for(summary.exists, 60, "the aggregation job")
    assert json.loads(summary.read_text()) == ["run-0", "run-2"]
    assert states(tasks) == ["DONE", "FAILED", "DONE"]
    assert slurm.job_states([f"{job}_1"]) == {f"{job}_1": "FAILED"}
    shown = subprocess.run(["scontrol", "show", "job", agg_job], capture_output=True, text=True).stdout
    assert "Dependency=" in shown


@pytest.mark.slurm
@pytest.mark.slow
def test_requeued_task_restarts_and_finishes(slurm_cluster, tmp_path, task_script):
    exp = tmp_path / "exp"
    tasks = make_tasks(exp / "runs", task_script, ["requeue"])
    job = slurm.submit_array(
        tasks, "requeue", exp, slurm.SlurmOptions(time="00:05:00", mem="500M"), workdir=REPO
    )
    wait_for(lambda: states(tasks) == ["RUNNING"], 30, "RUNNING")
    subprocess.run(["scontrol", "requeue", f"{job}_0"], check=True)
    wait_for(
        lambda: slurm.job_states([f"{job}_0"], poll_s=0).get(f"{job}_0") == "PENDING", 15, "requeued PENDING"
    )
    time.sleep(2.5)  # let the heartbeat of the killed attempt go stale (for stale_after_s=1)
    assert states(tasks, stale_after_s=1) == ["PENDING"]  # the job waits in the queue again: not FAILED
    assert (
        run_status(Path(tasks[0].run_dir), stale_after_s=1).state == "FAILED"
    )  # without the scheduler's view
    wait_for(lambda: states(tasks) == ["DONE"], 90, "DONE after the restart")
    assert run_status(Path(tasks[0].run_dir)).metrics["restarts"] == 1
    log = (exp / "logs" / f"slurm-{job}_0.out").read_text()  # --open-mode=append keeps both attempts
    assert "restart 0" in log and "restart 1" in log


@pytest.mark.slurm
def test_submitit_executor_runs_the_same_tasks(slurm_cluster, tmp_path, task_script):
    from experiments.launchers.submitit_launcher import submit_submitit

    exp = tmp_path / "exp"
    tasks = make_tasks(exp / "runs", task_script, ["quick", "quick"])
    jobs = submit_submitit(tasks, "sub", exp, slurm.SlurmOptions(time="00:05:00", mem="500M"), workdir=REPO)
    assert [job.result() for job in jobs] == [0, 0]
    assert [run_status(Path(t.run_dir)).metrics["task"] for t in tasks] == [0, 1]
    assert [read_queued(Path(t.run_dir)).executor for t in tasks] == ["submitit", "submitit"]
    assert read_queued(Path(tasks[1].run_dir)).job_id == jobs[1].job_id
    failing = make_tasks(exp / "bad", task_script, ["fail"])
    [job] = submit_submitit(
        failing, "sub", exp, slurm.SlurmOptions(time="00:05:00", mem="500M"), workdir=REPO
    )
    with pytest.raises(Exception, match="exited with status 1"):
        job.result()
