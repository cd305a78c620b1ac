"""``hf:ORG/NAME@REVISION`` model sources: a Hugging Face Hub model read from the local Hugging Face cache.

An ``hf:`` source names a folder when that path exists (what ``save_pretrained`` writes, ``scorers/hf.py``);
otherwise ``ORG/NAME`` (a Hub repo id, as huggingface_hub validates it; a bare ``NAME`` stays a folder name) at
``REVISION`` (a branch, tag or commit hash; ``hf:ORG/NAME`` means ``main``) is looked up in the local cache
that huggingface_hub downloads into (``models--ORG--NAME/{blobs,refs,snapshots}`` under ``HF_HUB_CACHE``,
default ``$HF_HOME/hub``). The lookup is huggingface_hub's own (``snapshot_download(local_files_only=True)``):
never a network call, and a model not in the cache is one error saying how to download it. The revision is
resolved to its commit hash, which the results record with the sha256 of every file read
(``hf.HFScorer.identity``).
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from pathlib import Path

from experiments.evaluate.scorers import HF_PREFIX
from lightning_modules.errors import InputError

DEFAULT_REVISION = "main"  # what the Hub and huggingface_hub take when no revision is given


@dataclass(frozen=True)
class HubModel:
    """A Hub repo id and the revision asked for (as written: a branch, tag or commit hash)."""

    repo: str
    given: str | None = None  # the revision written after ``@``; None: ``main``

    @property
    def revision(self) -> str:
        """The revision looked up: the one given, else ``main``."""
        return self.given or DEFAULT_REVISION

    @property
    def source(self) -> str:
        """The source as written: ``hf:ORG/NAME`` or ``hf:ORG/NAME@REVISION``."""
        return f"{HF_PREFIX}{self.repo}" + (f"@{self.given}" if self.given else "")

    def label(self) -> str:
        """A model label for specs and tables: ``NAME`` or ``NAME-REVISION``, in the characters a label may hold."""
        name = self.repo.split("/")[-1] + (f"-{self.given}" if self.given else "")
        return "".join(c if c.isalnum() or c in "_.+-" else "-" for c in name)


@dataclass(frozen=True)
class Snapshot:
    """A Hub model found in the cache: its snapshot folder and the commit hash its revision resolved to."""

    model: HubModel
    folder: Path
    commit: str

    def identity(self) -> dict[str, str]:
        """What the results record of where the files came from."""
        return {"repo": self.model.repo, "revision": self.model.revision, "commit": self.commit}


def hub_model(source: str) -> HubModel | None:
    """The Hub model that ``source`` (``hf:ORG/NAME[@REVISION]``) names, or None when it names a folder: a path
    that exists, or one that is not ``ORG/NAME[@REVISION]`` with a valid repo id."""
    from huggingface_hub.utils import HFValidationError, validate_repo_id

    text = str(source).removeprefix(HF_PREFIX)
    if not text or Path(text).expanduser().exists():
        return None
    repo, at, revision = text.partition("@")
    if repo.count("/") != 1 or (at and not revision):
        return None
    try:
        validate_repo_id(repo)
    except HFValidationError:
        return None
    return HubModel(repo, revision or None)


def cache_dir() -> Path:
    """The hub cache as huggingface_hub derives it from the environment *now*: its ``constants`` module run
    afresh. The imported module read the environment once, when Lightning first imported it, which can be
    long before (the warm-start fork server imports it before a task sets its own ``HF_HUB_CACHE``)."""
    spec = importlib.util.find_spec("huggingface_hub.constants")
    assert spec is not None and spec.loader is not None
    constants = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(constants)
    return Path(constants.HF_HUB_CACHE)


def resolve(model: HubModel) -> Snapshot:
    """The snapshot of ``model`` in the local cache, offline; ``InputError`` (at the source) when it is not
    there, with the command that downloads it."""
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import LocalEntryNotFoundError

    cache = cache_dir()
    try:
        folder = Path(snapshot_download(model.repo, revision=model.revision, cache_dir=cache,
                                        local_files_only=True))
    except (LocalEntryNotFoundError, OSError, ValueError):  # absent, or a snapshot its tree listing finds partial
        revision = f" --revision {model.given}" if model.given else ""
        raise InputError(f"not in the local Hugging Face cache (HF_HUB_CACHE={cache}; download it on a machine with "
                         f"internet: `huggingface-cli download {model.repo}{revision}`, `hf download` since "
                         "huggingface_hub 1.0, and copy that cache here or name it in HF_HUB_CACHE)",
                         model.source) from None
    return Snapshot(model, folder, folder.name)  # snapshots/COMMIT: the folder is named by the commit
