"""Hyperparameter tuning with Optuna over the ``tune:`` search space of an experiment spec.

Every trial is a normal run: the tuned model's overrides plus the sampled values resolve to a config whose run
id names its folder ``RUNS/EXPERIMENT/trials/RUN_ID``, so a trial whose worker died resumes from that
folder's ``last.ckpt`` when Optuna retries it with the same parameters. The objective is the run's best
validation loss (minimised); ``val/loss`` is reported at every validation keyed by ``global_step`` so the
median pruner compares trials step by step, and a pruned trial's folder says so in ``FAILED``.

Storages (``--storage``): SQLite by default (``RUNS/EXPERIMENT/tune/optuna.db``), any SQLAlchemy URL
(``postgresql://`` = psycopg 3, ``postgresql+psycopg2://``) for many workers, or ``journal:PATH`` for Optuna's
journal file (NFS-friendly, no database). The study is created once, before any worker starts. RDB storages
get heartbeats: a trial whose worker stopped beating (killed, preempted) is failed after twice
``tune.heartbeat_s`` and re-enqueued with the same parameters (``RetryHeartbeatStaleTrialCallback``); the
journal storage has no heartbeats in Optuna, so a killed worker's trial stays RUNNING there.

Workers (``python -m experiments.tune SPEC --storage URL --study NAME --n-trials N``) run trials until the
study holds N finished ones (complete, pruned, or failed with an error), counting trials in flight, so several
workers (local processes or SLURM array tasks) share one budget. Counting and starting a trial happen under
one claim lock per study (a PostgreSQL advisory lock, a MySQL named lock, or a file lock beside a SQLite
database or journal), so two workers never both take the last trial of the budget.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import hashlib
import json
import os
import socket
import sys
import time
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import yaml

from experiments.cli_options import natural, positive_int
from experiments.config import run_id
from experiments.experiment_runs import experiment_dir, resolve
from experiments.experiment_spec import ExperimentSpec, TuneSpec, format_override, load_spec
from lightning_modules.data.atomic import atomic_write_text
from lightning_modules.errors import InputError

OBJECTIVE = "best_val_loss"


# --- storage and study ---


def default_storage(root: Path, spec: ExperimentSpec) -> str:
    """``sqlite:///RUNS/EXPERIMENT/tune/optuna.db`` (absolute)."""
    path = (experiment_dir(root, spec) / "tune" / "optuna.db").resolve()
    path.parent.mkdir(parents=True, exist_ok=True)
    return f"sqlite:///{path}"


def open_storage(url: str, tune: TuneSpec, create_tables: bool = True) -> Any:
    """The Optuna storage of ``url``: ``journal:PATH`` or an RDB URL (with heartbeats and retries)."""
    import optuna
    from optuna.storages import JournalStorage, RDBStorage, RetryHeartbeatStaleTrialCallback
    from optuna.storages.journal import JournalFileBackend

    # ERROR: a failed trial is reported as one line by the objective, not as Optuna's warning with a traceback
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    # heartbeats and their retry callback are "experimental" in Optuna: say it once in the docs, not per trial
    warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)
    if url.startswith("journal:"):
        path = Path(url[len("journal:") :].removeprefix("//"))
        path.parent.mkdir(parents=True, exist_ok=True)
        return JournalStorage(JournalFileBackend(str(path)))
    if "://" not in url:
        raise InputError("expected sqlite:///FILE, postgresql://..., or journal:FILE", "--storage")
    engine = {"connect_args": {"timeout": 60}} if url.startswith("sqlite") else {"pool_pre_ping": True}
    try:
        return RDBStorage(
            url,
            engine_kwargs=engine,
            heartbeat_interval=tune.heartbeat_s,
            grace_period=2 * tune.heartbeat_s,
            heartbeat_stale_trial_callback=RetryHeartbeatStaleTrialCallback(
                max_retry=tune.max_retry, inherit_intermediate_values=True
            ),
            skip_table_creation=not create_tables,
        )
    except ImportError as e:
        raise InputError(
            f"no database driver for this URL ({e}); for PostgreSQL install psycopg[binary] "
            "or write postgresql+psycopg2://",
            "--storage",
        ) from None
    except Exception as e:  # SQLAlchemy: unreachable server, bad credentials, malformed URL
        raise InputError(
            f"cannot open the storage: {type(e).__name__}: {e}".splitlines()[0], "--storage"
        ) from None


