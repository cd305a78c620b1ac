"""The disk cache of dependency conversions serves exactly what the converter gives, and never a stale or
broken entry."""

from pathlib import Path

import pytest

from lightning_modules.data import corpora
from lightning_modules.data.conversion_cache import cache_dir

TREES = """\
(ROOT (S (NP-SBJ (DT The) (NN cat)) (VP (VBD sat) (PP-LOC (IN on) (NP (DT the) (NN mat)))) (. .)))
(ROOT (S (NP-SBJ (PRP It)) (VP (VBZ is) (ADJP-PRD (JJ happy))) (. .)))
"""


def _read(path: Path, scheme: str):
    corpora._CACHE.clear()  # the per-process cache would answer before the disk cache
    return corpora._read_documents(path, "dependency", scheme)


@pytest.fixture
def treebank(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("SYNBENCH_CACHE", str(tmp_path / "cache"))
    path = tmp_path / "two.mrg"
    path.write_text(TREES)
    return path


def test_a_cached_conversion_equals_the_converter(treebank: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    converted = {scheme: _read(treebank, scheme) for scheme in ("collins", "sd", "ud")}
    assert len(list(cache_dir().glob("*.json"))) == 3  # one entry per scheme
    assert converted["sd"][0].sentences[1][1].heads != converted["collins"][0].sentences[1][1].heads
    # the second read comes from disk: it must not call the converter, and must give the same documents
    monkeypatch.setattr(corpora, "to_scheme", lambda tree, scheme: pytest.fail("converted again"))
    for scheme, documents in converted.items():
        assert _read(treebank, scheme) == documents


def test_an_edited_treebank_or_a_broken_entry_is_converted_again(treebank: Path) -> None:
    first = _read(treebank, "sd")
    (entry,) = cache_dir().glob("*.json")
    entry.write_text('[{"name": "two", "sentences": [["x:1", {"forms": ["a"]}]]}]')  # readable, but not a tree
    assert _read(treebank, "sd") == first
    entry.write_text("{trunc")
    assert _read(treebank, "sd") == first

    treebank.write_text(TREES.splitlines()[0] + "\n")  # the file changes: a new key, the new tree
    edited = _read(treebank, "sd")
    assert len(edited[0].sentences) == 1 and edited[0].sentences[0] == first[0].sentences[0]
    assert len(list(cache_dir().glob("*.json"))) == 2

    moved = treebank.rename(treebank.with_name("moved.mrg"))  # the same bytes elsewhere: its own locations
    assert _read(moved, "sd")[0].sentences[0][0] == f"{moved}:1"
