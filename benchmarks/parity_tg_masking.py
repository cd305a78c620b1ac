"""Parity of ``synbench inspect tg|txl`` with the official TG masking library on the whole PTB sample.

The official side is a user's checkout of google-deepmind/transformer_grammars: its Choe–Charniak converter
(``transformer_grammars/data/text_processing.py``, needs ``nltk`` and ``absl-py``) and its C++ masking
library (``models/masking/{masking_rules,cpp_masking}.cc``), built here with one ``g++`` line against the
system's Eigen 3.4, pybind11 and Abseil 20220623 (Debian bookworm: ``libeigen3-dev pybind11-dev
libabsl-dev``; other locations through ``CXXFLAGS``/``LDFLAGS``). Both sides get each PTB-sample tree after
the corpus cleaning every synbench reader applies (``tree.clean``: ``-NONE-`` removed, function tags
stripped, root unwrapped); the official side converts it to Choe–Charniak itself, types its tokens by the
official dictionary's ranges (``<s>`` SOS, ``(X`` opening NT, ``X)`` closing NT, else terminal), and runs
``StackComposeDoubleClosingNT`` (``relative_pos="delta_depth"``, smart memory = ``gather_into_new_memory``)
or ``TXLCausalMasking`` with ``sequence_length = memory_length = L``. Its per-chunk matrices are read back
into the ``inspect`` record (tokens, types, labels, depth; per chunk the start and, for every non-pad query,
the sorted ``[key position, relpos]`` pairs, a memory column standing for ``memory_position``), and compared
with what ``synbench inspect ... --trees-file --jsonl`` prints, for: tg one chunk; tg chunked with smart and
with plain memory; txl one chunk; txl chunked (``--lengths``, default 8 and 64).

Run: ``python -m benchmarks.parity_tg_masking --official DIR [--data-dir DIR] [--lengths 8,64]``.
Exit status 1 if any record differs.
"""

from __future__ import annotations

import importlib
import json
import os
import shlex
import subprocess
import sys
import sysconfig
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path

from benchmarks.parity_common import Report, fail, first_difference, parser, ptb_sample_trees, synbench_stdout
from lightning_modules.data.tree import clean, to_bracketed

MASKING = Path("transformer_grammars/models/masking")
ABSL_LIBS = ("status", "statusor", "strings", "raw_hash_set", "hash", "str_format_internal",
             "raw_logging_internal", "city", "low_level_hash", "cord")
TYPE_NAMES = {"tg": {1: "SOS", 2: "ONT", 3: "T", 4: "CNT1", 14: "CNT2"}, "txl": {1: "SOS", 2: "ONT", 3: "T", 4: "CNT"}}
SOS, ONT, TERMINAL, CNT = 1, 2, 3, 4  # the official masking token types


# -- the official side ---------------------------------------------------------------------------------
def build_library(official: Path, build_dir: Path, masking: Path = MASKING,
                  checkout: str = "transformer_grammars") -> Path:
    """Compile the official ``cpp_masking`` extension (its sources in ``official/masking``; DTG's modified copy
    has the same files) into ``build_dir`` (kept while its sources are older)."""
    src = official / masking
    sources = [src / "masking_rules.cc", src / "cpp_masking.cc"]
    missing = [str(s) for s in sources if not s.is_file()]
    if missing:
        fail(f"not a {checkout} checkout: {', '.join(missing)} missing")
    build_dir.mkdir(parents=True, exist_ok=True)
    target = build_dir / ("cpp_masking" + sysconfig.get_config_var("EXT_SUFFIX"))
    newest = max(p.stat().st_mtime for p in [*sources, src / "masking_rules.h"])
    if target.is_file() and target.stat().st_mtime > newest:
        return build_dir
    includes = [src, Path("/usr/include/eigen3"), Path(sysconfig.get_paths()["include"])]
    try:
        import pybind11

        includes.append(Path(pybind11.get_include()))
    except ImportError:  # Debian's pybind11-dev puts the headers under /usr/include
        pass
    command = ["g++", "-O2", "-std=c++17", "-shared", "-fPIC", *(f"-I{i}" for i in includes),
               *shlex.split(os.environ.get("CXXFLAGS", "")), *map(str, sources), "-o", str(target),
               *shlex.split(os.environ.get("LDFLAGS", "")), *(f"-labsl_{lib}" for lib in ABSL_LIBS)]
    print("building the official masking library:", " ".join(command), file=sys.stderr)
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        fail(f"g++ failed ({done.returncode}):\n{done.stderr[-3000:]}")
    return build_dir


class Official:
    """The official Choe–Charniak conversion and masking rules, imported from a checkout."""

    def __init__(self, official: Path, build_dir: Path):
        sys.path[:0] = [str(build_library(official, build_dir)), str(official)]
        try:
            self.text_processing = importlib.import_module("transformer_grammars.data.text_processing")
            self.constants = importlib.import_module("transformer_grammars.data.constants")
        except ImportError as e:
            fail(f"the official converter needs {e.name}: pip install nltk absl-py")
        self.cpp = importlib.import_module("cpp_masking")

    def sequence(self, tree_text: str) -> tuple[list[str], list[int]]:
        """``<s>`` + the official Choe–Charniak tokens of a PTB tree, with their masking types."""
        tokens = ["<s>", *self.text_processing.choe_charniak_from_tree(tree_text, has_preterms=True).split(" ")]
        types = [SOS]
        for word in tokens[1:]:
            if self.constants.OPENING_NON_TERMINAL_REGEXP.match(word):
                types.append(ONT)
            elif self.constants.CLOSING_NON_TERMINAL_REGEXP.match(word):
                types.append(CNT)
            else:
                types.append(TERMINAL)
        return tokens, types

    def rules(self, family: str, length: int, memory: str):
        if family == "txl":
            return self.cpp.TXLCausalMasking(sequence_length=length, memory_length=length)
        return self.cpp.StackComposeDoubleClosingNT(
            sequence_length=length, memory_length=length, relative_pos="delta_depth",
            use_different_attn_fns=False, gather_into_new_memory=memory == "smart")


