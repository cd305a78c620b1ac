"""Runs per hour on one device: K small runs packed side by side (``--runs-per-gpu K``), with and without MPS,
vs solo runs one at a time.

Each measurement trains fresh runs (seeds differ) through ``experiments.launchers.pack`` exactly as an array
task does. The reference is solo: one run per task (K = 1 packs nothing: the packer becomes the run), runs
one after another. Packed: one task running K runs as K processes at once, for each K of ``--runs-per-gpu``.
With ``--mps`` (CUDA only) every K is measured a second time with the task under its own NVIDIA MPS control
daemon, started and stopped by ``slurm/with-mps.sh`` as the sbatch script does (``launcher.slurm.mps``), so
the K processes share the GPU through one MPS server instead of time-slicing it. Each round measures solo,
then for each K packed and packed under MPS, so all see the same machine state; every measurement is printed
as it ends (a time limit still leaves the rows measured) and the totals last. Wall-clock includes each
process's start-up, data loading and final metrics, as in a real array task. Meant for a GPU (``--device
cuda``, the ``ptb`` preset: a 12M-parameter model leaves an H100 mostly idle); on CPU it is a smoke test (the
runs compete for the same cores).

    python benchmarks/packed_runs.py --device cuda --preset ptb --runs-per-gpu 1 2 4 8 --mps --steps 300
    python benchmarks/packed_runs.py --device cpu --tiny --runs-per-gpu 2 --steps 4 --rounds 1   # smoke
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from experiments.launchers.manifest import Task, write_manifest
from experiments.launchers.slurm import WITH_MPS
from experiments.runs import DONE

REPO = Path(__file__).resolve().parents[1]
TINY = ["model.d_model=32", "model.n_layers=2", "model.n_heads=2", "model.d_ff=64", "model.warmup_steps=2",
        "model.total_steps=40", "train.batch_size=4", "train.eval_batch_size=8"]


def round_tasks(folder: Path, args: argparse.Namespace, first_seed: int, k: int) -> list[Task]:
    """K training commands (seeds ``first_seed..``), each into its own run folder under ``folder``."""
    accelerator = "cuda" if args.device == "cuda" else "cpu"
    overrides = [f"train.max_steps={args.steps}", f"train.val_every={args.steps}", f"train.ckpt_every={args.steps}",
                 "runtime.wandb=disabled", "runtime.progress=false", f"runtime.accelerator={accelerator}",
                 f"runtime.precision={args.precision}", *(TINY if args.tiny else []), *args.override]
    tasks = []
    for i in range(k):
        run_dir = folder / f"seed{first_seed + i}"
        argv = (sys.executable, "-m", "experiments.cli", "train", args.family, *overrides, "--preset", args.preset,
                "--seed", str(first_seed + i), "--run-dir", str(run_dir))
        tasks.append(Task(i, run_dir.name, first_seed + i, str(run_dir), argv))
    return tasks


def run_tasks(manifest: Path, n_tasks: int, per_task: int, cpus: int, mps: bool = False) -> float:
    """Wall-clock seconds of array tasks ``0..n_tasks-1`` of ``manifest`` run one after another (each under its
    own MPS daemon with ``mps``)."""
    env = {**os.environ, "SLURM_CPUS_PER_TASK": str(cpus)}
    env.pop("SLURM_JOB_ID", None)  # not a SLURM task: the packer requeues nothing, the MPS folder is per process
    wrapper = ["bash", str(WITH_MPS)] if mps else []
    start = time.perf_counter()
    for task in range(n_tasks):
        subprocess.run([*wrapper, sys.executable, "-m", "experiments.launchers.pack", str(manifest), str(task),
                        str(per_task)], cwd=REPO, env=env, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - start


def measure(tmp: Path, args: argparse.Namespace, mode: str, k: int, first_seed: int) -> float:
    """Seconds for K fresh runs: ``solo`` (one task per run, one after another), ``packed`` (one task of K
    runs) or ``mps`` (packed, under an MPS daemon); every run must end ``DONE``."""
    folder = tmp / f"{mode}-k{k}-s{first_seed}"
    folder.mkdir(parents=True)
    tasks = round_tasks(folder, args, first_seed, k)
    manifest = folder / "manifest.jsonl"
    write_manifest(manifest, tasks)
    per_task = 1 if mode == "solo" else k
    seconds = run_tasks(manifest, k // per_task, per_task, args.cpus, mps=mode == "mps")
    assert all((Path(t.run_dir) / DONE).is_file() for t in tasks), f"{mode} K={k}: a run failed"
    return seconds


def main(argv: list[str] | None = None) -> dict[tuple[str, int], float]:
    """Measure and print; returns runs/hour of each (mode, K) (``("solo", 1)``: the reference)."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--family", default="tg")
    ap.add_argument("--preset", default="ptb")
    ap.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    ap.add_argument("--precision", default="bf16-mixed", help="runtime.precision (default bf16-mixed; cpu: 32-true)")
    ap.add_argument("--runs-per-gpu", type=int, nargs="+", default=[1, 2, 4, 8], metavar="K",
                    help="the K to measure, runs packed on the device (default 1 2 4 8)")
    ap.add_argument("--mps", action="store_true", help="also measure each K under an MPS daemon (CUDA only)")
    ap.add_argument("--steps", type=int, default=300, help="training steps per run")
    ap.add_argument("--rounds", type=int, default=2, help="rounds of (solo, then each K packed [and under MPS])")
    ap.add_argument("--cpus", type=int, default=os.cpu_count() or 1, help="CPUs of the array task")
    ap.add_argument("--tiny", action="store_true", help="a tiny model (CPU smoke test)")
    ap.add_argument("override", nargs="*", help="further KEY=VALUE overrides of every run")
    args = ap.parse_args(argv)
    if any(k < 1 for k in args.runs_per_gpu):
        ap.exit(2, "synbench: error: --runs-per-gpu: every K must be a positive integer\n")
    if args.mps and args.device != "cuda":
        ap.exit(2, "synbench: error: --mps: MPS shares an NVIDIA GPU between processes; it needs --device cuda\n")
    if args.mps and shutil.which("nvidia-cuda-mps-control") is None:
        ap.exit(2, "synbench: error: --mps: nvidia-cuda-mps-control is not on PATH (the NVIDIA driver's MPS tools)\n")
    if args.device == "cpu" and args.precision == "bf16-mixed":
        args.precision = "32-true"
    ks = sorted(set(args.runs_per_gpu))
    modes = ["packed", "mps"] if args.mps else ["packed"]
    seconds: dict[tuple[str, int], list[float]] = {}
    print(f"{args.family} {args.preset}{' (tiny)' if args.tiny else ''}, {args.steps} steps per run, "
          f"device {args.device}, precision {args.precision}, {args.cpus} CPUs, {args.rounds} rounds, "
          f"K = {' '.join(map(str, ks))}{', with and without MPS' if args.mps else ''}", flush=True)
    with tempfile.TemporaryDirectory(prefix="synbench-pack-") as tmp:
        seed = 0
        for r in range(args.rounds):
            plan = [("solo", 1)] + [(mode, k) for k in ks for mode in modes if (mode, k) != ("packed", 1)]
            for mode, k in plan:  # packed K = 1 is the solo run itself
                took = measure(Path(tmp), args, mode, k, seed)
                seed += k
                seconds.setdefault((mode, k), []).append(took)
                print(f"  round {r}: {mode:6} K={k}: {took:7.1f} s for {k} run(s)", flush=True)
    rate = {key: 3600 * key[1] * len(ts) / sum(ts) for key, ts in seconds.items()}
    solo = rate[("solo", 1)]
    print(f"  solo (reference): {solo:8.1f} runs/hour")
    for mode, k in seconds:
        if mode != "solo":
            label = "packed under MPS" if mode == "mps" else "packed"
            print(f"  {label:16} K={k}: {rate[(mode, k)]:8.1f} runs/hour -> {rate[(mode, k)] / solo:.2f}x solo")
    return rate


if __name__ == "__main__":
    main()
