"""benchmarks/seed_group.py --padding for a family whose batches are whole sentences (Pushdown-LM): the packed
group computes fewer token slots per useful token than the padded one, and the summary lines are printed."""

from __future__ import annotations

import re

from benchmarks import seed_group as bench


def test_padding_report_of_pushdown_batches(prepared_data_dir, monkeypatch, capsys) -> None:
    monkeypatch.setenv("SYNBENCH_DATA", str(prepared_data_dir))
    bench.main(["--padding", "--family", "pushdown", "--preset", "cpu-small", "--sizes", "1", "4", "--batch-size",
                "8", "--steps", "1"])
    out = capsys.readouterr().out
    rows = {int(m[0]): [float(v) for v in m[1:4]] for m in re.findall(
        r"^\s+(\d+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s", out, re.M)}
    assert set(rows) == {1, 4}
    solo, padded, packed = rows[4]
    assert packed > padded and 0 < packed <= 1
    assert re.search(r"^useful-token fraction S=4: 0\.\d\d$", out, re.M)
