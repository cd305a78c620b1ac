"""benchmarks/paper_cost.py --eval at toy settings: every evaluation of the protocol is timed on a sample of its
own sentences and extrapolated to its whole size (PTB test, all SyntaxGym suites, all of BLiMP, counted from
the prepared data), and the table is printed; --train on a tiny model: TG Table 1's protocol read from
reproduce-tg-paper, solo runs, packed runs and a seed group each timed by three real runs and extrapolated."""

from __future__ import annotations

import pytest

from benchmarks import paper_cost as bench


def test_eval_cost_times_every_evaluation_and_extrapolates(prepared_data_dir, capsys) -> None:
    rows = bench.main(["--eval", "--preset", "cpu-small", "--sample", "1", "--proposals", "4", "--beam", "3", "2",
                       "2", "--data-dir", str(prepared_data_dir), "--threads", "1"])
    assert [r.name for r in rows] == ["ppl N=4", "ppl beam", "sg", "blimp"]
    assert (rows[0].sentences, rows[0].words) == bench.PTB_TEST
    sg, blimp = rows[2], rows[3]
    assert sg.sentences == len(bench.sg_sentences(str(prepared_data_dir))) > 3000  # 34 suites' conditions
    assert blimp.sentences == 2 * 67 * 1000
    for r in rows:
        assert 0 < r.sample_words < r.words and r.seconds > 0
        assert r.minutes == pytest.approx(r.seconds / r.sample_words * r.words / 60)
    out = capsys.readouterr().out
    assert "full protocol (ppl N=4, sg, blimp)" in out and "beam 3/2, <= 2 actions" in out


def test_train_cost_reads_table1_from_the_spec() -> None:
    protocols = bench.table1()
    assert [p.model for p in protocols] == list(bench.TABLE1)
    assert [p.family for p in protocols] == ["tg", "txl-trees", "txl-terminals"]
    for p in protocols:  # the paper's protocol: 100 seeds, 100,000 steps, validation every 500 (TG §3)
        assert (p.preset, p.seeds, p.steps, p.val_every) == ("ptb", 100, 100_000, 500)
        assert "data.corpus=ptb" in p.overrides


def test_train_cost_times_solo_packed_and_group_runs_and_extrapolates(prepared_data_dir, monkeypatch,
                                                                     capsys) -> None:
    monkeypatch.setenv("SYNBENCH_DATA", str(prepared_data_dir))
    protocols, rows = bench.main(["--train", "--preset", "cpu-small", "--tiny", "--models", "tg", "--steps", "2",
                                  "--runs-per-gpu", "2", "--group", "2", "--cpus", "2"])
    assert [r.way for r in rows] == ["solo", "group 2", "packed 2"]
    (tg,) = protocols
    for r in rows:
        assert r.hours(tg) == pytest.approx(100 * (100_000 * max(r.step, 0) + 200 * max(r.validation, 0)) / 3600)
    out = capsys.readouterr().out
    assert "training cost of TG Table 1 (reproduce-tg-paper) on cpu (" in out
    for r in rows:
        assert f"TG Table 1 training, {r.way}: {r.hours(tg):,.1f} device-hours on cpu (" in out


def test_train_cost_refuses_mps_off_cuda_bad_sizes_and_unknown_models(capsys) -> None:
    for argv in (["--train", "--mps"], ["--train", "--group", "1"], ["--train", "--steps", "0"],
                 ["--train", "--models", "tg", "gpt"]):
        with pytest.raises(SystemExit) as stop:
            bench.main(argv)
        assert stop.value.code == 2
        err = capsys.readouterr().err
        assert err.startswith("synbench: error: ") and err.count("\n") == 1


def test_a_way_that_fails_is_printed_and_the_rest_goes_on(prepared_data_dir, monkeypatch, capsys) -> None:
    monkeypatch.setenv("SYNBENCH_DATA", str(prepared_data_dir))
    _, rows = bench.main(["train.batch_size=0", "--train", "--preset", "cpu-small", "--tiny", "--models", "tg",
                          "--steps", "1", "--runs-per-gpu", "--group"])  # refused by every run: exit 2
    assert rows == []
    out = capsys.readouterr().out
    assert "            tg       solo  failed: Command " in out and "TG Table 1 training," not in out
