"""Fixtures of the experiments tests: the real SLURM cluster fixture, shared with tests/slurm."""

from __future__ import annotations

import importlib.util
from pathlib import Path

# tests/ is not a package, so the fixture module is loaded by path (one definition for both folders).
_spec = importlib.util.spec_from_file_location(
    "synbench_slurm_fixtures", Path(__file__).resolve().parents[1] / "slurm" / "conftest.py"
)
_fixtures = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_fixtures)
slurm_cluster = _fixtures.slurm_cluster
postgres_url = _fixtures.postgres_url


# --- tiny experiments for the orchestration tests (submit, status, aggregate, sync, tune) ---

import pytest  # noqa: E402

TINY_MODEL = {"d_model": 32, "n_layers": 2, "n_heads": 2, "d_ff": 64, "warmup_steps": 4, "total_steps": 40}


@pytest.fixture(scope="session")
def tiny_treebank(tmp_path_factory, shared_data) -> Path:
    """40 trees of the PTB sample in one file: data loading in well under a second."""
    from lightning_modules.data.tree import read_bracketed, to_bracketed

    trees = [t for f in ("wsj_0001.mrg", "wsj_0002.mrg", "wsj_0003.mrg", "wsj_0004.mrg")
             for _, t in read_bracketed(shared_data / "ptb_nltk_sample" / "combined" / f)]
    path = tmp_path_factory.mktemp("tiny-tb") / "tiny.mrg"
    path.write_text("".join(to_bracketed(t) + "\n" for t in trees[:40]))
    return path


def write_tiny_spec(path: Path, treebank: Path, families=("tg",), seeds="0-3", steps: int = 8,
                    wandb: str = "disabled", tune: dict | None = None, **launcher) -> Path:
    """An experiment spec of tiny models on ``treebank`` (``steps`` training steps, validation and checkpoints
    every ``steps // 2``), written to ``path``."""
    import yaml

    overrides = {
        "model": TINY_MODEL,
        "train": {"max_steps": steps, "val_every": steps // 2, "ckpt_every": steps // 2, "batch_size": 4,
                  "eval_batch_size": 8, "log_every": 1},
        "data": {"corpus": str(treebank), "train_split": "file", "valid_split": "file"},
        "runtime": {"wandb": wandb, "progress": False},
    }
    spec = {
        "models": [{"family": f, "preset": "cpu-small", "overrides": overrides} for f in families],
        "seeds": seeds,
        "launcher": {"local": {"max_parallel": 2},
                     "slurm": {"time": "00:10:00", "mem": "1G", "max_parallel": 2}, **launcher},
    }
    if tune is not None:
        spec["tune"] = tune
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


@pytest.fixture
def tiny_spec(tmp_path, tiny_treebank):
    """``tiny_spec(name, **options)`` writes ``tmp_path/NAME.yaml`` (see ``write_tiny_spec``)."""
    return lambda name="exp", **options: write_tiny_spec(tmp_path / f"{name}.yaml", tiny_treebank, **options)