def official_record(official: Official, tree_text: str, family: str, length: int | None, memory: str) -> dict:
    """The ``inspect`` record read off the official library's chunks (``length`` None: one chunk)."""
    import numpy as np

    tokens, types = official.sequence(tree_text)
    ids = {t: i for i, t in enumerate(dict.fromkeys(["<PAD>", *tokens]))}  # any consistent dictionary
    seq = np.array([ids[t] for t in tokens] + [0], dtype=np.int32)
    ttypes = np.array(types + [0], dtype=np.int32)
    n_tokens = len(tokens) + (types.count(CNT) if family == "tg" else 0)
    chunk_length = length or n_tokens
    chunks = official.rules(family, chunk_length, memory).chunks_for_sequence(seq[:-1], ttypes[:-1], seq[1:],
                                                                              ttypes[1:])
    words = list(ids)
    record: dict = {"tokens": [], "types": [], "labels": [], "depth": [], "chunks": []}
    names = TYPE_NAMES[family]
    for c, chunk in enumerate(chunks):
        inputs, in_types, labels, _, mask, relpos, _, memory_mask, _, memory_pos, depth = chunk[:11]
        start = c * chunk_length
        # relpos columns are [memory | chunk]; a memory column's key is its memory_position
        keys = np.concatenate([memory_pos, start + np.arange(chunk_length)])
        attended = np.concatenate([memory_mask, mask], axis=1).astype(bool)
        attend = []
        for i in np.flatnonzero(inputs):
            row = attended[i]
            attend.append(sorted([k, r] for k, r in zip(keys[row].tolist(), relpos[i][row].tolist())))
            record["tokens"].append(words[inputs[i]])
            record["types"].append(names.get(int(in_types[i]), f"type {int(in_types[i])}"))
            record["labels"].append(words[labels[i]] if labels[i] else None)
            record["depth"].append(int(depth[i]))
        record["chunks"].append({"start": start, "attend": attend})
    return record


# -- the comparison ------------------------------------------------------------------------------------
def settings(lengths: Sequence[int]) -> list[tuple[str, str, int | None, str]]:
    """(check name, family, L or None for one chunk, memory) for every configuration compared."""
    out: list[tuple[str, str, int | None, str]] = [("tg one chunk", "tg", None, "smart")]
    out += [(f"tg L={n} {m} memory", "tg", n, m) for n in lengths for m in ("smart", "plain")]
    out += [("txl one chunk", "txl", None, "plain")]
    out += [(f"txl L={n}", "txl", n, "plain") for n in lengths]
    return out


def inspect_argv(family: str, length: int | None, memory: str, trees_file: Path) -> list[str]:
    argv = ["inspect", family, "--trees-file", str(trees_file), "--jsonl"]
    if length is not None:
        argv += ["--segment-length", str(length)]
        if family == "tg":
            argv += ["--memory", memory]
    return argv


def compare(trees: Sequence[tuple[str, object]], lengths: Sequence[int],
            reference: Callable[[str, str, int | None, str], dict], report: Report) -> None:
    """Compare ``synbench inspect`` with ``reference(tree_text, family, L, memory)`` on every tree."""
    texts = [to_bracketed(clean(tree)) for _, tree in trees]  # type: ignore[arg-type]
    with tempfile.TemporaryDirectory() as tmp:
        trees_file = Path(tmp) / "trees.txt"
        trees_file.write_text("".join(t + "\n" for t in texts), encoding="utf-8")
        for check, family, length, memory in settings(lengths):
            lines = synbench_stdout(inspect_argv(family, length, memory, trees_file)).splitlines()
            for (location, _), text, line in zip(trees, texts, lines, strict=True):
                ours, theirs = json.loads(line), reference(text, family, length, memory)
                report.add(check, ours == theirs,
                           None if ours == theirs else f"{location}  {text[:200]}\n{first_difference(ours, theirs)}")


def main(argv: Sequence[str] | None = None) -> int:
    p = parser(__doc__.splitlines()[0], "a checkout of google-deepmind/transformer_grammars")
    p.add_argument("--lengths", default="8,64", help="chunk lengths L = M for the chunked checks (default 8,64)")
    p.add_argument("--build-dir", type=Path, default=Path(tempfile.gettempdir()) / "synbench-parity-tg",
                   help="where the official library is compiled (reused while its sources are unchanged)")
    p.add_argument("--limit", type=int, help="only the first N trees")
    args = p.parse_args(argv)
    lengths = [int(n) for n in args.lengths.split(",") if n]
    official = Official(args.official, args.build_dir)
    trees = ptb_sample_trees(args.data_dir)[: args.limit]
    report = Report(show=args.show)
    compare(trees, lengths, lambda text, family, length, memory: official_record(official, text, family, length,
                                                                                   memory), report)
    return report.finish(f"synbench inspect tg|txl vs the official TG masking library ({args.official}), "
                         f"{len(trees):,} PTB-sample trees, records compared per configuration:")


if __name__ == "__main__":
    raise SystemExit(main())
