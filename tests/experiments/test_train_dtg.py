"""End-to-end training of tiny ``cpu-small`` DTG and TXL (trans) runs on UD EWT train (validated on dev), and of
arc-eager / arc-swift DTG through a config override; counts of the sentences left out."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from experiments.checkpoints import read_checkpoint
from experiments.config import resolve_train_config
from experiments.train import train
from lightning_modules.errors import InputError

TINY = ["model.d_model=32", "model.n_layers=2", "model.n_heads=2", "model.d_ff=64", "model.warmup_steps=4",
        "model.total_steps=40", "model.peak_lr=3e-3", "train.batch_size=8", "train.eval_batch_size=64",
        "train.max_steps=10", "train.val_every=10", "train.ckpt_every=10", "train.log_every=1",
        "runtime.wandb=disabled", "runtime.progress=false", "runtime.threads=1"]


@pytest.mark.parametrize("family", ["dtg", "txl-trans"])
def test_cpu_small_trains_on_ud_ewt(tmp_path: Path, prepared_data_dir: Path, family: str) -> None:
    cfg = resolve_train_config(family, "cpu-small", [*TINY, f"runtime.data_dir={prepared_data_dir}"])
    assert cfg["data"]["corpus"] == "ud-ewt" and cfg["data"]["valid_split"] == "dev"
    metrics = train(cfg, seed=1, run_dir=tmp_path / "run")
    assert metrics["global_step"] == 10
    # UD EWT 2.16: 288 of the 12,544 training and 31 of the 2,001 dev trees are non-projective
    assert (metrics["train_nonprojective"], metrics["valid_nonprojective"]) == (288, 31)
    # DTG sequences are 3n tokens: sentences of more than 85 words exceed the 256-token segment; TXL (trans)
    # sequences are 2n + 1 tokens (one sentence of more than 127 words)
    assert metrics["train_too_long"] == (12 if family == "dtg" else 1) and metrics["valid_too_long"] == 0
    assert metrics["valid_sequences"] == 1970 and metrics["val_words"] == 24215
    assert metrics["val_token_ppl"] < metrics["vocab_size"] / 4  # learning: well below the uniform distribution
    assert metrics["val_word_ppl_convention"] == "gold-tree bound exp(-log p(x, y_gold) / words)"
    assert json.loads((tmp_path / "run" / "DONE").read_text()) == metrics
    ckpt = read_checkpoint(tmp_path / "run" / "checkpoints" / "best.ckpt", family)
    assert ckpt["synbench"]["vocab"]["system"] == "standard"


def small_corpus(tmp_path: Path) -> Path:
    row = "{i}\t{w}\t_\t_\t_\t_\t{h}\t_\t_\t_\n"
    sentences = [("There is a difference .", (2, 0, 4, 2, 2)), ("the cat sat on the mat .", (2, 3, 0, 6, 6, 3, 3))]
    path = tmp_path / "small.conllu"
    path.write_text("".join("".join(row.format(i=i, w=w, h=h) for i, (w, h) in enumerate(zip(s.split(), hs), 1))
                            + "\n" for s, hs in sentences * 4))
    return path


@pytest.mark.parametrize("system", ["eager", "swift"])
def test_other_systems_train_through_the_config(tmp_path: Path, system: str) -> None:
    cfg = resolve_train_config("dtg", "cpu-small", [*TINY, f"data.corpus={small_corpus(tmp_path)}",
                                                    "data.train_split=file", "data.valid_split=file",
                                                    f"model.system={system}"])
    metrics = train(cfg, seed=2, run_dir=tmp_path / "run")
    assert metrics["global_step"] == 10 and metrics["train_sequences"] == 8
    assert read_checkpoint(tmp_path / "run" / "checkpoints" / "best.ckpt", "dtg")["synbench"]["vocab"]["system"] \
        == system


def test_same_seed_same_metrics(tmp_path: Path) -> None:
    cfg = resolve_train_config("txl-trans", "cpu-small", [*TINY, f"data.corpus={small_corpus(tmp_path)}",
                                                          "data.train_split=file", "data.valid_split=file"])
    a, b, c = (train(cfg, seed=s, run_dir=tmp_path / name) for s, name in ((5, "a"), (5, "b"), (6, "c")))
    assert {k: v for k, v in a.items() if k != "run_dir"} == {k: v for k, v in b.items() if k != "run_dir"}
    assert a["val_token_nll"] != c["val_token_nll"]


def test_bad_system_names_its_key() -> None:
    with pytest.raises(InputError) as info:
        from lightning_modules.families.dtg.model import config_from_dict

        config_from_dict(resolve_train_config("dtg", "cpu-small", ["model.system=hybrid"])["model"])
    assert info.value.location == "model.system"


def test_the_split_head_trains_in_a_seed_group_as_solo(tmp_path: Path) -> None:
    """Arc-standard DTG with the official split head (the presets' ``output_head: official``) in a seed group:
    its hidden-state tap keeps no tensor once the head has read it (the group's batched tensors once broke the
    checkpoint copy), and each seed ends where its solo run ends (dropout 0)."""
    from experiments.seed_group import train_group
    from lightning_modules.families.dtg.model import config_from_dict, split_head
    from tests.experiments.test_seed_group import close
    from tests.experiments.test_seed_group_families import without_dropout

    cfg = without_dropout("dtg", [*TINY, "train.max_steps=4", "train.val_every=2", "train.ckpt_every=2",
                                  f"data.corpus={small_corpus(tmp_path)}", "data.train_split=file",
                                  "data.valid_split=file"])
    assert split_head(config_from_dict(cfg["model"]))
    group = train_group(cfg, [0, 1], [tmp_path / "g0", tmp_path / "g1"])
    solo = train(cfg, 1, tmp_path / "solo")
    group[1].pop("device"), solo.pop("device")
    assert close(group[1], solo)
