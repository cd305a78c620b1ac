"""What a run cost to train (``experiments.training_cost``), recorded by the harness for every run: parameters
and device in ``DONE``, the finishing attempt's speed in ``TIMING`` (so ``DONE`` stays the same across attempts)."""

from __future__ import annotations

import json

from experiments.config import resolve_train_config
from experiments.runs import ATTEMPT_TIMING, read_timing
from experiments.train import train


def test_done_records_parameters_and_device_timing_the_speed(tmp_path, tiny_treebank):
    cfg = resolve_train_config("txl-terminals", "cpu-small", [
        f"data.corpus={tiny_treebank}", "data.train_split=file", "data.valid_split=file", "model.d_model=16",
        "model.n_layers=1", "model.n_heads=2", "model.d_ff=32", "train.max_steps=3", "train.val_every=3",
        "train.ckpt_every=3", "train.batch_size=2", "runtime.wandb=disabled", "runtime.progress=false"])
    metrics = train(cfg, 0, tmp_path / "run")
    done = json.loads((tmp_path / "run" / "DONE").read_text())
    assert done == metrics and done["device"].startswith("cpu (") and done["parameters"] > 0
    assert not set(done) & set(ATTEMPT_TIMING)
    timing = read_timing(tmp_path / "run")
    assert timing["train_steps_timed"] == 3 and timing["train_seconds"] > 0
    assert abs(timing["train_steps_per_s"] * timing["train_seconds"] - 3) < 1e-9
    mean_length = done["train_tokens"] / done["train_sequences"]
    assert abs(timing["train_tokens_per_s"] - timing["train_steps_per_s"] * 2 * mean_length) < 1e-6
    # a finished run is not trained again: its record stays as it was
    assert train(cfg, 0, tmp_path / "run") == done and read_timing(tmp_path / "run") == timing
