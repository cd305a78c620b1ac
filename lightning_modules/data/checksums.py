"""File checksums: the sha256 that identifies models, data and caches in results."""

from __future__ import annotations

import hashlib
from pathlib import Path


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
