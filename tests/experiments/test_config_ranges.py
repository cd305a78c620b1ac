"""Config values out of range are one error naming the key, before anything is trained or written."""

from __future__ import annotations

import math

import pytest

from experiments.config import resolve_train_config
from experiments.config_ranges import Range, check_ranges
from experiments.families import get_family, names
from lightning_modules.errors import InputError


@pytest.mark.parametrize("family", [n for n in names() if get_family(n).source_prefix is None])
def test_every_shipped_preset_is_in_range(family):
    models, _ = get_family(family).model_presets()
    for preset in set(models) & set(get_family(family).train_presets()):
        resolve_train_config(family, preset)


@pytest.mark.parametrize(
    "override, message",
    [
        ("train.batch_size=0", r"train.batch_size: 0 is out of range \[1, inf\)"),
        ("train.max_steps=-5", r"train.max_steps: -5 is out of range \[1, inf\)"),
        ("train.max_steps=0", r"train.max_steps: 0 is out of range"),
        ("train.accumulate=0", r"train.accumulate: 0 is out of range"),
        ("model.d_model=0", r"model.d_model: 0 is out of range"),
        ("model.attention_dropout=1.0", r"model.attention_dropout: 1.0 is out of range \[0, 1\)"),
        ("model.core_dropout=-0.1", r"model.core_dropout: -0.1 is out of range \[0, 1\)"),
        ("model.peak_lr=0", r"model.peak_lr: 0 is out of range \(0, inf\)"),
        ("model.peak_lr=.nan", r"model.peak_lr: expected a finite number, got nan"),
        ("model.grad_clip_norm=.inf", r"model.grad_clip_norm: expected a finite number, got inf"),
        ("model.min_lr=-1", r"model.min_lr: -1 is out of range \[0, inf\)"),
        ("model.adam_beta2=1.0", r"model.adam_beta2: 1.0 is out of range \[0, 1\)"),
        ("model.min_rel=3", r"model.min_rel: 3 is out of range \(-inf, 0\]"),
    ],
)
def test_out_of_range_values_name_the_key(override, message):
    with pytest.raises(InputError, match=message):
        resolve_train_config("tg", "cpu-small", [override])


def test_zero_is_allowed_where_it_means_none():
    cfg = resolve_train_config("tg", "cpu-small", ["model.warmup_steps=0", "model.core_dropout=0.0"])
    assert cfg["model"]["warmup_steps"] == 0
    assert resolve_train_config("pushdown", "cpu-small", ["model.pushdown_layers=-1"])["model"]["pushdown_layers"] == -1
    with pytest.raises(InputError, match="pushdown_layers: -2 is out of range"):
        resolve_train_config("pushdown", "cpu-small", ["model.pushdown_layers=-2"])
    # PaLM: an untrained model (Table 4's random row), no finetuning stage, the NT trigger's switch, the step
    # schedule
    palm = resolve_train_config("palm-u", "cpu-small", ["train.max_steps=0", "model.finetune_at=0",
                                                        "model.finetune_min=0", "model.switch_after=0",
                                                        "model.epochs=0"])
    assert palm["train"]["max_steps"] == 0
    with pytest.raises(InputError, match="train.max_steps: -1 is out of range"):
        resolve_train_config("palm-u", "cpu-small", ["train.max_steps=-1"])


def test_a_family_adds_ranges_of_its_own_keys():
    cfg = {"model": {"slots": 15, "span_lambda": 0.5}}
    check_ranges(cfg)
    with pytest.raises(InputError, match=r"model.span_lambda: 1.5 is out of range \[0, 1\]"):
        check_ranges({"model": {"span_lambda": 1.5}}, {"span_lambda": Range(0, 1)})
    with pytest.raises(InputError, match=r"model.slots: 0 is out of range"):
        check_ranges({"model": {"slots": 0}})
    assert str(Range(0, math.inf, low_open=True)) == "(0, inf)"


def test_cli_prints_one_line_and_writes_nothing(tmp_path, capsys):
    from experiments import cli

    run_dir = tmp_path / "run"
    code = cli.main(["train", "tg", "--run-dir", str(run_dir), "train.batch_size=0"])
    out, err = capsys.readouterr()
    assert code == 2 and out == ""
    assert err == "synbench: error: train.batch_size: 0 is out of range [1, inf)\n"
    assert not run_dir.exists()