def sampler_and_pruner(tune: TuneSpec, worker: int = 0) -> tuple[Any, Any]:
    """TPE (seeded per worker, so workers do not draw the same start-up trials) and the median pruner."""
    import optuna

    seed = None if tune.sampler_seed is None else tune.sampler_seed + worker
    pruner = (
        optuna.pruners.MedianPruner(**tune.pruner) if tune.pruner is not None else optuna.pruners.NopPruner()
    )
    return optuna.samplers.TPESampler(seed=seed), pruner


def create_study(storage: Any, name: str, tune: TuneSpec) -> Any:
    """Create the study (or load an existing one): do this once, before workers start."""
    import optuna

    sampler, pruner = sampler_and_pruner(tune)
    return optuna.create_study(
        storage=storage,
        study_name=name,
        direction="minimize",
        sampler=sampler,
        pruner=pruner,
        load_if_exists=True,
    )


# --- trials ---


def suggest(trial: Any, tune: TuneSpec) -> dict[str, Any]:
    """Draw one value per search-space parameter."""
    values: dict[str, Any] = {}
    for p in tune.params:
        if p.type == "categorical":
            values[p.key] = trial.suggest_categorical(p.key, list(p.choices))
        elif p.type == "int":
            values[p.key] = trial.suggest_int(
                p.key, int(p.low), int(p.high), step=int(p.step or 1), log=p.log
            )
        else:
            values[p.key] = trial.suggest_float(p.key, p.low, p.high, step=p.step, log=p.log)
    return values


