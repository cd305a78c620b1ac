"""Checkpoint metadata and safe loading.

Every checkpoint records, under the ``synbench`` key, the model family, the resolved config, the seed and the
vocabularies, so a checkpoint is self-contained for evaluation. Loading uses ``torch.load(weights_only=True)``
(no arbitrary code from a file) and refuses a checkpoint of another family with a clear error. Writing goes
through ``AtomicCheckpointIO``: a killed process never leaves a half-written checkpoint.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytorch_lightning as pl
import torch
from lightning_fabric.plugins.io.torch_io import TorchCheckpointIO

from lightning_modules.data.atomic import atomic_write_with
from lightning_modules.errors import InputError

FORMAT_VERSION = 1


class AtomicCheckpointIO(TorchCheckpointIO):
    """Checkpoints written like every synbench result: a temporary file in the checkpoint's own folder,
    fsync, rename. Lightning's writer stages the file in the system temporary folder and moves it, which is a
    copy, not a rename, when runs live on another file system (a cluster's shared storage): a job killed then
    leaves a truncated ``last.ckpt``, and every killed write a full-size orphan in ``/tmp``."""

    def save_checkpoint(self, checkpoint: dict[str, Any], path: str | Path, storage_options: Any = None) -> None:
        atomic_write_with(Path(path), lambda f: torch.save(checkpoint, f))


class Metadata(pl.Callback):
    """Adds ``checkpoint["synbench"]`` = family, config, seed and vocabularies to every saved checkpoint."""

    def __init__(self, family: str, config: dict[str, Any], seed: int, vocab: dict[str, Any]):
        self.payload = {"format": FORMAT_VERSION, "family": family, "config": config, "seed": seed,
                        "vocab": vocab}

    def on_save_checkpoint(self, trainer: pl.Trainer, pl_module: pl.LightningModule,
                           checkpoint: dict[str, Any]) -> None:
        checkpoint["synbench"] = self.payload


def read_checkpoint(path: str | Path, family: str | tuple[str, ...] | None = None) -> dict[str, Any]:
    """Load a synbench checkpoint safely; ``family`` (one or several) must match the recorded one. Memory-mapped:
    a tensor is read from disk only when used, so reading the metadata (or the weights without the optimizer
    state) costs little."""
    path = Path(path)
    if not path.is_file():
        raise InputError("checkpoint not found", str(path))
    try:
        ckpt = torch.load(path, map_location="cpu", weights_only=True, mmap=True)
    except Exception as e:  # corrupted, truncated, or not a torch file at all
        raise InputError(f"cannot read checkpoint ({type(e).__name__}: {str(e).splitlines()[0][:120]})",
                         str(path)) from None
    meta = ckpt.get("synbench") if isinstance(ckpt, dict) else None
    if not isinstance(meta, dict) or "family" not in meta:
        raise InputError("not a synbench checkpoint (no 'synbench' metadata)", str(path))
    wanted = (family,) if isinstance(family, str) else family
    if wanted is not None and meta["family"] not in wanted:
        raise InputError(f"checkpoint is a '{meta['family']}' model; expected {' or '.join(wanted)}", str(path))
    return ckpt
