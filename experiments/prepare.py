"""Stage the benchmark's datasets into the data directory, verifying pinned sha256 checksums.

The registry ``experiments/data/datasets.json`` lists, for every file of every dataset, three pins:

- ``sha256``: the *staged* file under ``DATA_DIR/<path>``. Staged files are plain (never gzipped), so they are
  byte-identical whichever way they were obtained, and result files can cite one checksum;
- ``local``: the file in a local copy of the data (``--from DIR``, laid out as ``../shared/data``), where
  large text files are gzip-compressed: ``.gz`` files are decompressed when staged;
- ``upstream``: the public source, a ``url`` relative to ``base_url`` (raw GitHub at a pinned commit, or a
  mirror with the same layout: ``--mirror``/``$SYNBENCH_MIRROR``), optionally with a zip ``member`` to
  extract, or ``convert: "pickle-json"`` for pickles (Marvin & Linzen), read with an unpickler that can build
  only dicts, lists, tuples and strings, and written as JSON; or a ``package`` file shipped with synbench.

Every fetched file is checked against its source pin and again against the staged pin before it is written
(atomically). A file that fails is reported by name and not staged; a staged file that no longer matches its
pin is staged again (or removed and reported when its source is bad too). A second run only verifies.
``DATA_DIR/MANIFEST.json`` records what was staged from where, with checksums.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import pickle
import re
import urllib.error
import urllib.request
import zipfile
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from lightning_modules.data.atomic import atomic_write_bytes, atomic_write_text
from lightning_modules.data.checksums import file_sha256
from lightning_modules.data.corpora import (
    BUILTIN,
    REGISTRY_FILE,
    load_corpus,
    registered_treebanks,
    treebank_kind,
    treebank_splits,
)
from lightning_modules.errors import InputError

PACKAGE_DATA = Path(__file__).parent / "data"
REGISTRY = PACKAGE_DATA / "datasets.json"
MANIFEST_FILE = "MANIFEST.json"
MIRROR_ENV = "SYNBENCH_MIRROR"
DOWNLOAD_TIMEOUT_S = 60


@dataclass(frozen=True)
class Problem:
    """A file that was not staged: where it came from and what was wrong with it."""

    location: str
    message: str

    def __str__(self) -> str:
        return f"{self.location}: {self.message}"


@dataclass
class DatasetReport:
    """Outcome of staging one dataset."""

    name: str
    files: int
    staged: list[str] = field(default_factory=list)  # written in this run
    verified: list[str] = field(default_factory=list)  # already staged and matching their pins
    restaged: list[str] = field(default_factory=list)  # staged files that had been corrupted, written again
    problems: list[Problem] = field(default_factory=list)


class _Bad(Exception):
    def __init__(self, location: str, message: str):
        super().__init__(message)
        self.problem = Problem(location, message)


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _check(data: bytes, expected: str, location: str, what: str) -> None:
    found = sha256_bytes(data)
    if found != expected:
        raise _Bad(location, f"sha256 mismatch ({what}): expected {expected}, found {found}; not staged")


def load_registry(path: Path = REGISTRY) -> dict:
    """The dataset registry (``datasets.json``)."""
    return json.loads(path.read_text(encoding="utf-8"))


# -- sources ------------------------------------------------------------------------------------------
class LocalSource:
    """A local copy laid out like ``../shared/data`` (``--from DIR``)."""

    def __init__(self, root: Path):
        if not root.is_dir():
            raise InputError("no such directory (--from)", str(root))
        self.root = root

    def describe(self, entry: dict) -> tuple[str, str]:
        return str(self.root / entry["local"]["path"]), entry["local"]["sha256"]

    def fetch(self, entry: dict) -> bytes:
        path = self.root / entry["local"]["path"]
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            raise _Bad(str(path), "file missing from the local copy; not staged") from None
        except OSError as e:
            raise _Bad(str(path), f"cannot read: {e.strerror}; not staged") from None
        _check(data, entry["local"]["sha256"], str(path), "corrupted local file")
        if path.suffix == ".gz" and not entry["path"].endswith(".gz"):
            data = gzip.decompress(data)
        return data


class Download:
    """The public upstream sources (or a mirror with the same layout), fetched over HTTP(S)."""

    def __init__(self, base_url: str):
        self.base_url = base_url.rstrip("/")
        self._cache: dict[str, bytes | _Bad] = {}

    def describe(self, entry: dict) -> tuple[str, str]:
        up = entry["upstream"]
        if "package" in up:
            return f"synbench package data {up['package']}", up["sha256"]
        member = f"#{up['member']}" if "member" in up else ""
        return f"{self.base_url}/{up['url']}{member}", up["sha256"]

    def fetch(self, entry: dict) -> bytes:
        up = entry["upstream"]
        if "package" in up:
            data = (PACKAGE_DATA / up["package"]).read_bytes()
            _check(data, up["sha256"], str(PACKAGE_DATA / up["package"]), "package file")
            return data
        url = f"{self.base_url}/{up['url']}"
        data = self._get(url, up["sha256"])
        if "member" in up:
            return _zip_member(data, up["member"], url)
        if up.get("convert") == "pickle-json":
            return _pickle_to_json(data, url)
        return data

    def _get(self, url: str, sha256: str) -> bytes:
        """Download once per run (a zip serves many files); a failed download is remembered, not retried."""
        if url not in self._cache:
            try:
                self._cache[url] = _download(url)
                _check(self._cache[url], sha256, url, "corrupted download")
            except _Bad as bad:
                self._cache[url] = bad
        got = self._cache[url]
        if isinstance(got, _Bad):
            raise got
        return got

    def forget(self) -> None:
        self._cache.clear()


def _download(url: str) -> bytes:
    try:
        with urllib.request.urlopen(url, timeout=DOWNLOAD_TIMEOUT_S) as response:
            return response.read()
    except urllib.error.HTTPError as e:
        raise _Bad(url, f"download failed: HTTP {e.code} {e.reason}; not staged") from None
    except (urllib.error.URLError, OSError) as e:
        reason = getattr(e, "reason", e)
        raise InputError(
            f"cannot download ({reason}); use `synbench prepare --from DIR` with a local copy, "
            f"or a mirror (--mirror URL or ${MIRROR_ENV})",
            url,
        ) from None


def _zip_member(data: bytes, member: str, url: str) -> bytes:
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            return archive.read(member)
    except KeyError:
        raise _Bad(f"{url}#{member}", "member missing from the archive; not staged") from None
    except zipfile.BadZipFile as e:
        raise _Bad(url, f"not a valid zip archive ({e}); not staged") from None


class _PlainUnpickler(pickle.Unpickler):
    """Refuses every class or function reference, so only built-in containers and scalars can be built."""

    def find_class(self, module: str, name: str):
        raise pickle.UnpicklingError(f"refusing to load {module}.{name}")

    def persistent_load(self, pid):
        raise pickle.UnpicklingError("refusing a persistent id")


def _pickle_to_json(data: bytes, url: str) -> bytes:
    """A pickle of dicts/lists/tuples/strings as JSON (tuples become lists; ``indent=0``, as staged)."""
    try:
        obj = _PlainUnpickler(io.BytesIO(data)).load()
    except Exception as e:  # any malformed pickle: the data is rejected, never executed
        raise _Bad(url, f"not a plain-data pickle ({e}); not staged") from None
    if not _plain(obj):
        raise _Bad(url, "pickle holds something other than dicts, lists, tuples and strings; not staged")
    return json.dumps(obj, indent=0).encode("utf-8")


def _plain(obj: object) -> bool:
    if isinstance(obj, str):
        return True
    if isinstance(obj, list | tuple):
        return all(_plain(x) for x in obj)
    if isinstance(obj, dict):
        return all(isinstance(k, str) and _plain(v) for k, v in obj.items())
    return False


# -- staging ------------------------------------------------------------------------------------------
def prepare(
    data_dir: Path,
    source: Path | None = None,
    mirror: str | None = None,
    only: list[str] | None = None,
    registry: dict | None = None,
    on_file: Callable[[str], None] | None = None,
) -> list[DatasetReport]:
    """Stage the datasets (all, or those named in ``only``) from ``source`` or by download; verify; record.

    Returns one report per dataset; problems are reported, not raised (except an unreachable server).
    """
    registry = registry if registry is not None else load_registry()
    datasets = registry["datasets"]
    unknown = [n for n in only or [] if n not in datasets]
    if unknown:
        raise InputError(f"unknown dataset {unknown[0]!r} (--only); datasets: {', '.join(datasets)}")
    fetcher = LocalSource(source) if source is not None else Download(mirror or registry["base_url"])
    data_dir.mkdir(parents=True, exist_ok=True)
    manifest = _read_manifest(data_dir)
    reports = []
    for name in only or list(datasets):
        reports.append(_stage_dataset(name, datasets[name], data_dir, fetcher, manifest, on_file))
        _write_manifest(data_dir, manifest)
        if isinstance(fetcher, Download):
            fetcher.forget()
    return reports


def _stage_dataset(
    name: str,
    spec: dict,
    data_dir: Path,
    fetcher: LocalSource | Download,
    manifest: dict,
    on_file: Callable[[str], None] | None,
) -> DatasetReport:
    report = DatasetReport(name, len(spec["files"]))
    previous = manifest["datasets"].get(name, {}).get("files", {})
    files: dict[str, dict] = {}
    for entry in spec["files"]:
        rel = entry["path"]
        target = data_dir / rel
        existed = target.is_file()
        if existed and file_sha256(target) == entry["sha256"]:
            report.verified.append(rel)
            earlier = previous.get(rel)
            same = earlier and earlier.get("sha256") == entry["sha256"]
            files[rel] = earlier if same else _record(entry, ("found already staged", None))
        else:
            try:
                data = fetcher.fetch(entry)
                _check(data, entry["sha256"], fetcher.describe(entry)[0], "staged content")
            except _Bad as bad:
                if bad.problem not in report.problems:
                    report.problems.append(bad.problem)
                if existed:
                    target.unlink()
                    report.problems.append(Problem(str(target), "staged file was corrupted; removed"))
            else:
                atomic_write_bytes(target, data)
                (report.restaged if existed else report.staged).append(rel)
                files[rel] = _record(entry, fetcher.describe(entry))
        if on_file:
            on_file(rel)
    manifest["datasets"][name] = {
        "title": spec["title"],
        "licence": spec["licence"],
        "complete": len(files) == len(spec["files"]),
        "files": files,
    }
    return report


def _record(entry: dict, source: tuple[str, str | None]) -> dict:
    return {
        "sha256": entry["sha256"],
        "source": source[0],
        "source_sha256": source[1],
        "staged_at": datetime.now(UTC).isoformat(timespec="seconds"),
    }


def _read_manifest(data_dir: Path) -> dict:
    """The manifest of earlier runs (rebuilt from scratch when missing or unreadable)."""
    try:
        manifest = json.loads((data_dir / MANIFEST_FILE).read_text(encoding="utf-8"))
        if isinstance(manifest.get("datasets"), dict):
            return manifest
    except (OSError, ValueError, AttributeError):
        pass
    return {"format": 1, "datasets": {}}


def _write_manifest(data_dir: Path, manifest: dict) -> None:
    atomic_write_text(data_dir / MANIFEST_FILE, json.dumps(manifest, indent=1, sort_keys=True) + "\n")


# -- licensed treebanks -------------------------------------------------------------------------------
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")


def register_treebank(data_dir: Path, spec: str, registry: dict | None = None) -> tuple[str, dict]:
    """Register ``NAME=PATH`` (a bracketed or CoNLL-U file, or a directory of split files) as corpus NAME.

    The files are parsed completely (a malformed tree is an ``InputError`` with ``FILE:LINE``) and stay where
    they are; ``DATA_DIR/treebanks.json`` records their absolute paths, kind, sentence counts and sha256.
    """
    name, sep, raw_path = spec.partition("=")
    if not sep or not raw_path:
        raise InputError(f"--treebank expects NAME=PATH, got {spec!r}")
    if not _NAME.fullmatch(name):
        raise InputError(f"bad treebank name {name!r}: use letters, digits, '.', '_' and '-'")
    datasets = (registry if registry is not None else load_registry())["datasets"]
    if name in BUILTIN or name in datasets:
        raise InputError(f"treebank name {name!r} is a built-in corpus or dataset; choose another name")
    path = Path(raw_path).expanduser().resolve()
    if not path.exists():
        raise InputError("no such file or directory (--treebank)", str(path))
    splits = treebank_splits(path)
    kind = treebank_kind(splits)
    corpus = load_corpus(
        path, data_dir
    )  # parses everything: malformed input fails before anything is written
    entry = {
        "path": str(path),
        "kind": kind,
        "splits": {s: str(p) for s, p in splits.items()},
        "sentences": {s: len(corpus.sentences(s)) for s in corpus.splits},
        "sha256": {s: file_sha256(p) for s, p in splits.items()},
        "registered_at": datetime.now(UTC).isoformat(timespec="seconds"),
    }
    treebanks = registered_treebanks(data_dir)
    treebanks[name] = entry
    atomic_write_text(data_dir / REGISTRY_FILE, json.dumps(treebanks, indent=1) + "\n")
    return name, entry
