"""A disk cache of dependency conversions, so a process that reads ``NAME-sd``/``NAME-ud``/``NAME-dep`` does not
re-run the converter over the whole treebank (about 1.7 s for the PTB sample, in every training and
evaluation process that loads it).

An entry is keyed by the sha256 of the treebank file's bytes and its path (every tree's location names it),
the scheme, and the sha256 of the converters'
own source files, so editing a file or a conversion rule can never serve a stale tree. Entries are JSON (never
pickle: a cache file is data, not code), written atomically; an entry that does not read back (truncated,
edited, another format) is converted again and replaced. The folder is ``$SYNBENCH_CACHE/converted``, else
``~/.cache/synbench/converted``.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable
from dataclasses import fields
from functools import cache
from pathlib import Path
from typing import Any

from lightning_modules.data.atomic import atomic_write_text
from lightning_modules.data.dependency import DepTree

# DepTree fields stored per sentence (all tuples of strings or ints, except extra_rows: tuples of tuples)
_FIELDS = tuple(f.name for f in fields(DepTree))
# the modules whose code decides a converted tree: a change to any of them starts a new cache key
_CONVERTER_SOURCES = ("dependency_schemes", "head_rules.py", "dependency.py", "tree.py")


def cache_dir() -> Path:
    """``$SYNBENCH_CACHE/converted``, else ``~/.cache/synbench/converted``."""
    root = os.environ.get("SYNBENCH_CACHE")
    return (Path(root).expanduser() if root else Path.home() / ".cache" / "synbench") / "converted"


@cache
def converter_digest() -> str:
    """sha256 over the converters' source files, in a fixed order."""
    here = Path(__file__).parent
    digest = hashlib.sha256()
    for name in _CONVERTER_SOURCES:
        path = here / name
        for file in sorted(path.rglob("*.py")) if path.is_dir() else [path]:
            digest.update(file.relative_to(here).as_posix().encode() + b"\0" + file.read_bytes() + b"\0")
    return digest.hexdigest()


def cached_conversion(path: Path, scheme: str, convert: Callable[[], tuple[Any, ...]],
                      document: Callable[[str, tuple], Any]) -> tuple[Any, ...]:
    """The documents ``convert()`` gives for treebank ``path`` in ``scheme``, read from the disk cache when an
    entry for this file, scheme and converter exists; otherwise converted and stored. ``document(name,
    sentences)`` rebuilds a document from its stored name and ``(location, DepTree)`` pairs."""
    parts = [path.read_bytes(), str(path).encode(), scheme.encode(), converter_digest().encode()]
    key = hashlib.sha256(b"\0".join(parts)).hexdigest()  # the path too: locations ("FILE:LINE") name it
    entry = cache_dir() / f"{key}.json"
    try:
        stored = json.loads(entry.read_text(encoding="utf-8"))
        return tuple(document(d["name"], tuple((loc, _tree(t)) for loc, t in d["sentences"])) for d in stored)
    except (OSError, ValueError, KeyError, TypeError):
        pass  # no entry, or one that does not read back: convert and (re)write it
    documents = convert()
    stored = [{"name": d.name, "sentences": [[loc, _row(t)] for loc, t in d.sentences]} for d in documents]
    try:
        atomic_write_text(entry, json.dumps(stored, separators=(",", ":")))
    except OSError:
        pass  # a read-only or full cache folder costs time, never the result
    return documents


def _row(tree: DepTree) -> dict[str, list]:
    return {name: list(getattr(tree, name)) for name in _FIELDS}


def _tree(row: dict[str, list]) -> DepTree:
    values = {name: tuple(row[name]) for name in _FIELDS}
    values["extra_rows"] = tuple(tuple(r) for r in values["extra_rows"])
    tree = DepTree(**values)
    if len(tree.heads) != len(tree.forms) or not all(isinstance(h, int) for h in tree.heads):
        raise ValueError("malformed cache entry")
    return tree
