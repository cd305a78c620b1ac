"""Run folders: the filesystem protocol between training, launchers and ``synbench status``.

The filesystem is the source of truth for every run (W&B only mirrors it)::

    RUNS/EXPERIMENT/RUN_ID/
        config.json    resolved config + seed
        QUEUED         written by the launcher at submission: {"executor", "job_id", "submitted_at"}
        HEARTBEAT      "unix_time global_step", rewritten by training every ~10 s
        FAILED         the error line of a run that stopped with an error
        TIMING         the wall-clock speed of the attempt that finished the run (JSON, just before DONE)
        DONE           the final metrics (JSON), written last and atomically
        checkpoints/   best.ckpt, last.ckpt and, with ``train.keep_every N``, step-NNNNNN.ckpt every N steps
        steps/         step-NNNNNN/eval/TASK: the evaluations of a kept checkpoint (``evaluate --checkpoints all``)

A run's state follows from these markers alone (plus, optionally, what the scheduler says about the job named
in ``QUEUED``), so ``status`` works for local, SLURM and submitit runs alike and after any crash.
"""

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from lightning_modules.data.atomic import atomic_write_text
from lightning_modules.errors import InputError

CONFIG = "config.json"
QUEUED = "QUEUED"
HEARTBEAT = "HEARTBEAT"
FAILED = "FAILED"
DONE = "DONE"
TIMING = "TIMING"
# fields of the attempt that finished a run, not of the run: a run resumed after a kill differs from an
# uninterrupted one in these only, so they go to TIMING and DONE stays the same for the same config and seed
ATTEMPT_TIMING = ("train_seconds", "train_steps_timed", "train_steps_per_s", "train_tokens_per_s")
CHECKPOINTS = "checkpoints"
STEPS = "steps"  # the evaluations of the checkpoints kept over training, one folder per step
EVALUATED_CHECKPOINTS = ("best", "all")  # a run's checkpoints ``evaluate --checkpoints`` reads: best, or also the kept
_KEPT = re.compile(r"step-(\d+)")

State = Literal["PENDING", "RUNNING", "DONE", "FAILED"]
# What a launcher knows about the job of a QUEUED marker: still queued or running, or gone for good.
JobStatus = Literal["active", "ended"]

# Training beats every ~10 s; a run whose last beat is older than this is considered dead.
DEFAULT_STALE_AFTER_S = 120.0


def runs_root(runs_dir: str | Path | None = None) -> Path:
    """Where run folders live: ``--runs-dir`` if given, else ``$SYNBENCH_RUNS``, else ``./runs``."""
    if runs_dir is not None:
        return Path(runs_dir)
    return Path(os.environ.get("SYNBENCH_RUNS") or "runs")


def run_folder(root: Path, experiment: str, run_id: str) -> Path:
    """``ROOT/EXPERIMENT/RUN_ID``."""
    return Path(root) / experiment / run_id


def kept_name(step: int) -> str:
    """The name of what belongs to the checkpoint kept at training step ``step``: ``step-000500``."""
    return f"step-{step:06d}"


def kept_checkpoint(step: int) -> str:
    """The file name of the checkpoint kept at ``step`` (in ``RUN/checkpoints``): ``step-000500.ckpt``."""
    return f"{kept_name(step)}.ckpt"


def kept_checkpoints(run_dir: Path) -> dict[int, Path]:
    """The checkpoints a run kept over training (``train.keep_every``), by step, in step order."""
    return _by_step(Path(run_dir) / CHECKPOINTS, ".ckpt")


def step_folder(run_dir: Path, step: int) -> Path:
    """``RUN/steps/step-NNNNNN``: its ``eval/`` holds the evaluations of the checkpoint kept at ``step``, laid
    out as the run's own ``eval/`` (so they are read as a run's, ``analysis.eval_results``)."""
    return Path(run_dir) / STEPS / kept_name(step)


def step_folders(run_dir: Path) -> dict[int, Path]:
    """The ``step_folder`` of each step evaluated, by step, in step order."""
    return _by_step(Path(run_dir) / STEPS, "")


def _by_step(folder: Path, suffix: str) -> dict[int, Path]:
    found = {}
    for path in folder.glob(f"step-*{suffix}") if folder.is_dir() else []:
        match = _KEPT.fullmatch(path.name.removesuffix(suffix))
        if match and (path.is_file() if suffix else path.is_dir()):
            found[int(match.group(1))] = path
    return dict(sorted(found.items()))


# --- markers written by training ---


