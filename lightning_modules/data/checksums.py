"""File checksums: the sha256 that identifies models, data and caches in results."""

from __future__ import annotations

import hashlib
from pathlib import Path

from lightning_modules.errors import InputError


def file_sha256(path: str | Path) -> str:
    """sha256 of a file's bytes, or of a folder as the sorted list of its files' relative paths and sha256s."""
    path = Path(path)
    if path.is_dir():
        files = [p for p in sorted(path.rglob("*")) if p.is_file()]
        listing = "".join(f"{p.relative_to(path).as_posix()}\t{file_sha256(p)}\n" for p in files)
        return hashlib.sha256(listing.encode("utf-8")).hexdigest()
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def check_sha256(path: str | Path, expected: str) -> None:
    """An ``InputError`` at ``path`` unless its sha256 (``file_sha256``) is ``expected``: a data file an evaluation
    plan hashed (and named in its command) that changed before the command ran is never scored as planned."""
    found = file_sha256(path)
    if found != expected.lower():
        raise InputError(f"changed since the evaluation was planned (sha256 {found[:12]}..., planned "
                         f"{expected[:12]}...): plan it again", str(path))
