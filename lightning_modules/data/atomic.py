"""Atomic file writes: write to a temporary file in the same folder, fsync, then rename.

Results, checkpoints and staged data are never seen half-written, even when a job is killed mid-write.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from pathlib import Path


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Replace ``path`` with ``data`` atomically."""
    atomic_write_with(path, lambda f: f.write(data))


def atomic_write_text(path: Path, text: str) -> None:
    """Replace ``path`` with UTF-8 ``text`` atomically."""
    atomic_write_bytes(path, text.encode("utf-8"))


def atomic_write_with(path: Path, write: Callable) -> None:
    """Call ``write(binary_file)`` on a temporary file, then rename it over ``path``."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise


def remove_temporaries(folder: Path) -> None:
    """Delete the temporary files of atomic writes in ``folder`` that a killed process left behind (call it
    only where no other process writes at the same time, e.g. a run's own folder when the run starts)."""
    for tmp in Path(folder).glob(".*.tmp"):
        tmp.unlink(missing_ok=True)