def write_done(folder: Path, metrics: Mapping[str, Any]) -> dict[str, Any]:
    """Write the final metrics to ``DONE`` atomically, the ``ATTEMPT_TIMING`` fields among them to ``TIMING``
    first; call it last, after every other output is on disk. Returns what ``DONE`` holds."""
    timing = {k: v for k, v in metrics.items() if k in ATTEMPT_TIMING}
    done = {k: v for k, v in metrics.items() if k not in ATTEMPT_TIMING}
    if timing:
        atomic_write_text(Path(folder) / TIMING, json.dumps(timing, indent=2, sort_keys=True) + "\n")
    atomic_write_text(Path(folder) / DONE, json.dumps(done, indent=2, sort_keys=True) + "\n")
    return done


def read_timing(folder: Path) -> dict[str, float]:
    """The ``TIMING`` of a finished run (empty when it has none or it does not read back: timing is optional)."""
    try:
        timing = json.loads((Path(folder) / TIMING).read_text())
    except (OSError, ValueError):
        return {}
    return {k: v for k, v in timing.items() if k in ATTEMPT_TIMING} if isinstance(timing, dict) else {}


def write_failed(folder: Path, error: str) -> None:
    """Record why a run stopped (one line) in ``FAILED``."""
    line = " ".join(str(error).split()) or "unknown error"
    atomic_write_text(Path(folder) / FAILED, line + "\n")


def write_heartbeat(folder: Path, global_step: int, now: float | None = None) -> None:
    """Rewrite ``HEARTBEAT`` as ``unix_time global_step`` (what the training callback does every ~10 s)."""
    atomic_write_text(Path(folder) / HEARTBEAT, f"{time.time() if now is None else now:.3f} {global_step}\n")


# --- markers written by launchers ---


@dataclass(frozen=True)
class Queued:
    """Contents of ``QUEUED``: which executor holds the run and under which job id."""

    executor: str
    job_id: str
    submitted_at: float


def prepare_submission(folder: Path) -> None:
    """Create the run folder and clear the ``FAILED`` marker of an earlier attempt (the run is retried).

    Call it before handing the run to the executor, so an error of the new attempt is never erased."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / FAILED).unlink(missing_ok=True)


def write_queued(folder: Path, executor: str, job_id: str, submitted_at: float) -> None:
    """Mark a run as submitted. ``submitted_at`` is the time taken *before* submitting, so that every
    heartbeat of the new attempt is newer than the marker."""
    payload = {"executor": executor, "job_id": str(job_id), "submitted_at": submitted_at}
    atomic_write_text(Path(folder) / QUEUED, json.dumps(payload, sort_keys=True) + "\n")


def read_queued(folder: Path) -> Queued | None:
    """The ``QUEUED`` marker, or None. A damaged marker is an error naming the file."""
    path = Path(folder) / QUEUED
    try:
        data = json.loads(path.read_text())
        return Queued(str(data["executor"]), str(data["job_id"]), float(data["submitted_at"]))
    except FileNotFoundError:
        return None
    except (ValueError, KeyError, TypeError):
        raise InputError(
            "damaged QUEUED marker (expected JSON with executor, job_id, submitted_at)", str(path)
        ) from None


# --- reading a run's state ---


@dataclass(frozen=True)
class RunStatus:
    """One row of ``synbench status``: the state, and whatever the markers say about it."""

    run_id: str
    seed: int | None
    state: State
    metrics: dict[str, Any] | None = None
    error: str | None = None
    job_id: str | None = None
    global_step: int | None = None
    heartbeat_age_s: float | None = field(default=None, compare=False)

    def to_json(self) -> dict[str, Any]:
        """The ``{"run_id", "seed", "state", "metrics"}`` row of the status JSON contract (plus details)."""
        row: dict[str, Any] = {
            "run_id": self.run_id,
            "seed": self.seed,
            "state": self.state,
            "metrics": self.metrics,
        }
        for key in ("error", "job_id", "global_step"):
            if getattr(self, key) is not None:
                row[key] = getattr(self, key)
        return row


def _heartbeat(folder: Path) -> tuple[float, int | None] | None:
    """(time of the last beat, its global step); the file's mtime when the content is unreadable."""
    path = folder / HEARTBEAT
    try:
        text = path.read_text()
        mtime = path.stat().st_mtime
    except FileNotFoundError:
        return None
    parts = text.split()
    try:
        return float(parts[0]), int(parts[1]) if len(parts) > 1 else None
    except (ValueError, IndexError):
        return mtime, None


