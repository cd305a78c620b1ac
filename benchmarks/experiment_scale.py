"""Experiments of thousands of runs: ``status``, ``aggregate`` and ``analyze`` on 2,000 run folders.

Generates an experiment of 4 models x 500 seeds (the shape of a many-seed study) in a temporary folder: every
run finished (``DONE``) with perplexity, SyntaxGym and BLiMP results (``eval/TASK/results.json``, synthetic
numbers). Times each command as a user runs it (a new process, imports included) against the reference of
the minimum work, measured in the same run: a plain-Python loop reading every ``DONE`` and ``results.json``
file, plus the interpreter start-up with the same imports (``python -c 'import pandas, scipy'``).

    python benchmarks/experiment_scale.py [--seeds 500] [--models 4]
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

from experiments.experiment_runs import experiment_runs, folder_of
from experiments.experiment_spec import load_spec
from experiments.runs import write_done

REPO = Path(__file__).resolve().parents[1]
SG_CIRCUITS = ("agreement", "licensing", "garden_path_effects", "gross_syntactic_state", "center_embedding",
               "long_distance_dependencies")
BLIMP_PHENOMENA = ("anaphor_agreement", "argument_structure", "binding", "control_raising", "island_effects")


def write_experiment(folder: Path, models: int, seeds: int) -> Path:
    """The spec and every run folder of a finished experiment with synthetic results; returns the spec."""
    spec = folder / "scale.yaml"
    spec.write_text(yaml.safe_dump({
        "description": f"{models} models x {seeds} seeds, synthetic results (benchmarks/experiment_scale.py)",
        "models": [{"name": f"tg-{k}", "family": "tg", "overrides": {"model": {"n_layers": 2 + k}}}
                   for k in range(models)],
        "seeds": f"0-{seeds - 1}",
        "analysis": {"regressions": None, "probing": None},
    }, sort_keys=False))
    rng = random.Random(0)
    for run in experiment_runs(load_spec(spec)):
        run_dir = folder_of(folder / "runs", run)
        results = {
            "ppl": {"word_ppl": rng.gauss(200, 10), "oov_rate": 0.02},
            "sg": {"score": rng.uniform(0.4, 0.9), "circuits": {c: rng.uniform(0, 1) for c in SG_CIRCUITS}},
            "blimp": {"accuracy": rng.uniform(0.5, 0.8), "phenomena": {p: rng.uniform(0, 1) for p in BLIMP_PHENOMENA}},
        }
        for task, metrics in results.items():
            (run_dir / "eval" / task).mkdir(parents=True)
            (run_dir / "eval" / task / "results.json").write_text(json.dumps(
                {"task": task, "metrics": metrics, "convention": "synthetic", "settings": {}}))
        write_done(run_dir, {"best_val_loss": rng.gauss(5, 0.1), "global_step": 1000, "family": "tg",
                             "seed": run.seed, "val_token_ppl": 150.0})
    return spec


def timed(*argv: str) -> float:
    before = time.perf_counter()
    subprocess.run([sys.executable, *argv], cwd=REPO, check=True, capture_output=True, text=True)
    return time.perf_counter() - before


def reference(spec: Path, root: Path) -> float:
    """Reading every DONE and results.json file of the experiment, in this process."""
    before = time.perf_counter()
    n = 0
    for run in experiment_runs(load_spec(spec)):
        run_dir = folder_of(root, run)
        json.loads((run_dir / "DONE").read_text())
        n += sum(1 for path in run_dir.glob("eval/*/results.json") if json.loads(path.read_text()))
    assert n > 0
    return time.perf_counter() - before


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=500)
    ap.add_argument("--models", type=int, default=4)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="synbench-scale-") as tmp:
        spec = write_experiment(Path(tmp), args.models, args.seeds)
        root = Path(tmp) / "runs"
        n = args.models * args.seeds
        startup = timed("-c", "import pandas, scipy, pyarrow")
        read = reference(spec, root)
        cli = ["-m", "experiments.cli"]
        rows = [
            ("status --json --no-scheduler", timed(*cli, "status", str(spec), "--runs-dir", str(root), "--json",
                                                   "--no-scheduler")),
            ("aggregate", timed(*cli, "aggregate", str(spec), "--runs-dir", str(root))),
            ("analyze --wandb disabled", timed(*cli, "analyze", str(spec), "--runs-dir", str(root),
                                              "--wandb", "disabled")),
            ("report", timed(*cli, "report", str(spec), "--runs-dir", str(root))),
        ]
        print(f"experiment of {n} run folders ({args.models} models x {args.seeds} seeds, 3 evaluations each)")
        print(f"reference: reading every DONE and results.json in-process {read:.2f} s; "
              f"interpreter start-up with pandas/scipy/pyarrow {startup:.2f} s")
        for name, seconds in rows:
            print(f"  synbench {name:<30} {seconds:6.2f} s  ({seconds / (read + startup):.1f}x the reference)")


if __name__ == "__main__":
    main()
