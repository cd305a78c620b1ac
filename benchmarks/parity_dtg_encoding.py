"""Parity of ``synbench inspect dtg`` with the official DTG preprocessing on the UD EWT test set.

The official side is a user's checkout of zhaoyd1/Dep_Transformer_Grammars: its oracle script
``data_scripts/conll_to_dep.py`` (run as it is, in a temporary folder holding the sentences as its
``bllip_test_conll`` input, with empty train and dev inputs; needs ``tqdm``) and its masking library
``masking_bllip/{masking_rules,cpp_masking}.cc`` (TG's C++ modified for DTG), built with the same ``g++``
line as ``parity_tg_masking.py``. Each action line the script writes becomes ``<s>`` + the actions, typed as
the official ``TokenTypeRanges`` does at word level (``<s>`` SOS, ``left_arc``/``right_arc``/``pop_root``
LEFTARC/RIGHTARC/POPROOT, every word STARTOFWORD), with the next item as its label (``</s>`` last), and goes
through ``StackComposeDoubleClosingNT`` as the official ``forward_prepare`` calls it (smart memory, sequence =
memory = 512: every UD EWT test sentence fits one chunk). The ``inspect`` record is read off chunk 0: tokens,
types, labels (None where the library's label is 0), arc_heads (``composed_position`` at arc tokens) and the
attend lists (``[key, relpos]`` for every attended key).

Both sides get the projective sentences of the UD EWT test set (the official script drops the others; it
must keep all of these), written as 10-column rows of ID, FORM and HEAD. Compared per sentence: the oracle's
undoubled item sequence (the official action line) and the whole ``inspect`` record.

Run: ``python -m benchmarks.parity_dtg_encoding --official DIR [--data-dir DIR] [--limit N]``.
Exit status 1 if any record differs.

Run 2026-11-24 here (checkout at 6e8b679; Debian bookworm's Abseil 20220623, Eigen 3.4, pybind11; about 2
minutes): 2,051 / 2,051 projective UD EWT test sentences identical in both checks (oracle actions and
inspect record); 26 non-projective sentences left out.
"""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from benchmarks.parity_common import Report, fail, first_difference, parser, synbench_stdout
from benchmarks.parity_tg_masking import build_library
from lightning_modules.data.dependency import DepTree
from lightning_modules.families.dtg import encoding as dtg

ORACLE = Path("data_scripts/conll_to_dep.py")
MASKING = Path("masking_bllip")
LENGTH = 512  # the official forward_prepare's sequence_length = memory_length
SOS, POPROOT, LEFTARC, STARTOFWORD, LEFTARC_2, RIGHTARC, RIGHTARC_2 = 1, 2, 4, 6, 14, 15, 16  # constants.py
TYPE_NAMES = {SOS: "SOS", STARTOFWORD: "W", LEFTARC: "LA", RIGHTARC: "RA", LEFTARC_2: "LA2", RIGHTARC_2: "RA2",
              POPROOT: "POP"}
ARC_TYPES = {LEFTARC, RIGHTARC, LEFTARC_2, RIGHTARC_2, POPROOT}
ACTION_TYPES = {dtg.LEFT_ARC: LEFTARC, dtg.RIGHT_ARC: RIGHTARC, dtg.POP_ROOT: POPROOT}


def conll_rows(trees: Sequence[DepTree]) -> str:
    """The sentences as the official script reads them: 10 whitespace-separated columns, a blank line after each."""
    return "".join("".join(f"{i}\t{form}\t_\t_\t_\t_\t{head}\t_\t_\t_\n"
                           for i, (form, head) in enumerate(zip(t.forms, t.heads), start=1)) + "\n" for t in trees)