def read_done(folder: Path) -> dict[str, Any] | None:
    """The final metrics in ``DONE``, or None when the run has none. A damaged marker is an error naming it."""
    path = Path(folder) / DONE
    try:
        metrics = json.loads(path.read_text())
    except FileNotFoundError:
        return None
    except (ValueError, UnicodeDecodeError):
        raise InputError("damaged DONE marker (expected the final metrics as JSON)", str(path)) from None
    if not isinstance(metrics, dict):
        raise InputError("damaged DONE marker (expected a JSON object)", str(path))
    return metrics


def run_status(
    folder: Path,
    run_id: str | None = None,
    seed: int | None = None,
    jobs: Mapping[str, JobStatus] | None = None,
    stale_after_s: float = DEFAULT_STALE_AFTER_S,
    now: float | None = None,
) -> RunStatus:
    """The state of one run folder.

    In order: a damaged ``DONE`` or ``QUEUED`` marker -> FAILED with the reason; ``DONE`` -> DONE; a ``FAILED``
    newer than the submission -> FAILED; a job the scheduler reports ended (without ``DONE``) -> FAILED; a
    heartbeat younger than ``stale_after_s`` -> RUNNING. Otherwise a submitted run (``QUEUED``) is PENDING while
    its job is active (queued, requeued after preemption, or starting up). When the scheduler was not asked
    (``jobs`` is None) or does not know the job, a run that has not beaten since its submission is PENDING and
    one whose heartbeat went stale is FAILED (its process died). A folder that was never submitted nor started
    (or does not exist) is PENDING.
    """
    folder = Path(folder)
    now = time.time() if now is None else now
    run_id = run_id or folder.name
    try:  # a damaged marker fails this run with the reason; the rest of the experiment carries on
        queued = read_queued(folder)
        metrics = read_done(folder)
    except InputError as damaged:
        return RunStatus(run_id, seed, "FAILED", error=str(damaged))
    job_id = queued.job_id if queued else None
    beat = _heartbeat(folder)
    step = beat[1] if beat else None
    age = now - beat[0] if beat else None

    def status(state: State, **extra: Any) -> RunStatus:
        return RunStatus(run_id, seed, state, job_id=job_id, global_step=step, heartbeat_age_s=age, **extra)

    if metrics is not None:
        return status("DONE", metrics=metrics)
    failed = folder / FAILED
    if failed.exists() and (queued is None or failed.stat().st_mtime >= queued.submitted_at):
        return status("FAILED", error=failed.read_text().strip() or "unknown error")
    job = jobs.get(queued.job_id) if jobs is not None and queued is not None else None
    if job == "ended":
        return status("FAILED", error=f"job {job_id} ended without writing DONE")
    if age is not None and age <= stale_after_s:
        return status("RUNNING")
    if queued is not None:
        if job == "active":
            return status("PENDING")
        if beat is None or beat[0] < queued.submitted_at:
            return status("PENDING")
    if beat is not None:
        return status("FAILED", error=f"no heartbeat for {age:.0f} s (the training process died)")
    return status("PENDING")


def run_state(
    folder: Path,
    stale_after_s: float = DEFAULT_STALE_AFTER_S,
    jobs: Mapping[str, JobStatus] | None = None,
    now: float | None = None,
) -> State:
    """Just the state of :func:`run_status`: PENDING, RUNNING, DONE or FAILED."""
    return run_status(folder, jobs=jobs, stale_after_s=stale_after_s, now=now).state


def queued_job_ids(folders: Iterable[Path]) -> dict[str, list[str]]:
    """Job ids in the ``QUEUED`` markers of runs not yet DONE, by executor (to ask the scheduler)."""
    out: dict[str, list[str]] = {}
    for folder in folders:
        queued = read_queued(Path(folder))
        if queued is not None and not (Path(folder) / DONE).exists():
            out.setdefault(queued.executor, []).append(queued.job_id)
    return out


def status_report(statuses: Iterable[RunStatus]) -> dict[str, Any]:
    """The ``synbench status --json`` document: ``{"runs": [{"run_id", "seed", "state", "metrics"}]}``."""
    return {"runs": [s.to_json() for s in statuses]}


def select_for_submission(
    statuses: Iterable[RunStatus], only_missing: bool
) -> tuple[list[str], dict[str, str]]:
    """Which runs ``submit`` sends: never a DONE run; with ``only_missing`` also not a PENDING (submitted)
    or RUNNING one. Returns (run ids to submit, {skipped run id: its state}). A run that was never submitted
    is PENDING without a job id and is always sent."""
    send: list[str] = []
    skipped: dict[str, str] = {}
    for s in statuses:
        in_flight = s.state == "RUNNING" or (s.state == "PENDING" and s.job_id is not None)
        if s.state == "DONE" or (only_missing and in_flight):
            skipped[s.run_id] = s.state
        else:
            send.append(s.run_id)
    return send, skipped
