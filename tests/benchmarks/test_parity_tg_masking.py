"""benchmarks/parity_tg_masking.py without the official checkout: its reading of the official library's chunk
matrices (fed the library's golden L = M = 4 chunks) and its comparison with ``synbench inspect``."""

from __future__ import annotations

import numpy as np
import pytest

from benchmarks import parity_tg_masking as parity
from benchmarks.parity_common import Report
from lightning_modules.data.tree import parse_tree
from tests.experiments.test_inspect import PLAIN_CHUNKS, SMART_CHUNKS, TG_ATTEND, tg_record
from tests.lightning_modules.families.tg.test_tg import CHUNKS, DEPTH, INPUTS, LABELS, OFFICIAL_IDS, TYPES

CAT = "(S (NP (DT the) (JJ hungry) (NN cat)) (VP (VBZ meows)))"
CC_TYPES = [1, 2, 2, 3, 3, 3, 4, 2, 3, 4, 4]  # <s> (S (NP the hungry cat NP) (VP meows VP) S)


def bits(rows: list[str]) -> np.ndarray:
    return np.array([[int(c) for c in row] for row in rows], dtype=np.int32)


class GoldenRules:
    """Stands in for ``StackComposeDoubleClosingNT(4, 4)``: returns the official library's golden chunks."""

    def __init__(self, memory: str):
        self.memory = memory

    def chunks_for_sequence(self, inputs, input_types, labels, label_types):
        assert inputs.tolist() == list(range(1, 12)) and input_types.tolist() == CC_TYPES
        assert labels.tolist() == [*range(2, 12), 0] and label_types.tolist() == [*CC_TYPES[1:], 0]
        chunks = []
        for c, (mem_pos, attn, mem_attn, relpos, _) in enumerate(CHUNKS[self.memory]):
            z = np.zeros(4, dtype=np.int32)
            chunks.append((np.array(INPUTS[c]), np.array(TYPES[c]), np.array(LABELS[c]), z, bits(attn),
                           np.array(relpos), z, bits(mem_attn), z, np.array(mem_pos), np.array(DEPTH[c])))
        return chunks


class GoldenOfficial:
    def sequence(self, tree_text: str) -> tuple[list[str], list[int]]:
        assert tree_text == CAT
        return OFFICIAL_IDS[1:], CC_TYPES

    def rules(self, family: str, length: int, memory: str) -> GoldenRules:
        assert (family, length) == ("tg", 4)
        return GoldenRules(memory)


@pytest.mark.parametrize(("memory", "chunks"), [("smart", SMART_CHUNKS), ("plain", PLAIN_CHUNKS)])
def test_official_record_reads_the_golden_chunks(memory: str, chunks: list[dict]) -> None:
    assert parity.official_record(GoldenOfficial(), CAT, "tg", 4, memory) == tg_record(chunks)


def test_settings_and_inspect_arguments() -> None:
    names = [s[0] for s in parity.settings([8])]
    assert names == ["tg one chunk", "tg L=8 smart memory", "tg L=8 plain memory", "txl one chunk", "txl L=8"]
    assert parity.inspect_argv("tg", 8, "plain", "f") == ["inspect", "tg", "--trees-file", "f", "--jsonl",
                                                           "--segment-length", "8", "--memory", "plain"]
    assert parity.inspect_argv("txl", None, "plain", "f") == ["inspect", "txl", "--trees-file", "f", "--jsonl"]


def golden_reference(text: str, family: str, length: int | None, memory: str) -> dict:
    """The official records of CAT (test_inspect.py), with one relpos of the plain-memory chunks altered."""
    if family == "txl":
        n = 11
        tokens = OFFICIAL_IDS[1:]
        causal = [[[j, i - j] for j in range(i + 1)] for i in range(n)]
        chunk_length = length or n
        attend = [[[j, r] for j, r in row if j >= (i // chunk_length - 1) * chunk_length]
                  for i, row in enumerate(causal)]
        return {"tokens": tokens, "types": ["SOS", "ONT", "ONT", "T", "T", "T", "CNT", "ONT", "T", "CNT", "CNT"],
                "labels": [*tokens[1:], None], "depth": [0] * n,
                "chunks": [{"start": s, "attend": attend[s : s + chunk_length]} for s in range(0, n, chunk_length)]}
    if length is None:
        return tg_record([{"start": 0, "attend": TG_ATTEND}])
    chunks = SMART_CHUNKS if memory == "smart" else [dict(c) for c in PLAIN_CHUNKS]
    if memory == "plain":
        chunks[3] = {"start": 12, "attend": [[[10, -2], [12, 0]], [[12, 0], [13, 0]]]}
    return tg_record(chunks)


def test_compare_counts_and_shows_differences(capsys) -> None:
    report = Report(show=1)
    parity.compare([("cat:1", parse_tree(CAT))], [4], golden_reference, report)
    assert report.compared == dict.fromkeys(
        ["tg one chunk", "tg L=4 smart memory", "tg L=4 plain memory", "txl one chunk", "txl L=4"], 1)
    assert report.identical["tg L=4 plain memory"] == 0 and not report.ok
    assert sum(report.identical.values()) == 4
    assert report.finish("title") == 1
    out = capsys.readouterr().out
    assert "chunks[3].attend[0][0][1]: ours -1  official -2" in out and out.endswith("RESULT: DIFFERENT\n")


def test_build_refuses_a_folder_without_the_masking_sources(tmp_path, capsys) -> None:
    with pytest.raises(SystemExit, match="^2$"):
        parity.build_library(tmp_path, tmp_path / "build")
    assert "not a transformer_grammars checkout" in capsys.readouterr().err
