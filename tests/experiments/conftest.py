"""Fixtures of the experiments tests: the real SLURM cluster fixture, shared with tests/slurm."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

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


# --- reading W&B offline run files (what `wandb sync` uploads) ---

def wandb_records(segment: Path) -> list:
    """The records of the ``run-ID.wandb`` file of an offline segment folder, as ``wandb_internal_pb2.Record``.

    The file is W&B's LevelDB-style log (wandb-core writes it; the SDK no longer ships a reader): a 7-byte header
    (``:W&B``, magic, version), then 32 KiB blocks of chunks with a 7-byte header (CRC32, length, type: 1 full,
    2 first, 3 middle, 4 last); a block tail shorter than a header is padding.
    """
    import struct

    from wandb.proto import wandb_internal_pb2

    [path] = segment.glob("run-*.wandb")
    data, block = path.read_bytes(), 32768
    assert data[:4] == b":W&B", f"{path} is not a W&B log"
    records, pos, pending = [], 7, b""
    while pos + 7 <= len(data):
        if block - pos % block < 7:
            pos += block - pos % block
            continue
        _, length, kind = struct.unpack("<IHB", data[pos:pos + 7])
        chunk, pos = data[pos + 7:pos + 7 + length], pos + 7 + length
        if kind == 0 and length == 0:
            break
        pending = chunk if kind in (1, 2) else pending + chunk
        if kind in (1, 4):
            record = wandb_internal_pb2.Record()
            record.ParseFromString(pending)
            records.append(record)
    return records


def wandb_run(segment: Path) -> tuple[Any, list[int]]:
    """(the run record, the ``trainer/global_step`` of every history row) of an offline segment."""
    run, steps = None, []
    for record in wandb_records(segment):
        kind = record.WhichOneof("record_type")
        if kind == "run":
            run = record.run
        elif kind == "history":
            items = {item.key or "/".join(item.nested_key): item.value_json for item in record.history.item}
            if "trainer/global_step" in items:
                steps.append(int(float(items["trainer/global_step"])))
    return run, steps
