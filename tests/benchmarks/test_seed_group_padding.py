"""benchmarks/seed_group.py --padding for families whose batches are whole sentences (Pushdown-LM; the proposal
parser, whose useful tokens are its gold actions): the packed group computes fewer token slots per useful token
than the padded one, and the summary lines are printed."""

from __future__ import annotations

import re

import pytest

from benchmarks import seed_group as bench


@pytest.mark.parametrize("family", ["pushdown", "proposal-parser"])
def test_padding_report_of_sentence_batches(family, prepared_data_dir, monkeypatch, capsys) -> None:
    monkeypatch.setenv("SYNBENCH_DATA", str(prepared_data_dir))
    bench.main(["--padding", "--family", family, "--preset", "cpu-small", "--sizes", "1", "4", "--batch-size",
                "8", "--steps", "1"])
    out = capsys.readouterr().out
    rows = {int(m[0]): [float(v) for v in m[1:4]] for m in re.findall(
        r"^\s+(\d+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s", out, re.M)}
    assert set(rows) == {1, 4}
    solo, padded, packed = rows[4]
    assert packed > padded and 0 < packed <= 1
    assert re.search(r"^useful-token fraction S=4: 0\.\d\d$", out, re.M)
