"""Run-folder protocol: states from markers, stale heartbeats, QUEUED vs scheduler, what submit sends."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from experiments import runs
from lightning_modules.errors import InputError

NOW = 1_800_000_000.0


def _touch(path: Path, mtime: float) -> None:
    os.utime(path, (mtime, mtime))


def test_missing_or_empty_folder_is_pending(tmp_path):
    assert runs.run_state(tmp_path / "never-created", now=NOW) == "PENDING"
    assert runs.run_state(tmp_path, now=NOW) == "PENDING"


def test_fresh_heartbeat_is_running_stale_is_failed(tmp_path):
    runs.write_heartbeat(tmp_path, 40, now=NOW - 5)
    status = runs.run_status(tmp_path, "r", 3, stale_after_s=30, now=NOW)
    assert (status.state, status.global_step, status.seed) == ("RUNNING", 40, 3)
    dead = runs.run_status(tmp_path, stale_after_s=30, now=NOW + 60)
    assert dead.state == "FAILED" and "no heartbeat for 65 s" in dead.error


def test_unreadable_heartbeat_falls_back_to_mtime(tmp_path):
    (tmp_path / runs.HEARTBEAT).write_text("garbage")
    _touch(tmp_path / runs.HEARTBEAT, NOW - 1)
    assert runs.run_state(tmp_path, stale_after_s=30, now=NOW) == "RUNNING"


def test_done_wins_and_carries_metrics(tmp_path):
    runs.write_heartbeat(tmp_path, 10, now=NOW - 1000)
    runs.write_done(tmp_path, {"val_loss": 1.5, "global_step": 20})
    status = runs.run_status(tmp_path, now=NOW)
    assert status.state == "DONE" and status.metrics == {"val_loss": 1.5, "global_step": 20}
    assert status.to_json() == {
        "run_id": tmp_path.name,
        "seed": None,
        "state": "DONE",
        "metrics": {"val_loss": 1.5, "global_step": 20},
        "global_step": 10,
    }


def test_failed_marker_records_one_error_line(tmp_path):
    runs.write_failed(tmp_path, "step 12: loss is nan\n  (diverged)")
    status = runs.run_status(tmp_path, now=NOW)
    assert status.state == "FAILED" and status.error == "step 12: loss is nan (diverged)"


def test_queued_run_is_pending_until_it_beats(tmp_path):
    runs.prepare_submission(tmp_path)
    runs.write_queued(tmp_path, "slurm", "12_3", submitted_at=NOW - 50)
    assert runs.run_status(tmp_path, now=NOW).state == "PENDING"
    assert runs.run_status(tmp_path, now=NOW).job_id == "12_3"
    runs.write_heartbeat(tmp_path, 1, now=NOW - 2)
    assert runs.run_state(tmp_path, stale_after_s=30, now=NOW) == "RUNNING"
    # started after submission, then went silent: the process died
    assert runs.run_state(tmp_path, stale_after_s=30, now=NOW + 100) == "FAILED"


def test_scheduler_view_decides_for_silent_queued_runs(tmp_path):
    runs.write_heartbeat(tmp_path, 7, now=NOW - 500)  # an earlier attempt
    runs.write_queued(tmp_path, "slurm", "12_3", submitted_at=NOW - 600)
    # requeued after preemption: stale heartbeat, but the job is queued again
    assert runs.run_state(tmp_path, stale_after_s=30, jobs={"12_3": "active"}, now=NOW) == "PENDING"
    ended = runs.run_status(tmp_path, stale_after_s=30, jobs={"12_3": "ended"}, now=NOW)
    assert ended.state == "FAILED" and "ended without writing DONE" in ended.error
    # a never-started run whose job ended (cancelled while queued) is FAILED too
    other = tmp_path / "other"
    runs.prepare_submission(other)
    runs.write_queued(other, "slurm", "12_4", submitted_at=NOW - 10)
    assert runs.run_state(other, jobs={"12_4": "ended"}, now=NOW) == "FAILED"
    assert runs.run_state(other, jobs={}, now=NOW) == "PENDING"  # scheduler does not know it (yet)


def test_resubmission_clears_failure_but_later_failure_counts(tmp_path):
    runs.write_failed(tmp_path, "boom")
    runs.prepare_submission(tmp_path)
    assert not (tmp_path / runs.FAILED).exists()
    runs.write_queued(tmp_path, "slurm", "13_0", submitted_at=NOW - 10)
    runs.write_failed(tmp_path, "boom again")
    _touch(tmp_path / runs.FAILED, NOW - 5)
    assert runs.run_status(tmp_path, now=NOW).error == "boom again"
    # a FAILED older than the submission (written by an attempt that raced the marker) does not count
    _touch(tmp_path / runs.FAILED, NOW - 20)
    assert runs.run_state(tmp_path, jobs={"13_0": "active"}, now=NOW) == "PENDING"


def test_a_damaged_marker_fails_that_run_with_the_reason(tmp_path):
    (tmp_path / runs.QUEUED).write_text("{not json")
    status = runs.run_status(tmp_path, now=NOW)
    assert status.state == "FAILED"
    assert status.error == f"{tmp_path / runs.QUEUED}: damaged QUEUED marker (expected JSON with executor, " \
                           "job_id, submitted_at)"
    (tmp_path / runs.QUEUED).unlink()
    (tmp_path / runs.DONE).write_text("[1, 2]")
    assert runs.run_status(tmp_path, now=NOW).error.endswith("damaged DONE marker (expected a JSON object)")
    (tmp_path / runs.DONE).write_bytes(b'{"best_val_loss": 4.\xff')
    assert "damaged DONE marker" in runs.run_status(tmp_path, now=NOW).error
    with pytest.raises(InputError, match="damaged DONE") as e:
        runs.read_done(tmp_path)
    assert e.value.location == str(tmp_path / runs.DONE)


def test_runs_root_precedence(monkeypatch, tmp_path):
    monkeypatch.delenv("SYNBENCH_RUNS", raising=False)
    assert runs.runs_root() == Path("runs")
    monkeypatch.setenv("SYNBENCH_RUNS", str(tmp_path))
    assert runs.runs_root() == tmp_path
    assert runs.runs_root("elsewhere") == Path("elsewhere")
    assert runs.run_folder(tmp_path, "smoke", "tg-1-s0") == tmp_path / "smoke" / "tg-1-s0"


def test_selection_for_submit_and_only_missing(tmp_path):
    root = tmp_path / "smoke"
    done, running, queued, failed, fresh = (
        root / n for n in ("done", "running", "queued", "failed", "fresh")
    )
    runs.write_done(done, {"loss": 1.0})
    runs.write_heartbeat(running, 3, now=NOW - 1)
    runs.write_queued(queued, "slurm", "9_2", submitted_at=NOW - 5)
    runs.write_failed(failed, "oops")
    statuses = [
        runs.run_status(f, seed=i, now=NOW) for i, f in enumerate((done, running, queued, failed, fresh))
    ]
    assert [s.state for s in statuses] == ["DONE", "RUNNING", "PENDING", "FAILED", "PENDING"]
    send, skipped = runs.select_for_submission(statuses, only_missing=False)
    assert send == ["running", "queued", "failed", "fresh"] and skipped == {"done": "DONE"}
    send, skipped = runs.select_for_submission(statuses, only_missing=True)
    assert send == ["failed", "fresh"] and skipped == {
        "done": "DONE",
        "running": "RUNNING",
        "queued": "PENDING",
    }
    assert runs.queued_job_ids([done, queued, fresh]) == {"slurm": ["9_2"]}
    report = runs.status_report(statuses)
    assert [r["state"] for r in report["runs"]] == ["DONE", "RUNNING", "PENDING", "FAILED", "PENDING"]
    assert json.loads(json.dumps(report))["runs"][0]["metrics"] == {"loss": 1.0}
