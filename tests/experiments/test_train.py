"""End-to-end training of tiny TG-family models: runs, checkpoints, exact resume, bad input."""

import csv
import json
from pathlib import Path

import pytest
import torch

from experiments.checkpoints import read_checkpoint
from experiments.cli import main
from experiments.config import config_hash, resolve_train_config, run_id
from experiments.runs import kept_checkpoints
from experiments.train import train, trainer_schedule
from lightning_modules.data.tree import read_bracketed, to_bracketed
from lightning_modules.errors import InputError

TINY = ["model.d_model=32", "model.n_layers=2", "model.n_heads=2", "model.d_ff=64", "model.warmup_steps=4",
        "model.total_steps=40", "model.peak_lr=3e-3", "train.batch_size=4", "train.eval_batch_size=8",
        "train.log_every=1", "runtime.wandb=disabled", "runtime.progress=false", "runtime.threads=1"]


@pytest.fixture(scope="module")
def small_treebank(tmp_path_factory, shared_data):
    trees = [t for f in ("wsj_0001.mrg", "wsj_0002.mrg", "wsj_0003.mrg", "wsj_0004.mrg")
             for _, t in read_bracketed(shared_data / "ptb_nltk_sample" / "combined" / f)]
    path = tmp_path_factory.mktemp("tb") / "small.mrg"
    path.write_text("".join(to_bracketed(t) + "\n" for t in trees[:40]))
    return path


def config(family, treebank, *extra):
    return resolve_train_config(family, "cpu-small", TINY + [
        f"data.corpus={treebank}", "data.train_split=file", "data.valid_split=file", *extra])


def train_losses(run_dir: Path) -> dict[int, float]:
    out = {}
    for path in sorted(run_dir.glob("csv/version_*/metrics.csv")):
        with path.open() as f:
            for row in csv.DictReader(f):
                if row.get("train/loss"):
                    out[int(row["step"])] = float(row["train/loss"])
    return out


@pytest.mark.parametrize("family", ["tg", "txl-trees", "txl-terminals"])
def test_tiny_model_trains_and_checkpoints(tmp_path, small_treebank, family):
    cfg = config(family, small_treebank, "train.max_steps=12", "train.val_every=6", "train.ckpt_every=6")
    metrics = train(cfg, seed=1, run_dir=tmp_path / "run")
    assert metrics["global_step"] == 12
    assert metrics["val_token_ppl"] < metrics["unigram_val_token_ppl"] * 3  # sane scale, not diverged
    assert json.loads((tmp_path / "run" / "DONE").read_text()) == metrics
    ckpt = read_checkpoint(tmp_path / "run" / "checkpoints" / "best.ckpt", family)
    assert ckpt["synbench"]["family"] == family and "actions" in ckpt["synbench"]["vocab"]
    other = "tg" if family != "tg" else "txl-trees"
    with pytest.raises(InputError, match="expected"):
        read_checkpoint(tmp_path / "run" / "checkpoints" / "best.ckpt", other)
    assert train(cfg, seed=1, run_dir=tmp_path / "run") == metrics  # DONE: never trained twice


def test_resume_mid_epoch_reproduces_uninterrupted_run(tmp_path, small_treebank):
    full = config("tg", small_treebank, "train.max_steps=12", "train.val_every=4", "train.ckpt_every=4")
    reference = train(full, seed=3, run_dir=tmp_path / "full")
    # "killed" after step 8 (mid-epoch: 10 batches per epoch), then the same run is started again
    part = config("tg", small_treebank, "train.max_steps=8", "train.val_every=4", "train.ckpt_every=4")
    train(part, seed=3, run_dir=tmp_path / "resumed")
    (tmp_path / "resumed" / "DONE").unlink()
    resumed = train(full, seed=3, run_dir=tmp_path / "resumed")
    assert train_losses(tmp_path / "resumed") == train_losses(tmp_path / "full")
    assert len(train_losses(tmp_path / "full")) == 12
    assert resumed["best_val_loss"] == reference["best_val_loss"]
    assert resumed["val_token_nll"] == reference["val_token_nll"]


def test_keep_every_keeps_a_checkpoint_every_n_steps_through_a_resume(tmp_path, small_treebank, capsys):
    """Steps 3, 6, 9 (never step 0, once per step however many batches it accumulates), whole checkpoints
    equal to an uninterrupted run's after a kill at step 4; part of the run id only when set."""
    keep = ["train.accumulate=2", "train.val_every=4", "train.ckpt_every=4", "train.keep_every=3"]
    full = config("txl-terminals", small_treebank, "train.max_steps=9", *keep)
    train(full, seed=2, run_dir=tmp_path / "full")
    part = config("txl-terminals", small_treebank, "train.max_steps=4", *keep)  # killed after last.ckpt at 4
    train(part, seed=2, run_dir=tmp_path / "resumed")
    assert list(kept_checkpoints(tmp_path / "resumed")) == [3]
    (tmp_path / "resumed" / "DONE").unlink()
    train(full, seed=2, run_dir=tmp_path / "resumed")
    kept = kept_checkpoints(tmp_path / "resumed")
    assert list(kept) == list(kept_checkpoints(tmp_path / "full")) == [3, 6, 9]
    for step, path in kept.items():
        ours, theirs = read_checkpoint(path, "txl-terminals"), read_checkpoint(tmp_path / "full" / path.relative_to(
            tmp_path / "resumed"))
        assert ours["global_step"] == step and "optimizer_states" in ours and ours["synbench"]["seed"] == 2
        assert all(torch.equal(value, theirs["state_dict"][key]) for key, value in ours["state_dict"].items())
    unset = config("txl-terminals", small_treebank)
    assert unset["train"]["keep_every"] is None and run_id(unset, 0) != run_id(full, 0)
    assert config_hash(unset) == config_hash({**unset, "train": {k: v for k, v in unset["train"].items()
                                                                 if k != "keep_every"}})  # earlier ids stay
    for value, message in (("0", "0 is out of range [1, inf)"), ("2.5", "expected an integer or null, got 2.5")):
        assert main(["train", "tg", f"train.keep_every={value}"]) == 2
        assert capsys.readouterr().err == f"synbench: error: train.keep_every: {message}\n"


