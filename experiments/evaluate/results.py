"""Result files of an evaluation, in the spirit of lm-evaluation-harness.

``results.json`` holds the metric values, the exact scoring convention, the settings that scale the
protocol (N proposals, beam size, subset sizes — so a scaled-down run is never mistaken for the paper's),
package versions, the config hash, checksums of the data read and the git commit. ``items.jsonl`` holds
one JSON object per evaluated item. Both are written atomically: a killed job leaves the previous files
or none, never half a file.
"""

from __future__ import annotations

import hashlib
import json
import platform
import subprocess
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path

from lightning_modules.data.atomic import atomic_write_text, atomic_write_with
from lightning_modules.data.checksums import file_sha256

PACKAGES = ("synbench", "torch", "pytorch-lightning", "numpy", "pyparsing", "sentencepiece")
REPO_ROOT = Path(__file__).resolve().parents[2]


def canonical_hash(config: Mapping) -> str:
    """16 hex digits of the sha256 of the canonical JSON of a mapping (key order does not matter): the hash of an
    evaluation's config (``results.json``'s ``config_hash``) and of a task identity (``cache.task_hash``). Not
    a run's identity (``experiments.config.config_hash``)."""
    canonical = json.dumps(config, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()[:16]


def package_versions(names: Iterable[str] = PACKAGES) -> dict[str, str | None]:
    """Installed versions (``None`` when a package is absent), plus the Python version."""
    versions: dict[str, str | None] = {"python": platform.python_version()}
    for name in names:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    return versions


def git_commit(root: Path = REPO_ROOT) -> dict[str, str | bool] | None:
    """``{"commit", "dirty"}`` of the source tree, or ``None`` outside a git checkout."""
    try:
        commit = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True,
                                timeout=10)
        status = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
                                capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if commit.returncode != 0:
        return None
    return {"commit": commit.stdout.strip(), "dirty": bool(status.stdout.strip())}


def write_results(
    out_dir: str | Path,
    task: str,
    metrics: Mapping,
    convention: str,
    settings: Mapping,
    items: Iterable[Mapping] = (),
    config: Mapping | None = None,
    data: Mapping[str, str | Path] | None = None,
) -> Path:
    """Write ``results.json`` and ``items.jsonl`` into ``out_dir``; returns the path of ``results.json``.

    ``settings`` are the protocol knobs actually used (e.g. ``{"pairs_per_paradigm": 100, "N": 300}``);
    ``config`` is the resolved run/evaluation config (hashed); ``data`` names the files or folders read
    (``{"suites": path}``), recorded with their sha256.
    """
    out_dir = Path(out_dir)
    lines = [json.dumps(item, sort_keys=True) + "\n" for item in items]
    atomic_write_with(out_dir / "items.jsonl", lambda f: f.writelines(line.encode("utf-8") for line in lines))
    record = {
        "task": task,
        "metrics": dict(metrics),
        "convention": convention,
        "settings": dict(settings),
        "n_items": len(lines),
        "config_hash": canonical_hash(config) if config is not None else None,
        "config": dict(config) if config is not None else None,
        "data": {name: {"path": str(p), "sha256": file_sha256(p)} for name, p in (data or {}).items()},
        "versions": package_versions(),
        "git": git_commit(),
        "created": datetime.now(UTC).isoformat(timespec="seconds"),
    }
    path = out_dir / "results.json"
    atomic_write_text(path, json.dumps(record, indent=1, sort_keys=True, default=str) + "\n")
    return path
