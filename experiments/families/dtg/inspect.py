"""``synbench inspect dtg``: what a Dependency Transformer Grammar sees and attends to for a CoNLL-U sentence.

Word level (one token per syntactic word, FORM as written; comments, ``3-4`` ranges and ``8.1`` empty nodes
are skipped), HEAD gives the tree. Output per sentence (DESIGN.md's contract)::

    {"tokens": [...], "types": [...], "labels": [... or null], "arc_heads": [... or null],
     "chunks": [{"start": 0, "attend": [[[key_position, relpos], ...] for each position]}]}

types are ``SOS W LA RA LA2 RA2 POP`` (arc-eager adds ``POPSTACK``); the whole sentence is one chunk (the
official code is sentence-level); relpos is raw. A non-projective tree is an error naming a crossing arc.
"""

from __future__ import annotations

from lightning_modules.data.dependency import DepTree, parse_conllu, read_conllu
from lightning_modules.errors import InputError


def read_sources(tree: str | None, trees_file: str | None) -> list[tuple[str, DepTree]]:
    """(location, tree) of ``--tree`` (one CoNLL-U sentence) or of every sentence of ``--trees-file``."""
    if tree is not None:
        sentences = parse_conllu(tree, "--tree")
        if len(sentences) != 1:
            raise InputError(f"expected one CoNLL-U sentence, found {len(sentences)}", "--tree")
        return [("--tree", sentences[0][1])]
    return [(f"{trees_file}:{line}", item) for line, item in read_conllu(trees_file)]


def inspect_sentence(tree: DepTree, system: str = "standard") -> dict:
    """The inspect JSON record of one CoNLL-U sentence under ``system`` (module docstring)."""
    from lightning_modules.families.dtg.encoding import TYPE_NAMES, encode

    seq = encode(tree, system)
    keys, rels = seq.attend_key.tolist(), seq.attend_rel.tolist()
    ptr = seq.attend_ptr.tolist()
    attend = [[[keys[j], rels[j]] for j in range(ptr[i], ptr[i + 1])] for i in range(len(seq))]
    return {
        "tokens": seq.tokens,
        "types": [TYPE_NAMES[t] for t in seq.types.tolist()],
        "labels": seq.labels,
        "arc_heads": [None if h < 0 else h for h in seq.arc_heads.tolist()],
        "chunks": [{"start": 0, "attend": attend}],
    }
