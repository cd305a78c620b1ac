"""benchmarks/dtg_encoding.py: its rebuild of the official DTG pipeline gives the official library's golden
vectors (``reference-impls.md`` §3.2), and the benchmark runs on a few UD EWT sentences for every system with
its outputs checked equal to synbench's."""

from __future__ import annotations

import numpy as np
import pytest

from benchmarks import dtg_encoding as bench
from lightning_modules.families.dtg.encoding import DTGType as T

# "The cat sat ." heads [1, 2, -1, 2] (0-based): per doubled input, the official C++ library's
# (composed position, {key: relpos})
CAT_TYPES = [T.SOS, T.W, T.W, T.LA, T.LA2, T.W, T.LA, T.LA2, T.W, T.RA, T.RA2, T.POP]
CAT_GOLDEN = [(0, {0: 0}), (1, {0: 1, 1: 0}), (2, {0: 2, 1: 1, 2: 0}), (2, {1: -1, 2: 0, 3: 0}),
              (2, {0: 1, 3: 0, 4: 0}), (5, {0: 2, 3: 1, 5: 0}), (5, {3: -1, 5: 0, 6: 0}), (5, {0: 1, 6: 0, 7: 0}),
              (8, {0: 2, 6: 1, 8: 0}), (5, {6: 0, 8: -1, 9: 0}), (5, {0: 1, 9: 0, 10: 0}), (0, {0: 0, 9: -1, 11: 0})]


def test_official_oracle_gives_the_official_actions() -> None:
    cat = bench.official_oracle([("The", 1), ("cat", 2), ("sat", -1), (".", 2)])
    assert cat == ["The", "cat", "left_arc", "sat", "left_arc", ".", "right_arc", "pop_root"]
    she = bench.official_oracle([("She", 1), ("eats", -1), ("fresh", 3), ("apples", 1)])
    assert she == ["She", "eats", "left_arc", "fresh", "apples", "left_arc", "right_arc", "pop_root"]
    assert bench.official_oracle([("a", 2), ("b", -1), ("c", 0), ("d", 1)]) is None  # crossing arcs


def test_official_attention_gives_the_golden_vectors() -> None:
    info = bench.official_attention(np.array(CAT_TYPES, dtype=np.int32))
    assert [(cp, dict(zip(keys, rel))) for keys, rel, cp, _ in info] == CAT_GOLDEN
    assert info[-1][3] == [11]  # the stack after pop_root: the composed root alone


def test_dense_chunk_and_batch_read_back_the_attention() -> None:
    info = bench.official_attention(np.array(CAT_TYPES, dtype=np.int32))
    chunk = bench.dense_chunk(np.arange(1, 13), np.arange(2, 14), info)
    assert chunk["attention_mask"].shape == (512, 512) and chunk["relpos"].shape == (512, 1024)
    assert chunk["attention_mask"][9, [6, 8, 9]].tolist() == [1, 1, 1] and chunk["attention_mask"][9].sum() == 3
    assert chunk["relpos"][11, 512 + 9] == -1 and chunk["composed_position"][:12].tolist() == [
        cp for cp, _ in CAT_GOLDEN]
    assert chunk["update_memory_from_sequence"][11, 511] == 1


@pytest.mark.parametrize("system", ["standard", "eager", "swift"])
def test_benchmark_runs_with_equal_outputs(system: str, prepared_data_dir, capsys) -> None:
    rate = bench.main(["--system", system, "--sentences", "30", "--repeats", "1", "--batch", "8",
                       "--data-dir", str(prepared_data_dir)])
    assert set(rate) == {"synbench", "reference"} and all(v > 0 for v in rate.values())
    out = capsys.readouterr().out
    assert "outputs checked equal" in out and "ratio: " in out


def test_a_difference_is_caught(prepared_data_dir) -> None:
    trees = bench.ud_trees(str(prepared_data_dir), ("dev",))[:10]
    vocab, words = bench.vocabularies(trees, "standard")
    ours = list(bench.synbench(trees, "standard", vocab, words, 512, 4))
    reference = list(bench.Reference("standard", vocab, words).run(trees, 4))
    kept, tokens = bench.check_equal(ours, reference)
    projective = [t for t in trees if t.is_projective()]
    assert kept == len(projective) and tokens == 3 * sum(len(t) for t in projective)  # arc-standard: 3n tokens
    reference[1]["relpos"][2, 5, 3] += 1
    with pytest.raises(AssertionError):
        bench.check_equal(ours, reference)


def test_library_side_reads_the_library_chunks(prepared_data_dir) -> None:
    """``--official``: the library's chunks (here the stand-in built from the rebuild) give synbench's outputs."""
    from tests.benchmarks.test_parity_dtg_encoding import RebuiltRules

    trees = bench.ud_trees(str(prepared_data_dir), ("dev",))[:12]
    vocab, words = bench.vocabularies(trees, "standard")
    library = bench.LibraryReference(vocab, words, RebuiltRules())
    kept, _ = bench.check_equal(bench.synbench(trees, "standard", vocab, words, 512, 5), library.run(trees, 5))
    assert kept == sum(t.is_projective() for t in trees)
