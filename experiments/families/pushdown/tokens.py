"""GPT-2 byte-level BPE pieces, as the official Pushdown Layers data reads words (``terminals: gpt2-bpe``).

The official BLLIP pipeline splits every word with ``GPT2Tokenizer.tokenize(word, add_prefix_space=not
first)``: a word after the first is read with a leading space (its first piece starts with ``Ġ``). An imported
checkpoint keeps the tokenizer's ``vocab.json`` and ``merges.txt`` in its vocabulary payload, so it needs no
tokenizer files at evaluation; the pieces are made with the ``tokenizers`` library (the same byte-level BPE).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from lightning_modules.errors import InputError

KIND = "gpt2-bpe"


def gpt2_payload(directory: Path, words: Sequence[str]) -> dict[str, Any]:
    """The payload of a GPT-2 tokenizer directory (``vocab.json``, ``merges.txt``); ``words`` are the official
    vocabulary's pieces (the tokenizer must know them all)."""
    if not directory.is_dir():
        raise InputError("--tokenizer must be a GPT-2 tokenizer directory (vocab.json and merges.txt)",
                         str(directory))
    files = {name: directory / name for name in ("vocab.json", "merges.txt")}
    for path in files.values():
        if not path.is_file():
            raise InputError("not a GPT-2 tokenizer directory (vocab.json and merges.txt)", str(path))
    try:
        vocab = json.loads(files["vocab.json"].read_text(encoding="utf-8"))
        merges = [line for line in files["merges.txt"].read_text(encoding="utf-8").splitlines()
                  if line and not line.startswith("#version")]
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise InputError(f"cannot read the tokenizer ({type(e).__name__})", str(directory)) from None
    if not isinstance(vocab, dict) or not all(isinstance(v, int) for v in vocab.values()) or not all(
            len(m.split(" ")) == 2 for m in merges):
        raise InputError("not a GPT-2 tokenizer (vocab.json: piece -> id, merges.txt: pairs)", str(directory))
    unknown = [w for w in words if w not in vocab and w not in ("<eos>",)]
    if unknown:
        raise InputError(f"the official vocabulary's piece {unknown[0]!r} is not in this tokenizer", str(directory))
    digest = hashlib.sha256(b"".join(p.read_bytes() for p in files.values())).hexdigest()
    return {"terminals": KIND, "bpe": {"vocab": vocab, "merges": merges}, "tokenizer_sha256": digest}


def gpt2_pieces(payload: Mapping[str, Any]) -> Callable[[str, int], list[str]]:
    """``(word, index) -> pieces`` as the official pipeline splits the word at position ``index``."""
    from tokenizers import Tokenizer, models, pre_tokenizers

    bpe = payload["bpe"]
    merges = [tuple(m.split(" ")) for m in bpe["merges"]]
    tokenizer = Tokenizer(models.BPE(vocab=dict(bpe["vocab"]), merges=merges))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)

    def pieces(word: str, index: int) -> list[str]:
        return tokenizer.encode(word if index == 0 else " " + word).tokens

    return pieces
