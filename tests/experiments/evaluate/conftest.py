"""Fixtures of the evaluator tests: a tiny string model trained here, scored by the tasks from data files."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def tiny_lm(tmp_path_factory: pytest.TempPathFactory, tiny_treebank: Path) -> Path:
    """The best checkpoint of a TXL (terminals) model trained for 4 steps on 40 PTB-sample trees (about a second)."""
    from experiments.train import train
    from tests.experiments.test_train import config

    run = tmp_path_factory.mktemp("tiny-lm") / "run"
    train(config("txl-terminals", tiny_treebank, "train.max_steps=4", "train.val_every=4", "train.ckpt_every=4",
                 "data.min_count=1"), seed=0, run_dir=run)
    return run / "checkpoints" / "best.ckpt"
