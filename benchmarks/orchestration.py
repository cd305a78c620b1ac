"""Orchestration overhead: a many-seed experiment as one SLURM array job, and aggregation of hundreds of runs.

Submits ``scale100`` (cpu-small TG, 4 steps per seed) with ``synbench submit --executor slurm`` and, while the
array runs, polls the run folders for each run's first ``HEARTBEAT`` (written at ``on_train_start``, just
before the first training step). Reports per task:

- startup overhead: task start (the first line of its log, 1 s resolution) -> first training step
  (interpreter, imports, data loading, model construction);
- submission -> first training step of the first wave (scheduling latency + startup);
- training time (first training step -> ``DONE``), the reference the overhead is compared with;

then times ``synbench aggregate`` on the finished runs and on 300 synthetic run folders, against the minimum
work (a plain-Python loop reading every ``DONE``) as the reference. Needs the SLURM cluster
(``bash slurm/cluster-up.sh``). On a shared 2-core machine use ``--seeds 0-19`` for a shorter run.

    python benchmarks/orchestration.py [--seeds 0-99] [--runs-dir DIR] [--skip-slurm]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

from experiments.experiment_runs import experiment_runs, folder_of
from experiments.experiment_spec import load_spec
from experiments.runs import DONE, HEARTBEAT, read_queued, write_done

REPO = Path(__file__).resolve().parents[1]


def synbench(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "experiments.cli", *args], cwd=REPO, capture_output=True,
                          text=True, check=True)


def task_starts(log_dir: Path, job: str) -> dict[str, float]:
    """{array task id: start time} from the first line each task writes to its log (the sbatch script's
    ``synbench: job ID on HOST restart 0 at DATE``, 1 s resolution like ``sacct``; no accounting needed)."""
    starts = {}
    for log in log_dir.glob(f"slurm-{job}_*.out"):
        for line in log.read_text(errors="replace").splitlines():
            parts = line.split()
            if line.startswith("synbench: job ") and "restart 0 at" in line:
                starts[parts[2]] = datetime.fromisoformat(parts[-1]).timestamp()
                break
    return starts


def quantiles(values: list[float]) -> str:
    values = sorted(values)
    p90 = values[min(len(values) - 1, int(0.9 * len(values)))]
    return f"median {statistics.median(values):6.2f} s  p90 {p90:6.2f} s  max {values[-1]:6.2f} s  (n={len(values)})"


def run_array(seeds: str, root: Path) -> None:
    spec = load_spec("scale100")
    runs = experiment_runs(spec, seeds)
    folders = {run.run_id: folder_of(root, run) for run in runs}
    before = time.time()
    synbench("submit", "scale100", "--executor", "slurm", "--seeds", seeds, "--runs-dir", str(root))
    submit_s = time.time() - before
    first_step: dict[str, float] = {}
    while len(first_step) < len(runs) or not all((f / DONE).exists() for f in folders.values()):
        for rid, folder in folders.items():
            if rid not in first_step and (folder / HEARTBEAT).exists():
                try:
                    stamp, step = (folder / HEARTBEAT).read_text().split()
                except ValueError:
                    continue
                if int(step) == 0:  # the beat of on_train_start; later beats overwrite it
                    first_step[rid] = float(stamp)
                else:  # missed it (the poll came too late): no measurement for this run
                    first_step[rid] = float("nan")
        time.sleep(0.2)
    queued = {rid: read_queued(f) for rid, f in folders.items()}
    job = next(iter(queued.values())).job_id.split("_")[0]
    starts = task_starts(root / spec.name / "logs", job)
    done_at = {rid: (f / DONE).stat().st_mtime for rid, f in folders.items()}
    ok = [rid for rid in folders if first_step[rid] == first_step[rid] and queued[rid].job_id in starts]
    startup = [first_step[r] - starts[queued[r].job_id] for r in ok]
    training = [done_at[r] - first_step[r] for r in ok]
    first_wave = sorted(ok, key=lambda r: starts[queued[r].job_id])[:2]
    wall = max(done_at.values()) - queued[runs[0].run_id].submitted_at
    print(f"array of {len(runs)} tasks (job {job}), max_parallel {spec.launcher['slurm']['max_parallel']}")
    print(f"  submit command (expand spec, manifest, sbatch, aggregation job): {submit_s:.2f} s")
    print("  submission -> first training step, first wave: "
          + ", ".join(f"{first_step[r] - queued[r].submitted_at:.2f} s" for r in first_wave))
    print(f"  task start -> first training step (startup overhead): {quantiles(startup)}")
    print(f"  first training step -> DONE (training + final metrics): {quantiles(training)}")
    print(f"  overhead / training time (medians): {statistics.median(startup) / statistics.median(training):.2f}")
    print(f"  wall time submission -> last DONE: {wall:.1f} s ({len(runs) / wall * 60:.1f} runs/min)")
    before = time.perf_counter()
    synbench("aggregate", "scale100", "--seeds", seeds, "--runs-dir", str(root))
    print(f"  synbench aggregate of these {len(runs)} runs (CLI process, incl. start-up): "
          f"{time.perf_counter() - before:.2f} s")


def aggregate_synthetic(root: Path, n_runs: int = 300) -> None:
    """``aggregate`` over ``n_runs`` synthetic DONE folders vs a plain loop reading every DONE marker."""
    seeds = f"0-{n_runs - 1}"
    runs = experiment_runs(load_spec("scale100"), seeds)
    for run in runs:
        write_done(folder_of(root, run), {"best_val_loss": 5.0 + run.seed / 1000, "global_step": 4, "family": "tg",
                                          "seed": run.seed, "val_token_ppl": 150.0, "val_word_ppl": 300.0,
                                          "val_word_ppl_convention": "gold-tree bound"})
    before = time.perf_counter()
    metrics = [json.loads((folder_of(root, r) / DONE).read_text()) for r in runs]
    reference = time.perf_counter() - before
    from analysis.aggregate import aggregate_experiment

    before = time.perf_counter()
    result = aggregate_experiment(load_spec("scale100"), root, seeds)
    in_process = time.perf_counter() - before
    before = time.perf_counter()
    synbench("aggregate", "scale100", "--seeds", seeds, "--runs-dir", str(root))
    cli = time.perf_counter() - before
    assert len(metrics) == n_runs and result.summary["done"] == n_runs
    print(f"aggregate of {n_runs} synthetic runs ({len(result.long)} long rows):")
    print(f"  reference (plain loop reading {n_runs} DONE files): {reference * 1000:.1f} ms")
    print(f"  analysis.aggregate (expand spec, states, 2 tables x Parquet+CSV): {in_process * 1000:.1f} ms "
          f"({in_process / reference:.0f}x the reference)")
    print(f"  synbench aggregate CLI (new process, imports pandas/pyarrow): {cli:.2f} s")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", default="0-99", help="seeds of scale100 to submit (default 0-99)")
    ap.add_argument("--runs-dir", type=Path, help="where the runs go (default: a temporary folder)")
    ap.add_argument("--skip-slurm", action="store_true", help="only the synthetic aggregation benchmark")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="synbench-orch-") as tmp:
        aggregate_synthetic(Path(tmp) / "synthetic")
        if not args.skip_slurm:
            run_array(args.seeds, args.runs_dir or Path(tmp) / "runs")


if __name__ == "__main__":
    main()
