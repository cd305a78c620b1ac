"""``synbench import``: an official implementation's checkpoint as an ordinary synbench run folder.

The family's adapter converts the files (its optional ``importing`` part, ``adapter.Importing``); this module
never names a family. It writes, all at once (a hidden temporary folder beside ``--out``, renamed at the end:
nothing is half-written, and a failed import leaves nothing)::

    RUN_DIR/
        config.json           the resolved config, as a trained run's (seed 0)
        checkpoints/best.ckpt synbench's checkpoint: state_dict + the ``synbench`` metadata
        DONE                  {"family", "seed", "imported": {"official", "files": the sources' sha256, ...}}

so that every reader of run folders (``eval ... RUN_DIR/checkpoints/best.ckpt``, ``status``, ``leaderboard``)
takes it as a finished run.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path
from typing import Any

from lightning_modules.data.checksums import file_sha256
from lightning_modules.errors import InputError


def import_run(family: str, checkpoint: Path, vocab: Path | None, tokenizer: Path | None, out: Path) -> Path:
    """Convert ``checkpoint`` (with ``vocab``, ``tokenizer``) of ``family``'s official code into run folder
    ``out``, which must not exist yet (or be empty); returns ``out``."""
    from experiments.families import get_family

    part = get_family(family).importing()
    if part is None:
        raise InputError(f"{family} has no importer of official checkpoints", "FAMILY")
    if vocab is None and part.needs_vocab:
        raise InputError(f"{family} checkpoints keep their vocabulary in a separate file: give --vocab FILE",
                         "--vocab")
    if vocab is not None and not part.needs_vocab:
        raise InputError(f"{family} checkpoints hold their vocabulary: --vocab does not apply", "--vocab")
    if tokenizer is not None and not part.takes_tokenizer:
        raise InputError(f"{family} checkpoints take no tokenizer: --tokenizer does not apply", "--tokenizer")
    for path, name in ((checkpoint, "checkpoint"), (vocab, "--vocab")):
        if path is not None and not path.is_file():
            raise InputError(f"{name} file not found", str(path))
    if tokenizer is not None and not tokenizer.exists():
        raise InputError("--tokenizer not found", str(tokenizer))
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise InputError("already exists and is not empty: give a new run folder", str(out))
    imported = part.convert(checkpoint, vocab, tokenizer)
    files = {name: file_sha256(path) for name, path in (("checkpoint", checkpoint), ("vocab", vocab),
                                                          ("tokenizer", tokenizer)) if path is not None}
    write_run(out, family, imported, {"official": part.official, "files": files, **imported.source})
    return out


def write_run(out: Path, family: str, imported: Any, provenance: dict[str, Any]) -> None:
    """Write the run folder of an ``ImportedModel`` atomically (a temporary sibling renamed to ``out``);
    ``provenance`` (the official format, the source files' sha256, the converter's notes) goes to ``DONE`` and the
    checkpoint's metadata as ``imported``."""
    import torch

    from experiments.checkpoints import FORMAT_VERSION

    out.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{out.name}.import-", dir=out.parent))
    try:
        staging.chmod(0o755)  # as a folder made by mkdir, not mkdtemp's 0700
        config = {"seed": 0, **imported.config}
        (staging / "config.json").write_text(json.dumps(config, indent=2, sort_keys=True), encoding="utf-8")
        (staging / "checkpoints").mkdir()
        meta = {"format": FORMAT_VERSION, "family": family, "config": imported.config, "seed": 0,
                "vocab": imported.vocab, "imported": provenance}
        torch.save({"state_dict": imported.state_dict, "synbench": meta, "global_step": 0, "epoch": 0},
                   staging / "checkpoints" / "best.ckpt")
        done = {"family": family, "seed": 0, "imported": provenance}
        (staging / "DONE").write_text(json.dumps(done, indent=2, sort_keys=True) + "\n", encoding="utf-8")
        if out.is_dir():
            out.rmdir()  # empty (checked): the rename replaces it
        staging.rename(out)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
