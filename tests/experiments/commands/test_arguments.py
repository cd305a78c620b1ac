"""CLI options are checked as they are parsed; usage errors follow the one-line convention."""

from __future__ import annotations

import json

import pytest

from experiments import cli


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize(
    "argv, message",
    [
        (("sample", "x.ckpt", "--temperature", "nan"), "argument --temperature: expected a finite number, got 'nan'"),
        (("sample", "x.ckpt", "--temperature", "0"), "argument --temperature: expected a finite number > 0, got '0'"),
        (("sample", "x.ckpt", "-n", "0"), "argument -n: expected an integer >= 1, got '0'"),
        (("train", "tg", "--seed", "-1"), "argument --seed: expected an integer >= 0, got '-1'"),
        (("train", "tg", "--seed", "x"), "argument --seed: expected an integer, got 'x'"),
        (("eval", "ppl", "x.ckpt", "--limit", "0"), "argument --limit: expected an integer >= 1, got '0'"),
        (("eval", "ppl", "x.ckpt", "--beam", "-3"), "argument --beam: expected an integer >= 1, got '-3'"),
        (("tune", "x.yaml", "--n-trials", "-1"), "argument --n-trials: expected an integer >= 0, got '-1'"),
        (("reproduce", "tg", "--poll", "inf"), "argument --poll: expected a finite number, got 'inf'"),
        (("train", "tg", "--bogus"), "unrecognized arguments: --bogus"),
        (("status", "x", "a=b"), "unrecognized arguments: a=b"),
    ],
)
def test_bad_options_are_one_line(capsys, argv, message):
    code, out, err = run(capsys, *argv)
    assert (code, out, err) == (2, "", f"synbench: error: {message}\n")


def test_overrides_are_accepted_after_options(capsys):
    code, out, _ = run(capsys, "train", "tg", "--preset", "cpu-small", "train.max_steps=5", "--seed", "3",
                       "model.n_layers=2", "--print-config")
    config = json.loads(out)
    assert code == 0 and config["seed"] == 3
    assert config["train"]["max_steps"] == 5 and config["model"]["n_layers"] == 2
    code, before, _ = run(capsys, "train", "tg", "train.max_steps=5", "model.n_layers=2", "--seed", "3",
                          "--print-config")
    assert before == out