def test_same_seed_same_metrics_different_seed_differs(tmp_path, small_treebank):
    cfg = config("txl-terminals", small_treebank, "train.max_steps=6", "train.val_every=6", "train.ckpt_every=6")
    a = train(cfg, seed=5, run_dir=tmp_path / "a")
    b = train(cfg, seed=5, run_dir=tmp_path / "b")
    c = train(cfg, seed=6, run_dir=tmp_path / "c")
    assert a["val_token_nll"] == b["val_token_nll"] != c["val_token_nll"]


def test_bad_config_and_corrupted_checkpoint(tmp_path, capsys, small_treebank):
    assert main(["train", "tg", "train.max_stepz=3"]) == 2
    assert "synbench: error: train.max_stepz: unknown config key" in capsys.readouterr().err
    assert main(["train", "tg", "model.d_model=abc"]) == 2
    assert "model.d_model" in capsys.readouterr().err
    assert main(["train", "nosuch"]) == 2
    bad = tmp_path / "bad.ckpt"
    bad.write_bytes(b"not a checkpoint")
    with pytest.raises(InputError, match="cannot read checkpoint"):
        read_checkpoint(bad, "tg")


@pytest.mark.parametrize("family", ["tg", "txl-trees", "txl-terminals"])
def test_samples_are_well_formed(tmp_path, small_treebank, family):
    from experiments.families.tg.sample import sample
    from lightning_modules.data.tree import parse_tree

    cfg = config(family, small_treebank, "train.max_steps=4", "train.val_every=4", "train.ckpt_every=4")
    train(cfg, seed=0, run_dir=tmp_path / "run")
    samples = sample(str(tmp_path / "run" / "checkpoints" / "best.ckpt"), n=4, seed=1, max_length=25)
    assert len(samples) == 4
    for s in samples:
        assert s.logprob < 0 and s.words
        if family == "txl-terminals":
            assert s.actions[-1] == "</s>" and s.tree is None
            continue
        assert parse_tree(str(s.tree)) == s.tree  # balanced, one root
        assert s.tree.leaves() == s.words
        assert all(any(isinstance(c, str) for c in t.children) or t.leaves() for t in s.tree.subtrees())
    assert main(["sample", str(tmp_path / "nope.ckpt")]) == 2


def test_diverging_loss_stops_with_the_step(tmp_path, small_treebank, capsys):
    overrides = [*TINY, f"data.corpus={small_treebank}", "data.train_split=file", "data.valid_split=file",
                 "model.peak_lr=1e6", "model.start_lr=1e6", "train.max_steps=30", "train.val_every=30",
                 "train.ckpt_every=30"]
    assert main(["train", "txl-terminals", *overrides, "--run-dir", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err.startswith("synbench: error: training step ") and "diverged" in err
    assert (tmp_path / "run" / "FAILED").read_text().startswith("training step ")
    assert not (tmp_path / "run" / "DONE").exists()
    assert not list((tmp_path / "run").glob("checkpoints/*.ckpt"))  # nothing written from NaN weights


class _Payload:
    """An object only a full unpickler can build: ``weights_only=True`` refuses it."""

    def __reduce__(self):
        return (print, ("code ran while loading a checkpoint",))


@pytest.mark.parametrize("damage", ["truncated", "pickle"])
def test_resume_refuses_a_damaged_or_unsafe_last_checkpoint(tmp_path, small_treebank, capsys, damage):
    run_dir = tmp_path / "run"
    (run_dir / "checkpoints").mkdir(parents=True)
    last = run_dir / "checkpoints" / "last.ckpt"
    if damage == "truncated":
        last.write_bytes(b"PK\x03\x04 half a zip")
    else:
        torch.save({"synbench": {"family": "tg"}, "state_dict": {}, "x": _Payload()}, last)
    overrides = [*TINY, f"data.corpus={small_treebank}", "data.train_split=file", "data.valid_split=file",
                 "train.max_steps=4"]
    assert main(["train", "tg", *overrides, "--run-dir", str(run_dir)]) == 2
    out, err = capsys.readouterr()
    assert "code ran" not in out + err
    assert err.count("\n") == 1 and err.startswith(f"synbench: error: {last}: cannot read checkpoint")
    assert not (run_dir / "DONE").exists()


def test_the_schedule_is_in_steps_or_in_epochs_and_a_step_schedule_needs_its_numbers():
    steps = {"max_steps": 100, "val_every": 25}
    assert trainer_schedule(steps, 0) == (100, {"val_check_interval": 25, "check_val_every_n_epoch": None})
    per_epoch = {"val_check_interval": 1.0, "check_val_every_n_epoch": 1, "max_epochs": 500}
    assert trainer_schedule({"max_steps": None, "val_every": None}, 500) == (-1, per_epoch)
    assert trainer_schedule({"max_steps": 0, "val_every": None}, 500) == (0, per_epoch)  # an untrained model
    with pytest.raises(InputError, match="counted in steps") as missing:
        trainer_schedule({"max_steps": 100, "val_every": None}, 0)
    assert missing.value.location == "train.val_every"
