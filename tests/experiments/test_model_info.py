"""``synbench model-info``: parameter counts of every preset, the official 251,887,616, clear errors."""

from __future__ import annotations

import json

import pytest

from experiments.cli import main
from experiments.commands.model_info import model_info

MODEL_FAMILIES = ("tg", "txl-trees", "txl-terminals")


def run_json(capsys, *argv: str) -> dict:
    assert main(["model-info", *argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_bllip_preset_is_the_official_251_887_616(capsys):
    info = run_json(capsys, "tg", "--preset", "bllip")
    assert info["parameters"] == 251_887_616
    assert sum(info["parts"].values()) == 251_887_616
    assert info["config"]["d_model"] == 1024 and info["config"]["vocab_size"] == 32768


@pytest.mark.parametrize("family", MODEL_FAMILIES)
@pytest.mark.parametrize("preset", ["bllip", "ptb", "cpu-small"])
def test_every_preset_builds_and_txl_matches_tg_in_size(family, preset):
    info = model_info(family, preset)
    assert info["parameters"] == model_info("tg", preset)["parameters"]


def test_ptb_preset_is_about_12m_and_vocab_override_counts_embeddings_once(capsys):
    base = run_json(capsys, "tg", "--preset", "ptb")
    assert 11_500_000 < base["parameters"] < 12_500_000
    bigger = run_json(capsys, "tg", "--preset", "ptb", "--vocab-size", str(base["config"]["vocab_size"] + 10))
    assert bigger["parameters"] - base["parameters"] == 10 * (base["config"]["d_model"] + 1)


def test_human_readable_output(capsys):
    assert main(["model-info", "txl-trees", "--preset", "cpu-small"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("txl-trees / cpu-small: ") and "embedding" in out


@pytest.mark.parametrize(("argv", "message"), [
    (["tg", "--preset", "huge"], "no preset 'huge'"),
    (["tg", "--preset", "bllip", "--vocab-size", "0"], "argument --vocab-size: expected an integer >= 1, got '0'"),
])
def test_bad_input_is_one_error_line_and_exit_2(capsys, argv, message):
    assert main(["model-info", *argv, "--json"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith("synbench: error: ") and message in captured.err
    assert captured.err.count("\n") == 1
