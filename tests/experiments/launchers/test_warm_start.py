"""Warm start: ``synbench`` tasks forked from the fork server behave as the subprocesses they replace (their own
environment, folder, log, exit status and threads), and anything else still runs as a subprocess."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from experiments.launchers import local, warm_start
from experiments.launchers.manifest import Task
from experiments.runs import run_status

CLI = (sys.executable, "-m", "experiments.cli")


def test_a_cli_task_is_forked_with_its_own_environment_folder_and_log(tmp_path):
    (tmp_path / "one.mrg").write_text("(S (NP (DT The) (NN dog)) (VP (VBZ barks)))\n")
    env = {**os.environ, "SYNBENCH_DATA": str(tmp_path / "nowhere")}
    ok = warm_start.start((*CLI, "data", "stats", "one.mrg", "--json"), str(tmp_path / "ok.log"), env,
                          str(tmp_path), 1)
    assert isinstance(ok, warm_start.ForkedChild) and ok.process.pid != os.getpid()
    assert ok.wait() == 0
    assert json.loads((tmp_path / "ok.log").read_text())["total"]["words"] == 3  # one.mrg read from its folder
    bad = warm_start.start((*CLI, "data", "stats", "ptb-sample", "--json"), str(tmp_path / "bad.log"), env,
                           str(tmp_path), 1)
    assert bad.wait() == 2
    line = (tmp_path / "bad.log").read_text()
    assert line.startswith("synbench: error: ") and str(tmp_path / "nowhere") in line  # the task's environment
    assert os.environ.get("SYNBENCH_DATA") != env["SYNBENCH_DATA"]  # and not this process's


def test_an_eval_group_task_is_forked_too(tmp_path):
    group = (sys.executable, "-m", "experiments.eval_group", str(tmp_path / "missing" / "group.json"))
    assert warm_start.forkable(group)
    child = warm_start.start(group, str(tmp_path / "log"), dict(os.environ), str(tmp_path), 1)
    assert isinstance(child, warm_start.ForkedChild) and child.wait() == 1  # its entry point ran, and failed
    assert "No such file or directory" in (tmp_path / "log").read_text()


def test_a_signal_is_reported_as_for_a_subprocess(tmp_path):
    child = warm_start.start((*CLI, "train", "tg", "--preset", "cpu-small", "--seed", "0", "--run-dir",
                              str(tmp_path / "run")), str(tmp_path / "log"), dict(os.environ), None, 1)
    time.sleep(0.5)
    os.kill(child.process.pid, signal.SIGKILL)
    assert child.wait() == -signal.SIGKILL


def test_other_commands_start_as_subprocesses(tmp_path):
    other = ("/usr/bin/env", "python3", "-c", "print('cold')")
    assert not warm_start.forkable(other)
    assert not warm_start.forkable((sys.executable, "-c", "print(1)"))
    assert not warm_start.forkable((sys.executable, "-m", "pytest", "--version"))
    assert warm_start.forkable((*CLI, "status", "x"))
    other_venv = tmp_path / "venv" / "bin" / "python"  # another environment's interpreter, same binary
    other_venv.parent.mkdir(parents=True)
    other_venv.symlink_to(os.path.realpath(sys.executable))
    assert not warm_start.forkable((str(other_venv), *CLI[1:], "status", "x"))
    child = warm_start.start(other, str(tmp_path / "log"), dict(os.environ), str(tmp_path), 1)
    assert isinstance(child, subprocess.Popen) and child.wait() == 0
    assert (tmp_path / "log").read_text() == "cold\n"


def test_a_forked_training_task_uses_the_executors_threads(tmp_path, prepared_data_dir):
    """Without ``runtime.threads`` a task takes the executor's share of the cores (OpenMP read
    ``OMP_NUM_THREADS`` when the fork server imported torch, so the child sets it again)."""
    run_dir = tmp_path / "run"
    steps = ["train.max_steps=2", "train.val_every=2", "train.ckpt_every=2", "model.total_steps=2",
             "model.warmup_steps=1", "model.d_model=16", "model.n_layers=1", "model.d_ff=16",
             "runtime.wandb=disabled", "runtime.progress=false"]
    task = Task(0, "run", 0, str(run_dir), (*CLI, "train", "txl-terminals", *steps, "--preset", "cpu-small",
                                            "--seed", "0", "--run-dir", str(run_dir)))
    assert local.run_local([task], tmp_path / "logs", max_parallel=1, threads=1) == {"run": 0}
    assert run_status(Path(run_dir)).state == "DONE"
    summary = (tmp_path / "logs" / "local-run.out").read_text()
    assert '"device": "cpu (1 threads)"' in summary


def test_import_time_variables_start_cold_and_pythonpath_reaches_a_forked_task(tmp_path):
    """Variables read when a library is imported (``HF_HOME`` ...) took the fork server's values: a task that sets
    others starts as a subprocess. ``PYTHONPATH`` is put on the forked task's ``sys.path``."""
    warm_start.start((*CLI, "status", "--help"), str(tmp_path / "first.log"), dict(os.environ), None, 1).wait()
    cold = warm_start.start((*CLI, "status", "--help"), str(tmp_path / "cold.log"),
                            {**os.environ, "HF_HOME": str(tmp_path / "hf")}, None, 1)
    assert isinstance(cold, subprocess.Popen) and cold.wait() == 0
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "marker_plugin.py").write_text(
        f"open({str(tmp_path / 'imported')!r}, 'w').close()\n")
    env = {**os.environ, "PYTHONPATH": str(tmp_path / "mine"), "SYNBENCH_PLUGINS": "marker_plugin"}
    warm = warm_start.start((*CLI, "model-info", "--help"), str(tmp_path / "warm.log"), env, None, 1)
    assert isinstance(warm, warm_start.ForkedChild)
    warm.wait()
    assert (tmp_path / "imported").exists(), (tmp_path / "warm.log").read_text()
