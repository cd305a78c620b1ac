"""Where an evaluation's results live, and the per-item cache that lets a re-run compute only what is missing.

An evaluation is identified by its **task identity**: the task, the model file's sha256, the settings that
change any number (method, N, beam, subset sizes, ...) and a checksum of the data actually evaluated. Its
hash names the output folder, ``<run dir>/eval/<task>-<hash>/`` by default (the run dir of
``RUN/checkpoints/best.ckpt`` is ``RUN``; for any other model file, its folder), so two evaluations that
differ in anything that matters never share a folder, and the same evaluation always finds its own.

``items.jsonl`` in that folder is the cache: one JSON object per line with a string ``"id"``. Records are
appended (and flushed to disk) as they are computed, so an interrupted run keeps its progress. When read
back, a line that is not valid JSON, has no id, or fails the task's own check is ignored and its item is
computed again — a corrupted cache is never trusted. At the end ``results.py`` rewrites ``items.jsonl``
atomically with exactly the evaluated items in order.

A folder named explicitly (``--out``, as the evaluation plan's ``RUN/eval/TASK``) may hold the items of
another evaluation (another proposal set, beam or model): ``items.identity`` records the task hash the
items belong to (older folders: ``results.json``'s ``config_hash``), and items and results of any other
identity are removed before the first item is computed — never reused.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from experiments.evaluate.results import canonical_hash
from experiments.evaluate.scorers import HF_PREFIX, hub
from experiments.runs import runs_root
from lightning_modules.data.atomic import atomic_write_text
from lightning_modules.errors import InputError

Record = dict[str, Any]


def run_dir_of(model_path: str | Path) -> Path:
    """``RUN`` for ``RUN/checkpoints/X.ckpt``; ``DIR`` for an ``hf:DIR`` model; ``RUNS/hub/ORG--NAME`` for a Hub
    model ``hf:ORG/NAME@REV`` (never the shared Hugging Face cache; the identity's commit tells revisions
    apart); otherwise the model file's folder."""
    if str(model_path).startswith(HF_PREFIX):
        model = hub.hub_model(str(model_path))
        if model is not None:
            return runs_root() / "hub" / model.repo.replace("/", "--")
        return Path(str(model_path).removeprefix(HF_PREFIX)).resolve()
    parent = Path(model_path).resolve().parent
    return parent.parent if parent.name == "checkpoints" else parent


def task_hash(identity: Mapping[str, Any]) -> str:
    """16 hex digits of the sha256 of the canonical JSON of the task identity (``results.canonical_hash``)."""
    return canonical_hash(identity)


def default_out_dir(model_path: str | Path, task: str, identity: Mapping[str, Any]) -> Path:
    return run_dir_of(model_path) / "eval" / f"{task}-{task_hash(identity)}"


IDENTITY_FILE = "items.identity"


def cached_identity(out_dir: Path) -> str | None:
    """The task hash of the items in ``out_dir``: its ``items.identity``, else (a folder written before it
    existed) the ``config_hash`` of its ``results.json``; ``None`` when neither says."""
    try:
        return (out_dir / IDENTITY_FILE).read_text(encoding="utf-8").strip()
    except OSError:
        pass
    try:
        found = json.loads((out_dir / "results.json").read_text(encoding="utf-8")).get("config_hash")
    except (OSError, ValueError, AttributeError):
        return None
    return found if isinstance(found, str) else None


class ItemCache:
    """The valid records of ``out_dir/items.jsonl`` by id, and appending new ones.

    ``valid(record)`` is the task's check of a record read back (right fields, right types); ``identity`` is
    the evaluation's task identity (the folder's items of another identity are removed, with its results);
    ``computed`` counts the records added by this process (0 on a complete cache hit).
    """

    def __init__(self, out_dir: str | Path, valid: Callable[[Record], bool], identity: Mapping[str, Any]):
        out_dir = Path(out_dir)
        self.path = out_dir / "items.jsonl"
        self.valid = valid
        self.records: dict[str, Record] = {}
        self.computed = 0
        wanted = task_hash(identity)
        if cached_identity(out_dir) != wanted:
            try:
                for stale in (self.path, out_dir / "results.json"):
                    stale.unlink(missing_ok=True)
                out_dir.mkdir(parents=True, exist_ok=True)
                atomic_write_text(out_dir / IDENTITY_FILE, wanted + "\n")
            except OSError as e:
                raise InputError(f"cannot use as a results folder: {e.strerror or e}", str(out_dir)) from None
        if self.path.is_file():
            for line in self.path.read_text(encoding="utf-8", errors="replace").splitlines():
                record = _parse(line)
                if record is not None and record["id"] not in self.records and _safe(valid, record):
                    self.records[record["id"]] = record

    def missing(self, ids: Sequence[str]) -> list[str]:
        return [i for i in ids if i not in self.records]

    def fill(self, ids: Sequence[str], compute: Callable[[list[str]], list[Record]], chunk: int = 32) -> None:
        """Compute the records of the missing ``ids`` (``chunk`` at a time) and append each chunk at once."""
        todo = self.missing(ids)
        for start in range(0, len(todo), chunk):
            wanted = todo[start : start + chunk]
            records = compute(wanted)
            if [r["id"] for r in records] != wanted:
                raise ValueError("compute must return one record per id, in order")
            self.add(records)

    def add(self, records: Sequence[Record]) -> None:
        """Append records (after completing a line a killed writer may have left unterminated)."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.path, "a+b") as f:
            f.seek(0, os.SEEK_END)
            if f.tell():
                f.seek(-1, os.SEEK_END)
                if f.read(1) != b"\n":
                    f.write(b"\n")
            f.write("".join(json.dumps(r, sort_keys=True) + "\n" for r in records).encode("utf-8"))
            f.flush()
            os.fsync(f.fileno())
        for r in records:
            self.records[r["id"]] = r
        self.computed += len(records)

    def ordered(self, ids: Sequence[str]) -> list[Record]:
        return [self.records[i] for i in ids]


def _parse(line: str) -> Record | None:
    try:
        record = json.loads(line)
    except ValueError:
        return None
    return record if isinstance(record, dict) and isinstance(record.get("id"), str) else None


def _safe(valid: Callable[[Record], bool], record: Record) -> bool:
    try:
        return bool(valid(record))
    except (KeyError, TypeError, ValueError, AttributeError, IndexError):
        return False