def trial_overrides(spec: ExperimentSpec, values: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
    """(the tuned model entry, its overrides merged with the data entry's and the sampled ``values``)."""
    tune = spec.tune
    model = next(m for m in spec.models if m.name == tune.model)
    merged = dict(model.overrides)
    if tune.data is not None:
        merged.update(next(d for d in spec.data if d.name == tune.data).overrides)
    merged.update(values)
    return model, merged


def trial_config(spec: ExperimentSpec, values: dict[str, Any]) -> dict[str, Any]:
    """The resolved config of a trial, exactly as ``synbench train`` would resolve it."""
    model, merged = trial_overrides(spec, values)
    return resolve(model.family, model.preset, [format_override(k, v) for k, v in merged.items()])


def check_search_space(spec: ExperimentSpec) -> None:
    """Resolve the config at each parameter's bounds/choices, so a typo in a key fails before any trial."""
    for p in spec.tune.params:
        for value in p.choices or (p.low, p.high):
            value = int(value) if p.type == "int" else value
            try:
                trial_config(spec, {p.key: value})
            except InputError as e:
                raise InputError(f"tune.params.{p.key}: {e}", p.where) from None


@contextlib.contextmanager
def run_lock(run_dir: Path) -> Iterator[None]:
    """Hold ``RUN_DIR/LOCK`` while training, so two trials that drew the same config never train one folder
    at the same time: the second waits, then finds ``DONE``. The kernel drops the lock of a killed process."""
    run_dir.mkdir(parents=True, exist_ok=True)
    with open(run_dir / "LOCK", "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


class Objective:
    """Train the trial's run (in this process) and return its best validation loss."""

    def __init__(
        self,
        spec: ExperimentSpec,
        root: Path,
        study_name: str,
        threads: int | None = None,
        on_start: Callable[[], None] = lambda: None,
    ):
        self.spec, self.root, self.study_name, self.threads = spec, Path(root), study_name, threads
        self.on_start = on_start

    def __call__(self, trial: Any) -> float:
        from experiments.train import train
        from experiments.training_callbacks import OptunaPruning

        self.on_start()  # the trial exists: other workers may count it now

        values = suggest(trial, self.spec.tune)
        runtime = {"runtime.experiment": f"{self.spec.name}/tune/{self.study_name}"}
        if self.threads:
            runtime["runtime.threads"] = self.threads
        cfg = trial_config(self.spec, {**values, **runtime})
        seed = self.spec.tune.seed
        rid = run_id(cfg, seed)
        run_dir = experiment_dir(self.root, self.spec) / "trials" / rid
        trial.set_user_attr("run_id", rid)
        trial.set_user_attr("run_dir", str(run_dir.resolve()))
        trial.set_user_attr("worker", f"{socket.gethostname()}:{os.getpid()}")
        try:
            with run_lock(run_dir):
                metrics = train(cfg, seed, run_dir, callbacks=[OptunaPruning(trial)])
        except Exception as e:
            import optuna

            if not isinstance(e, optuna.TrialPruned):
                error = " ".join(str(e).split()) or type(e).__name__
                trial.set_user_attr("error", error)
                print(f"synbench: trial {trial.number} failed: {error}", file=sys.stderr)
            raise
        if metrics.get(OBJECTIVE) is None:
            raise InputError(f"the run has no {OBJECTIVE} (did it validate?)", str(run_dir))
        return float(metrics[OBJECTIVE])


def _counts(study: Any) -> tuple[int, int, int]:
    """(finished, waiting, running) trials. Finished = complete, pruned, or failed with an error (a trial that
    failed because its worker died is retried instead: it comes back as a waiting copy)."""
    from optuna.trial import TrialState

    finished = waiting = running = 0
    for t in study.get_trials(deepcopy=False):
        if t.state in (TrialState.COMPLETE, TrialState.PRUNED) or (
            t.state == TrialState.FAIL and "error" in t.user_attrs
        ):
            finished += 1
        elif t.state == TrialState.WAITING:
            waiting += 1
        elif t.state == TrialState.RUNNING:
            running += 1
    return finished, waiting, running


class ClaimLock:
    """Serialises "count the study's trials, then start one" across workers (see the module docstring).
    ``acquire`` blocks; ``release`` is idempotent, so the objective releases it as soon as its trial exists
    and the worker releases it again in any case."""

    def __init__(self, storage_url: str, study_name: str):
        self._file: Any = None
        self._connection: Any = None
        self._held = False
        key = hashlib.sha256(study_name.encode()).digest()
        self._key = int.from_bytes(key[:8], "big", signed=True)  # a bigint for pg_advisory_lock
        self._name = "synbench-tune-" + key[:16].hex()  # MySQL names are at most 64 characters
        if storage_url.startswith("journal:"):
            self._path: Path | None = Path(storage_url[len("journal:") :].removeprefix("//"))
        elif storage_url.startswith("sqlite:///"):
            self._path = Path(storage_url[len("sqlite:///") :])
        else:
            import sqlalchemy

            self._path = None
            self._engine = sqlalchemy.create_engine(storage_url, poolclass=sqlalchemy.pool.NullPool)
            self._dialect = self._engine.dialect.name
            if self._dialect not in ("postgresql", "mysql"):
                raise InputError(
                    f"no claim lock for {self._dialect} storages; use PostgreSQL, MySQL, SQLite or journal:FILE",
                    "--storage",
                )

    def acquire(self) -> None:
        import sqlalchemy

        if self._path is not None:
            self._file = open(self._path.with_name(self._path.name + ".claim"), "a")
            fcntl.flock(self._file, fcntl.LOCK_EX)
        else:
            self._connection = self._engine.connect()
            if self._dialect == "postgresql":
                self._connection.execute(sqlalchemy.text("SELECT pg_advisory_lock(:k)"), {"k": self._key})
            else:
                self._connection.execute(sqlalchemy.text("SELECT GET_LOCK(:n, -1)"), {"n": self._name})
            self._connection.commit()  # session-level locks outlive the transaction
        self._held = True

    def release(self) -> None:
        if not self._held:
            return
        self._held = False
        if self._file is not None:
            self._file.close()  # closing drops the flock
            self._file = None
        else:
            self._connection.close()  # a session lock ends with its session
            self._connection = None


def work(
    spec: ExperimentSpec,
    storage_url: str,
    study_name: str,
    n_trials: int,
    root: Path,
    worker: int = 0,
    threads: int | None = None,
) -> None:
    """A worker: run trials until the study has ``n_trials`` finished ones. Retries (waiting trials) are run
    first; trials in flight elsewhere count, and the worker waits for them at the end, because a trial whose
    worker died goes stale and comes back as a retry (RDB storages; the journal storage has no heartbeats,
    so there a worker stops once finished + running trials reach the budget)."""
    import optuna
    from optuna.storages import fail_stale_trials
    from optuna.storages._heartbeat import is_heartbeat_enabled

    storage = open_storage(storage_url, spec.tune, create_tables=False)
    sampler, pruner = sampler_and_pruner(spec.tune, worker)
    study = optuna.load_study(study_name=study_name, storage=storage, sampler=sampler, pruner=pruner)
    claim = ClaimLock(storage_url, study_name)
    objective = Objective(spec, root, study_name, threads, on_start=claim.release)
    heartbeats = is_heartbeat_enabled(storage)
    while True:
        if heartbeats:
            fail_stale_trials(study)
        claim.acquire()
        try:
            finished, waiting, running = _counts(study)
            if waiting == 0 and finished + running >= n_trials:
                if running == 0 or not heartbeats:
                    return
                claim.release()
                time.sleep(min(spec.tune.heartbeat_s, 10))
                continue
            # the trial is created (RUNNING) before the objective runs; the objective releases the claim
            study.optimize(objective, n_trials=1, catch=(Exception,))
        finally:
            claim.release()


# --- export ---


def _seed_text(seeds: tuple[int, ...]) -> str:
    """``(0, 1, 2, 5)`` -> ``"0-2,5"``."""
    parts, start = [], 0
    for i in range(1, len(seeds) + 1):
        if i == len(seeds) or seeds[i] != seeds[i - 1] + 1:
            lo, hi = seeds[start], seeds[i - 1]
            parts.append(str(lo) if lo == hi else f"{lo}-{hi}")
            start = i
    return ",".join(parts)


def export_best(spec: ExperimentSpec, study: Any, path: Path) -> dict[str, Any]:
    """Write the best trial as an experiment spec (the tuned model with the best values, the spec's seeds,
    evaluations and launcher options); returns the spec mapping."""
    from optuna.trial import TrialState

    if not any(t.state == TrialState.COMPLETE for t in study.get_trials(deepcopy=False)):
        raise InputError(f"study {study.study_name!r} has no complete trial to export yet")
    best = study.best_trial
    model, merged = trial_overrides(spec, {})
    model_overrides = dict(model.overrides)
    model_overrides.update(best.params)
    entry: dict[str, Any] = {"family": model.family, "name": model.name}
    if model.preset:
        entry["preset"] = model.preset
    entry["overrides"] = model_overrides
    out: dict[str, Any] = {
        "name": f"{spec.name}-best",
        "description": f"best trial {best.number} of Optuna study {study.study_name!r} over {spec.name} "
        f"({OBJECTIVE} {best.value:.6g}, run {best.user_attrs.get('run_id')})",
        "models": [entry],
    }
    if spec.tune.data is not None:
        data = next(d for d in spec.data if d.name == spec.tune.data)
        out["data"] = [{"name": data.name, "overrides": dict(data.overrides)}]
    out["seeds"] = _seed_text(spec.seeds)
    if spec.evaluations:
        out["evaluations"] = [dict(e) for e in spec.evaluations]
    if spec.launcher:
        out["launcher"] = spec.launcher
    atomic_write_text(Path(path), yaml.safe_dump(out, sort_keys=False, allow_unicode=True))
    return out


def best_summary(study: Any) -> dict[str, Any]:
    """Counts by state and the best trial, for printing."""
    states: dict[str, int] = {}
    for t in study.get_trials(deepcopy=False):
        states[t.state.name] = states.get(t.state.name, 0) + 1
    out: dict[str, Any] = {"study": study.study_name, "trials": states}
    try:
        best = study.best_trial
        out["best"] = {
            "number": best.number,
            "value": best.value,
            "params": best.params,
            "run_id": best.user_attrs.get("run_id"),
        }
    except ValueError:
        out["best"] = None
    return out


# --- worker entry point (what local worker processes and SLURM array tasks run) ---


def worker_argv(
    spec: ExperimentSpec,
    storage: str,
    study: str,
    n_trials: int,
    root: Path,
    worker: int,
    threads: int | None = None,
) -> list[str]:
    argv = [
        sys.executable,
        "-m",
        "experiments.tune",
        str(spec.path.resolve()),
        "--storage",
        storage,
        "--study",
        study,
        "--n-trials",
        str(n_trials),
        "--runs-dir",
        str(Path(root).resolve()),
        "--worker",
        str(worker),
    ]
    return argv + (["--threads", str(threads)] if threads else [])


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m experiments.tune", description="one Optuna worker")
    p.add_argument("spec")
    p.add_argument("--storage", required=True)
    p.add_argument("--study", required=True)
    p.add_argument("--n-trials", type=positive_int, required=True)
    p.add_argument("--runs-dir", type=Path, required=True)
    p.add_argument("--worker", type=natural, default=int(os.environ.get("SLURM_ARRAY_TASK_ID", 0)))
    p.add_argument("--threads", type=positive_int)
    args = p.parse_args(argv)
    try:
        spec = load_spec(args.spec)
        if spec.tune is None:
            raise InputError("the spec has no 'tune:' section", str(spec.path))
        work(spec, args.storage, args.study, args.n_trials, args.runs_dir, args.worker, args.threads)
    except InputError as e:
        print(f"synbench: error: {e}", file=sys.stderr)
        return 2
    print(json.dumps({"worker": args.worker, "pid": os.getpid()}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
