"""Stages of commands (proposals, evaluations, the analysis) on the local executor and a real SLURM cluster."""

import sys
from pathlib import Path

import pytest
import yaml

from experiments.evaluation_plan import StageTask
from experiments.experiment_spec import load_spec
from experiments.stages import Progress, run_stage


def _spec(tmp_path: Path, **launcher):
    path = tmp_path / "stages.yaml"
    path.write_text(yaml.safe_dump({"models": [{"family": "tg"}], "seeds": 0,
                                    "launcher": {"local": {"max_parallel": 2}, **launcher}}))
    return load_spec(path)


def _task(tmp_path: Path, name: str, code: str) -> StageTask:
    out = tmp_path / "out" / name / "result.txt"
    argv = (sys.executable, "-c", f"import pathlib, sys; p = pathlib.Path({str(out)!r}); {code}")
    return StageTask(name, out.parent, argv, out, name)


def test_local_stage_runs_what_is_missing_and_reports_failures(tmp_path, capsys):
    spec = _spec(tmp_path)
    ok = [_task(tmp_path, f"ok{i}", "p.parent.mkdir(parents=True, exist_ok=True); p.write_text('x')")
          for i in range(3)]
    bad = _task(tmp_path, "bad", "sys.exit(3)")
    failed = run_stage("demo", [*ok, bad], "local", spec, tmp_path / "exp", poll_s=0.1)
    assert failed == [bad] and all(t.done.is_file() for t in ok)
    assert (bad.folder / "FAILED").is_file()  # the executor's marker goes to the task's own folder
    assert "[demo] 3/4 done, 1 failed" in capsys.readouterr().err
    # a second run sends only the failed task again
    ok[0].done.write_text("kept")
    assert run_stage("demo", [*ok, bad], "local", spec, tmp_path / "exp", poll_s=0.1) == [bad]
    assert ok[0].done.read_text() == "kept"
    logs = sorted(p.name for p in (tmp_path / "exp" / "logs").iterdir())
    assert logs.count("local-bad.out") == 1 and "local-ok0.out" in logs


def test_nothing_to_do_runs_nothing(tmp_path, capsys):
    task = _task(tmp_path, "done", "p.parent.mkdir(parents=True, exist_ok=True); p.write_text('x')")
    assert run_stage("first", [task], "local", _spec(tmp_path), tmp_path / "exp", poll_s=0.1) == []
    task.done.write_text("kept")
    assert run_stage("empty", [task], "local", _spec(tmp_path), tmp_path / "exp") == []
    assert "[empty] 1/1 done" in capsys.readouterr().err and task.done.read_text() == "kept"


def test_an_output_of_another_command_is_made_again(tmp_path, capsys):
    """The spec changed (another proposal set, beam, N): the same output file from the old command is stale —
    removed and made again, also when the new command fails (no stale result is left to report). An output
    without the record of its command (an older synbench, or copied by hand) is not trusted either. The
    machine's options (--device, --data-dir) and the interpreter are not part of the command."""
    spec, exp = _spec(tmp_path), tmp_path / "exp"
    old = _task(tmp_path, "t", "p.parent.mkdir(parents=True, exist_ok=True); p.write_text('old')")
    assert run_stage("s", [old], "local", spec, exp, poll_s=0.1) == []
    moved = StageTask(old.key, old.folder, ("/other/python", *old.argv[1:], "--device", "cuda"), old.done, "t")
    assert moved.is_done()
    new = StageTask(old.key, old.folder, (*old.argv[:-1], old.argv[-1].replace("'old'", "'new'")), old.done, "t")
    assert not new.is_done()
    assert run_stage("s", [new], "local", spec, exp, poll_s=0.1) == [] and new.done.read_text() == "new"
    failing = StageTask(old.key, old.folder, (sys.executable, "-c", "import sys; sys.exit(4)"), old.done, "t")
    assert run_stage("s", [failing], "local", spec, exp, poll_s=0.1) == [failing] and not old.done.exists()
    new.done.write_text("by hand")
    new.command_file.unlink()
    assert not new.is_done()
    assert run_stage("s", [new], "local", spec, exp, poll_s=0.1) == [] and new.done.read_text() == "new"
    assert "[s] 0/1 done" in capsys.readouterr().err


def test_progress_prints_only_changes():
    lines = []

    class Stream:
        def write(self, text):
            lines.append(text)

        def flush(self):
            pass

    progress = Progress("x", 5, Stream())
    for state in [(0, 0, 0), (0, 0, 0), (1, 2, 0), (1, 2, 0), (5, 0, 0)]:
        progress.update(*state)
    printed = [line for line in lines if line.strip()]
    assert len(printed) == 3 and printed[1].startswith("[x] 1/5 done, 2 running")


@pytest.mark.slurm
def test_slurm_stage_waits_for_the_array(slurm_cluster, tmp_path):
    spec = _spec(tmp_path, slurm={"time": "00:05:00", "mem": "500M", "max_parallel": 2})
    tasks = [_task(tmp_path, f"t{i}", "p.parent.mkdir(parents=True, exist_ok=True); p.write_text('x')")
             for i in range(2)]
    bad = _task(tmp_path, "bad", "sys.exit(2)")
    failed = run_stage("slurm-demo", [*tasks, bad], "slurm", spec, tmp_path / "exp", poll_s=1.0)
    assert failed == [bad] and all(t.done.is_file() for t in tasks)
