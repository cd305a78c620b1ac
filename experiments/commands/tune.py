"""``synbench tune EXPERIMENT --n-trials N``: Optuna over the spec's ``tune:`` search space.

Minimises the best validation loss; prunes on ``val/loss`` per training step (median pruner); retries trials
whose worker died (heartbeats, RDB storages). A failed trial is one line naming its error; the command exits
with status 2 when no trial completed. Each trial is a run folder ``RUNS/EXPERIMENT/trials/RUN_ID``.
The study is created once here, then ``--workers`` workers (local processes, or SLURM array tasks with
``--executor slurm``) share it until it holds N finished trials. ``--n-trials 0`` just reports (and
exports) an existing study.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import time
from pathlib import Path

from experiments.cli_options import natural, positive_int


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "tune", help="tune hyperparameters with Optuna (local workers or a SLURM array)", description=__doc__
    )
    p.add_argument(
        "experiment", help="a shipped experiment or the path of a spec YAML with a 'tune:' section"
    )
    p.add_argument("--n-trials", type=natural, required=True,
                   help="finished trials the study should hold (0: report and export the study as it is)")
    p.add_argument(
        "--storage",
        help="sqlite:///FILE (default: RUNS/EXPERIMENT/tune/optuna.db), "
        "postgresql://USER@HOST/DB, or journal:FILE",
    )
    p.add_argument("--study", help="study name (default: the experiment name)")
    p.add_argument("--executor", choices=("local", "slurm"), default="local")
    p.add_argument("--workers", type=positive_int, default=1, help="parallel workers (default 1)")
    p.add_argument("--wait", action="store_true", help="slurm: wait for the workers to finish")
    p.add_argument(
        "--export", type=Path, metavar="FILE", help="write the best trial as an experiment spec YAML"
    )
    p.add_argument(
        "--runs-dir", type=Path, help="parent of experiment folders (default: $SYNBENCH_RUNS or ./runs)"
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from experiments.experiment_spec import load_spec
    from experiments.runs import runs_root
    from experiments.tune import (
        best_summary,
        check_search_space,
        create_study,
        default_storage,
        export_best,
        open_storage,
    )
    from lightning_modules.errors import InputError

    spec = load_spec(args.experiment)
    if spec.tune is None:
        raise InputError(
            "the spec has no 'tune:' section (see experiments/experiment_spec.py)", str(spec.path)
        )
    if args.export and args.executor == "slurm" and not args.wait and args.n_trials:
        raise InputError("--export needs the finished study: add --wait, or export later with --n-trials 0")
    check_search_space(spec)
    root = runs_root(args.runs_dir)
    url = args.storage or default_storage(root, spec)
    name = args.study or spec.name
    study = create_study(open_storage(url, spec.tune), name, spec.tune)  # once, before any worker starts
    if args.n_trials:
        if args.executor == "local":
            _run_local(spec, url, name, args.n_trials, root, args.workers)
        else:
            _run_slurm(spec, url, name, args.n_trials, root, args.workers, args.wait)
            if not args.wait:
                return 0
    summary = best_summary(study)
    print(json.dumps(summary, indent=2))
    if summary["best"] is None:
        counts = ", ".join(f"{n} {state.lower()}" for state, n in summary["trials"].items()) or "no trials"
        raise InputError(f"no trial of study {name!r} completed ({counts}); each trial's reason is in its "
                         f"FAILED file under {root / spec.name / 'trials'}")
    if args.export:
        export_best(spec, study, args.export)
        print(f"synbench: wrote the best configuration to {args.export} (synbench submit {args.export})")
    return 0


def _run_local(spec, url: str, name: str, n_trials: int, root: Path, workers: int) -> None:
    from experiments.tune import work, worker_argv

    if workers == 1:
        work(spec, url, name, n_trials, root)
        return
    threads = max(1, (os.cpu_count() or 1) // workers)
    env = {**os.environ, "OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads)}
    procs = [
        subprocess.Popen(worker_argv(spec, url, name, n_trials, root, i, threads), env=env)
        for i in range(workers)
    ]
    try:
        codes = [p.wait() for p in procs]
    except KeyboardInterrupt:
        for p in procs:
            p.terminate()
        raise
    if any(codes):
        from lightning_modules.errors import InputError

        raise InputError(f"tune workers exited with status {codes}")


def _run_slurm(spec, url: str, name: str, n_trials: int, root: Path, workers: int, wait: bool) -> None:
    from experiments.experiment_runs import experiment_dir
    from experiments.launchers import slurm
    from experiments.launchers.manifest import Task
    from experiments.runs import read_queued
    from experiments.submit import slurm_options
    from experiments.tune import worker_argv

    exp = experiment_dir(root, spec)
    tasks = [
        Task(
            i,
            f"{name}-worker-{i}",
            i,
            str((exp / "tune" / "workers" / f"{name}-{i}").resolve()),
            tuple(worker_argv(spec, url, name, n_trials, root, i)),
        )
        for i in range(workers)
    ]
    jobs = slurm.submit_arrays(tasks, f"{spec.name}-tune", exp, slurm_options(spec))
    print(f"synbench: {workers} tune worker(s) submitted as SLURM array job {':'.join(jobs)} (study {name!r}, "
          f"{url})")
    ids = [read_queued(Path(task.run_dir)).job_id for task in tasks]
    while wait:
        states = slurm.job_states(ids, poll_s=0)
        if len(states) == len(ids) and all(s in slurm.ENDED_STATES for s in states.values()):
            return
        time.sleep(5)