class Official:
    """The official oracle script and masking library, from a checkout."""

    def __init__(self, official: Path, build_dir: Path):
        if not (official / ORACLE).is_file():
            fail(f"not a Dep_Transformer_Grammars checkout: {official / ORACLE} missing")
        self.official = official
        sys.path.insert(0, str(build_library(official, build_dir, MASKING, "Dep_Transformer_Grammars")))
        self.cpp = importlib.import_module("cpp_masking")

    def actions(self, trees: Sequence[DepTree]) -> list[list[str]]:
        """The action lines ``conll_to_dep.py`` writes for ``trees`` (the sentences it keeps, in order)."""
        with tempfile.TemporaryDirectory() as tmp:
            folder = Path(tmp)
            for split in ("train_LG", "dev"):
                (folder / f"bllip_{split}_conll").write_text("")
            (folder / "bllip_test_conll").write_text(conll_rows(trees), encoding="utf-8")
            done = subprocess.run([sys.executable, str((self.official / ORACLE).resolve())], cwd=folder,
                                  capture_output=True, text=True)
            if done.returncode != 0:
                fail(f"{ORACLE} failed ({done.returncode}): {done.stderr.strip()[-2000:]}")
            text = (folder / "test.bllip_action").read_text(encoding="utf-8")
        return [line.split(" ") for line in text.splitlines()]

    def rules(self) -> Any:
        """``StackComposeDoubleClosingNT`` as the official ``forward_prepare`` makes it (smart memory, 512)."""
        return self.cpp.StackComposeDoubleClosingNT(
            sequence_length=LENGTH, memory_length=LENGTH, relative_pos="delta_depth", use_different_attn_fns=False,
            transparency_prob=0.0, gather_into_new_memory=True, transparency_depth_threshold=-1)

    def record(self, actions: Sequence[str]) -> dict:
        """The ``inspect dtg`` record of one action line, read off the masking library's chunk 0."""
        import numpy as np

        items = ["<s>", *actions, "</s>"]
        ids = {t: i for i, t in enumerate(dict.fromkeys(["<PAD>", *items]))}
        types = [SOS, *(ACTION_TYPES.get(a, STARTOFWORD) for a in actions), 0]
        seq = np.array([ids[t] for t in items], dtype=np.int32)
        ttypes = np.array(types, dtype=np.int32)
        chunk = self.rules().chunks_for_sequence(seq[:-1], ttypes[:-1], seq[1:], ttypes[1:])[0]
        inputs, in_types, labels, _, mask, relpos = chunk[:6]
        composed = chunk[11]
        words = list(ids)
        record: dict = {"tokens": [], "types": [], "labels": [], "arc_heads": []}
        attend = []
        for i in np.flatnonzero(inputs).tolist():
            ttype = int(in_types[i])
            record["tokens"].append(words[inputs[i]])
            record["types"].append(TYPE_NAMES.get(ttype, f"type {ttype}"))
            record["labels"].append(words[labels[i]] if labels[i] else None)
            record["arc_heads"].append(int(composed[i]) if ttype in ARC_TYPES else None)
            keys = np.flatnonzero(mask[i]).tolist()
            attend.append([[k, int(relpos[i][LENGTH + k])] for k in keys])
        record["chunks"] = [{"start": 0, "attend": attend}]
        return record


def compare(trees: Sequence[tuple[str, DepTree]], actions: Sequence[list[str]],
            record: Callable[[list[str]], dict], report: Report) -> None:
    """Compare the official action lines and records with ``synbench inspect dtg`` on every tree."""
    if len(actions) != len(trees):
        report.notes.append(f"the official oracle kept {len(actions):,} of {len(trees):,} projective sentences")
    with tempfile.TemporaryDirectory() as tmp:
        trees_file = Path(tmp) / "trees.conllu"
        trees_file.write_text(conll_rows([t for _, t in trees]), encoding="utf-8")
        lines = synbench_stdout(["inspect", "dtg", "--trees-file", str(trees_file), "--jsonl"]).splitlines()
    for (location, tree), line, official in zip(trees, lines, actions):
        ours = json.loads(line)
        items = dtg.items(tree.forms, dtg.oracle(tree.heads))
        report.add("oracle actions", items == official,
                   None if items == official else f"{location}\n{first_difference(items, official)}")
        theirs = record(official)
        report.add("inspect record", ours == theirs,
                   None if ours == theirs else f"{location}  {' '.join(tree.forms)[:200]}\n"
                                               f"{first_difference(ours, theirs)}")


def main(argv: Sequence[str] | None = None) -> int:
    p = parser(__doc__.splitlines()[0], "a checkout of zhaoyd1/Dep_Transformer_Grammars")
    p.add_argument("--build-dir", type=Path, default=Path(tempfile.gettempdir()) / "synbench-parity-dtg",
                   help="where the official library is compiled (reused while its sources are unchanged)")
    p.add_argument("--limit", type=int, help="only the first N sentences")
    args = p.parse_args(argv)
    from lightning_modules.data.corpora import load_corpus
    from lightning_modules.errors import InputError

    try:
        sentences = load_corpus("ud-ewt", args.data_dir).sentences("test")
    except InputError as e:
        fail(e.message)
    official = Official(args.official, args.build_dir)
    trees = [(loc, t) for loc, t in sentences[: args.limit] if t.is_projective()]  # type: ignore[misc]
    report = Report(show=args.show)
    report.notes.append(f"{len(sentences[: args.limit]) - len(trees):,} non-projective sentences left out "
                        "(inspect refuses them; the official oracle drops them)")
    compare(trees, official.actions([t for _, t in trees]), official.record, report)
    return report.finish(f"synbench inspect dtg vs the official DTG oracle and masking library ({args.official}), "
                         f"{len(trees):,} projective UD EWT test sentences:")


if __name__ == "__main__":
    raise SystemExit(main())
