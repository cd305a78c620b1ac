"""Runs per hour on one device: K small runs packed side by side (``--runs-per-gpu K``) vs one at a time.

Each round trains K fresh runs (seeds differ) through ``experiments.launchers.pack`` exactly as an array task
does: unpacked, K tasks of one run each one after another (the reference: one run per GPU); packed, one task
running the K runs as K processes at once. Rounds alternate (unpacked, packed, unpacked, ...) so both see the
same machine state; wall-clock includes each process's start-up, data loading and final metrics, as in a real
array task. Meant for a GPU (``--device cuda``, the ``ptb`` preset: a 12M-parameter model leaves an H100
mostly idle); on CPU it is a smoke test (the runs compete for the same cores).

    python benchmarks/packed_runs.py --device cuda --preset ptb --runs-per-gpu 4 --steps 300 --rounds 2
    python benchmarks/packed_runs.py --device cpu --tiny --runs-per-gpu 2 --steps 4 --rounds 1   # smoke
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from experiments.launchers.manifest import Task, write_manifest
from experiments.runs import DONE

REPO = Path(__file__).resolve().parents[1]
TINY = ["model.d_model=32", "model.n_layers=2", "model.n_heads=2", "model.d_ff=64", "model.warmup_steps=2",
        "model.total_steps=40", "train.batch_size=4", "train.eval_batch_size=8"]


def round_tasks(folder: Path, args: argparse.Namespace, first_seed: int) -> list[Task]:
    """K training commands (seeds ``first_seed..``), each into its own run folder under ``folder``."""
    accelerator = "cuda" if args.device == "cuda" else "cpu"
    overrides = [f"train.max_steps={args.steps}", f"train.val_every={args.steps}", f"train.ckpt_every={args.steps}",
                 "runtime.wandb=disabled", "runtime.progress=false", f"runtime.accelerator={accelerator}",
                 f"runtime.precision={args.precision}", *(TINY if args.tiny else []), *args.override]
    tasks = []
    for i in range(args.runs_per_gpu):
        run_dir = folder / f"seed{first_seed + i}"
        argv = (sys.executable, "-m", "experiments.cli", "train", args.family, *overrides, "--preset", args.preset,
                "--seed", str(first_seed + i), "--run-dir", str(run_dir))
        tasks.append(Task(i, run_dir.name, first_seed + i, str(run_dir), argv))
    return tasks


def run_tasks(manifest: Path, n_tasks: int, per_task: int, cpus: int) -> float:
    """Wall-clock seconds of array tasks ``0..n_tasks-1`` of ``manifest`` run one after another."""
    env = {**os.environ, "SLURM_CPUS_PER_TASK": str(cpus)}
    start = time.perf_counter()
    for task in range(n_tasks):
        subprocess.run([sys.executable, "-m", "experiments.launchers.pack", str(manifest), str(task), str(per_task)],
                       cwd=REPO, env=env, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - start


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--family", default="tg")
    ap.add_argument("--preset", default="ptb")
    ap.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    ap.add_argument("--precision", default="bf16-mixed", help="runtime.precision (default bf16-mixed; cpu: 32-true)")
    ap.add_argument("--runs-per-gpu", type=int, default=4, help="K, the runs packed on the device")
    ap.add_argument("--steps", type=int, default=300, help="training steps per run")
    ap.add_argument("--rounds", type=int, default=2, help="rounds of (K unpacked, K packed) runs")
    ap.add_argument("--cpus", type=int, default=os.cpu_count() or 1, help="CPUs of the array task")
    ap.add_argument("--tiny", action="store_true", help="a tiny model (CPU smoke test)")
    ap.add_argument("override", nargs="*", help="further KEY=VALUE overrides of every run")
    args = ap.parse_args()
    if args.device == "cpu" and args.precision == "bf16-mixed":
        args.precision = "32-true"
    k = args.runs_per_gpu
    times: dict[str, list[float]] = {"unpacked": [], "packed": []}
    with tempfile.TemporaryDirectory(prefix="synbench-pack-") as tmp:
        for r in range(args.rounds):
            for mode in ("unpacked", "packed"):
                folder = Path(tmp) / f"{mode}-{r}"
                tasks = round_tasks(folder, args, first_seed=100 * r + (0 if mode == "unpacked" else 50))
                folder.mkdir(parents=True)
                manifest = folder / "manifest.jsonl"
                write_manifest(manifest, tasks)
                per_task = 1 if mode == "unpacked" else k
                times[mode].append(run_tasks(manifest, k // per_task, per_task, args.cpus))
                assert all((Path(t.run_dir) / DONE).is_file() for t in tasks), f"{mode} round {r}: a run failed"
    rate = {mode: 3600 * k * len(ts) / sum(ts) for mode, ts in times.items()}
    print(f"{args.family} {args.preset}{' (tiny)' if args.tiny else ''}, {args.steps} steps per run, "
          f"device {args.device}, precision {args.precision}, {args.cpus} CPUs, {args.rounds} rounds of {k} runs")
    for mode, ts in times.items():
        print(f"  {mode:8}: {', '.join(f'{t:.1f}' for t in ts)} s per {k} runs -> {rate[mode]:8.1f} runs/hour")
    print(f"  packed / unpacked runs per hour: {rate['packed'] / rate['unpacked']:.2f}x (K = {k})")


if __name__ == "__main__":
    main()
