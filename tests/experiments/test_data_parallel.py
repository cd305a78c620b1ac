"""Data-parallel training through Lightning: two real CPU processes (DDP over gloo), each on half of every
step's batch, follow the loss trajectory of one process on the whole batch and end with the same weights."""

from __future__ import annotations

import csv
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from experiments.batching import StepBatches
from experiments.train import trainer_hardware
from lightning_modules.errors import InputError
from tests.experiments.conftest import TINY_MODEL

REPO = Path(__file__).resolve().parents[2]
STEPS = 6


def test_ranks_split_the_global_batch_of_one_process():
    examples = list(range(50))
    one = StepBatches(examples, 8, seed=3, collate=list)
    halves = [StepBatches(examples, 4, seed=3, collate=list, rank=r, world=2) for r in (0, 1)]
    for whole, first, second in zip(_take(one, 9), _take(halves[0], 9), _take(halves[1], 9)):
        assert whole == first + second
    with pytest.raises(ValueError, match="rank 2"):
        StepBatches(examples, 4, seed=3, collate=list, rank=2, world=2)


def _take(batches: StepBatches, n: int) -> list:
    it = iter(batches)
    return [next(it) for _ in range(n)]


@pytest.mark.parametrize("runtime, where", [
    ({"precision": "fp8"}, "runtime.precision"),
    ({"devices": 0}, "runtime.devices"),
])
def test_bad_runtime_is_one_error_naming_the_key(runtime, where):
    with pytest.raises(InputError) as e:
        trainer_hardware(runtime)
    assert e.value.location == where


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the message of a machine without CUDA")
def test_cuda_accelerator_without_cuda_is_one_error():
    with pytest.raises(InputError, match="CUDA is not available") as e:
        trainer_hardware({"accelerator": "cuda"})
    assert e.value.location == "runtime.accelerator"


def _train(tiny_treebank: Path, run_dir: Path, batch_size: int, devices: int) -> subprocess.CompletedProcess:
    model = {**TINY_MODEL, "embedding_dropout": 0.0, "core_dropout": 0.0, "core_output_dropout": 0.0,
             "attention_dropout": 0.0}
    overrides = [f"model.{k}={v}" for k, v in model.items()] + [
        f"data.corpus={tiny_treebank}", "data.train_split=file", "data.valid_split=file",
        f"train.batch_size={batch_size}", f"train.max_steps={STEPS}", f"train.val_every={STEPS}",
        f"train.ckpt_every={STEPS}", "train.log_every=1", "train.eval_batch_size=8",
        "runtime.wandb=disabled", "runtime.progress=false", "runtime.threads=1", "runtime.accelerator=cpu",
        f"runtime.devices={devices}", f"runtime.strategy={'ddp' if devices > 1 else 'auto'}",
    ]
    return subprocess.run([sys.executable, "-m", "experiments.cli", "train", "tg", *overrides, "--seed", "1",
                           "--run-dir", str(run_dir)], cwd=REPO, capture_output=True, text=True, timeout=600)


def _losses(run_dir: Path) -> list[float]:
    with open(run_dir / "csv" / "version_0" / "metrics.csv") as f:
        rows = [r for r in csv.DictReader(f) if r.get("train/loss")]
    return [float(r["train/loss"]) for r in sorted(rows, key=lambda r: int(r["step"]))]


def test_two_gloo_processes_follow_one_process_on_the_doubled_batch(tiny_treebank, tmp_path):
    one = _train(tiny_treebank, tmp_path / "one", batch_size=8, devices=1)
    assert one.returncode == 0, one.stderr[-3000:]
    two = _train(tiny_treebank, tmp_path / "two", batch_size=4, devices=2)
    assert two.returncode == 0, two.stderr[-3000:]
    assert "gloo" in two.stderr + two.stdout or "Initializing distributed" in two.stderr + two.stdout

    expected, got = _losses(tmp_path / "one"), _losses(tmp_path / "two")
    assert len(expected) == STEPS and len(got) == STEPS
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)
    assert expected[-1] < expected[0]  # it trains

    weights = [torch.load(d / "checkpoints" / "last.ckpt", weights_only=True)["state_dict"]
               for d in (tmp_path / "one", tmp_path / "two")]
    assert weights[0].keys() == weights[1].keys()
    for name, value in weights[0].items():
        if "relative_keys" in name:
            # Adam moves every entry by about the learning rate whatever its gradient's size: entries of the
            # position projection whose gradient is at rounding level (sums in another order) may differ
            # there; all others agree to rounding.
            assert (weights[1][name] - value).abs().median() < 1e-6, name
        else:
            torch.testing.assert_close(weights[1][name], value, rtol=0, atol=1e-6, msg=name)
    assert (tmp_path / "two" / "DONE").is_file()


@pytest.mark.slurm
def test_two_processes_train_in_one_slurm_task(slurm_cluster, tmp_path, tiny_spec):
    """In an array task (one SLURM task per run) the run starts its second process itself: Lightning's own
    environment, not SLURM's, which would expect one SLURM task per device."""
    import yaml

    from experiments.experiment_runs import experiment_runs, folder_of
    from experiments.experiment_spec import load_spec
    from experiments.runs import run_status

    path = tiny_spec(seeds="0", steps=4)
    spec = yaml.safe_load(path.read_text())
    spec["models"][0]["overrides"]["runtime"].update(devices=2, strategy="ddp", accelerator="cpu", threads=1)
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    root = tmp_path / "runs"
    done = subprocess.run([sys.executable, "-m", "experiments.cli", "submit", str(path), "--executor", "slurm",
                           "--runs-dir", str(root), "--wait"], cwd=REPO, capture_output=True, text=True, timeout=600)
    [run] = experiment_runs(load_spec(path))
    logs = "".join(p.read_text() for p in (root / "exp" / "logs").glob("slurm-*.out"))
    assert done.returncode == 0, done.stdout + done.stderr + logs[-3000:]
    assert run_status(folder_of(root, run)).metrics["global_step"] == 4
    assert "distributed_backend=gloo" in logs and "All distributed processes registered" in logs
