"""Fault injection: a training run SIGKILLed at many points — during a step, during validation, while writing a
checkpoint, while writing ``DONE``, and at random times — and rerun with the same command each time ends with
exactly the metrics of an uninterrupted run; after every kill no checkpoint or result file is half-written.

Each attempt is a real process (this file run as a script): the kill points that need to be inside a step or
inside a write are reached by patching, in that process only, the function that runs there so that it kills
its own process with SIGKILL (no cleanup, no ``finally``): what a node failure or the OOM killer does.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
TINY = ["model.d_model=32", "model.n_layers=2", "model.n_heads=2", "model.d_ff=64", "model.warmup_steps=4",
        "model.total_steps=40", "train.batch_size=4", "train.eval_batch_size=8", "train.log_every=1",
        "train.max_steps=24", "train.val_every=8", "train.ckpt_every=4", "runtime.wandb=disabled",
        "runtime.progress=false", "runtime.threads=1"]


def _die() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def _attempt(point: str, config_json: str, run_dir: str) -> None:
    """One training attempt, killed at ``point`` (``none``: runs to the end)."""
    import torch
    from pytorch_lightning import Callback

    import lightning_modules.data.atomic as atomic
    from experiments.train import train

    callbacks = []
    kind, _, arg = point.partition(":")
    if kind == "step":  # between the forward and the backward pass of training step N
        class InStep(Callback):
            def on_before_backward(self, trainer, *args):
                if trainer.global_step == int(arg):
                    _die()
        callbacks.append(InStep())
    elif kind == "validation":  # after the first validation batch of the validation at step N
        class InValidation(Callback):
            def on_validation_batch_end(self, trainer, *args):
                if trainer.global_step == int(arg):
                    _die()
        callbacks.append(InValidation())
    elif kind in ("checkpoint", "done"):  # half-way through writing the Nth checkpoint / the DONE file
        real_save, real_write = torch.save, atomic.atomic_write_with
        count = {"n": 0}

        def half_then_die(data: bytes, f) -> None:
            f.write(data[: len(data) // 2])
            f.flush()
            os.fsync(f.fileno())
            _die()

        def save(obj, f, *args, **kwargs):
            count["n"] += 1
            if kind == "checkpoint" and count["n"] == int(arg) and hasattr(f, "write"):
                import io

                buffer = io.BytesIO()
                real_save(obj, buffer, *args, **kwargs)
                half_then_die(buffer.getvalue(), f)
            return real_save(obj, f, *args, **kwargs)

        def write_with(path, write):
            if kind == "done" and Path(path).name == "DONE":
                import io

                buffer = io.BytesIO()
                write(buffer)
                return real_write(path, lambda f: half_then_die(buffer.getvalue(), f))
            return real_write(path, write)

        torch.save = save
        atomic.atomic_write_with = write_with
    train(json.loads(config_json), seed=3, run_dir=Path(run_dir), callbacks=callbacks)


def run_attempt(config: dict, run_dir: Path, point: str = "none") -> subprocess.Popen:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(REPO)}
    return subprocess.Popen([sys.executable, __file__, point, json.dumps(config), str(run_dir)], cwd=REPO, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


def assert_nothing_half_written(run_dir: Path) -> None:
    from experiments.checkpoints import read_checkpoint

    for ckpt in run_dir.glob("checkpoints/*.ckpt"):
        read_checkpoint(ckpt, "tg")  # a complete torch file with its metadata
    for name in ("DONE", "config.json"):
        if (run_dir / name).exists():
            json.loads((run_dir / name).read_text())


@pytest.fixture(scope="module")
def config(tiny_treebank) -> dict:
    from experiments.config import resolve_train_config

    return resolve_train_config("tg", "cpu-small", TINY + [
        f"data.corpus={tiny_treebank}", "data.train_split=file", "data.valid_split=file"])


@pytest.fixture(scope="module")
def uninterrupted(config, tmp_path_factory) -> dict:
    run_dir = tmp_path_factory.mktemp("uninterrupted") / "run"
    attempt = run_attempt(config, run_dir)
    assert attempt.wait(600) == 0, attempt.stderr.read()[-3000:]
    return json.loads((run_dir / "DONE").read_text())


KILL_POINTS = ["step:5", "validation:8", "checkpoint:3", "step:13", "validation:16", "checkpoint:2", "done"]


def test_killed_at_chosen_points(config, uninterrupted, tmp_path):
    """One run folder, killed at each point in turn (a later point is reached by the resumed attempt)."""
    run_dir = tmp_path / "run"
    for point in KILL_POINTS:
        attempt = run_attempt(config, run_dir, point)
        code = attempt.wait(600)
        assert code == -signal.SIGKILL, f"{point}: exit {code} (the kill point was not reached)\n" \
                                        f"{attempt.stderr.read()[-3000:]}"
        assert_nothing_half_written(run_dir)
        assert not (run_dir / "DONE").exists(), point
    attempt = run_attempt(config, run_dir)
    assert attempt.wait(600) == 0, attempt.stderr.read()[-3000:]
    assert json.loads((run_dir / "DONE").read_text()) == uninterrupted
    assert not list(run_dir.rglob(".*.tmp"))  # the temporaries of killed writes are cleaned up


def test_killed_at_random_times(config, uninterrupted, tmp_path):
    run_dir = tmp_path / "run"
    rng = random.Random(13)
    for _ in range(2):
        attempt = run_attempt(config, run_dir)
        time.sleep(rng.uniform(3.0, 12.0))  # start-up takes a few seconds; training a few more
        attempt.send_signal(signal.SIGKILL)
        attempt.wait(60)
        assert_nothing_half_written(run_dir)
    attempt = run_attempt(config, run_dir)
    assert attempt.wait(600) == 0, attempt.stderr.read()[-3000:]
    assert json.loads((run_dir / "DONE").read_text()) == uninterrupted


if __name__ == "__main__":
    _attempt(*sys.argv[1:4])
