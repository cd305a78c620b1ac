"""Seed groups (``synbench train FAMILY --seeds A-B``): S seeds of one config trained in one process with stacked
parameters end where their solo runs end (dropout 0), write ordinary run folders, and fail, resume and stop on a
signal per seed. Kills are real (a process SIGKILLs itself inside a step, as in ``test_fault_injection``)."""

from __future__ import annotations

import csv
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import torch

REPO = Path(__file__).resolve().parents[2]
NO_DROPOUT = ["model.embedding_dropout=0", "model.core_dropout=0", "model.core_output_dropout=0",
              "model.attention_dropout=0"]
TINY = ["model.d_model=32", "model.n_layers=2", "model.n_heads=2", "model.d_ff=64", "model.warmup_steps=4",
        "model.total_steps=40", "train.batch_size=4", "train.eval_batch_size=8", "train.log_every=1",
        "runtime.wandb=disabled", "runtime.progress=false", "runtime.threads=1", *NO_DROPOUT]
SHORT = ["train.max_steps=12", "train.val_every=4", "train.ckpt_every=4"]
SEEDS = [0, 1]
TIMING = ("train_seconds", "train_steps_timed", "train_steps_per_s", "train_tokens_per_s")  # of each attempt


def outcome(metrics: dict) -> dict:
    """A run's final metrics without the wall-clock timing of the attempt that finished it."""
    return {k: v for k, v in metrics.items() if k not in TIMING}


def outcomes(results: dict[int, dict]) -> dict[int, dict]:
    return {seed: outcome(m) for seed, m in results.items()}


def logged(run_dir: Path, column: str) -> dict[int, float]:
    """{step: value} of one metric over all CSV segments of a run."""
    out = {}
    for path in sorted(run_dir.glob("csv/version_*/metrics.csv")):
        with path.open() as f:
            out.update({int(r["step"]): float(r[column]) for r in csv.DictReader(f) if r.get(column)})
    return out


def close(a: dict, b: dict, rtol: float = 1e-5) -> bool:
    """Equal keys; numbers equal within ``rtol``, everything else exactly (timing apart)."""
    a, b = outcome(a), outcome(b)
    if a.keys() != b.keys():
        return False
    return all(a[k] == pytest.approx(b[k], rel=rtol) if isinstance(a[k], float) else a[k] == b[k] for k in a)


def done(run_dir: Path) -> dict:
    return outcome(json.loads((run_dir / "DONE").read_text()))


def resolve(treebank: Path, extra: list[str]) -> dict:
    from experiments.config import resolve_train_config

    return resolve_train_config("tg", "cpu-small", TINY + extra + [
        f"data.corpus={treebank}", "data.train_split=file", "data.valid_split=file"])


def dirs(root: Path, seeds=SEEDS) -> list[Path]:
    return [root / f"s{s}" for s in seeds]


@pytest.fixture(scope="module")
def short_config(tiny_treebank) -> dict:
    return resolve(tiny_treebank, SHORT)


@pytest.fixture(scope="module")
def reference(short_config, tmp_path_factory) -> dict[int, dict]:
    """The uninterrupted group of the short config: DONE per seed."""
    from experiments.seed_group import train_group

    return outcomes(train_group(short_config, SEEDS, dirs(tmp_path_factory.mktemp("reference"))))


def test_each_seed_of_a_group_ends_where_its_solo_run_ends(tiny_treebank, tmp_path):
    """60 steps, dropout 0: per-step training losses, validations and final metrics equal within rtol 1e-5."""
    from experiments.checkpoints import read_checkpoint
    from experiments.seed_group import train_group
    from experiments.train import train

    cfg = resolve(tiny_treebank, ["train.max_steps=60", "train.val_every=20", "train.ckpt_every=20"])
    group = train_group(cfg, SEEDS, dirs(tmp_path / "group"))
    solo = train(cfg, 1, tmp_path / "solo")
    grouped = tmp_path / "group" / "s1"
    assert close(group[1], solo) and close(done(grouped), solo)
    for column in ("train/loss", "val/loss"):
        ours, theirs = logged(grouped, column), logged(tmp_path / "solo", column)
        assert ours.keys() == theirs.keys() and len(ours) == (60 if column == "train/loss" else 3)
        assert all(ours[k] == pytest.approx(theirs[k], rel=1e-5) for k in ours), column
    assert group[0]["best_val_loss"] != group[1]["best_val_loss"]  # seeds differ: each drew its own init and data
    for name in ("best.ckpt", "last.ckpt"):  # the solo format: loadable as any run's checkpoint
        ours = read_checkpoint(grouped / "checkpoints" / name, "tg")
        theirs = read_checkpoint(tmp_path / "solo" / "checkpoints" / name, "tg")
        assert ours["synbench"] == theirs["synbench"] and ours["global_step"] == theirs["global_step"]
        for key, value in theirs["state_dict"].items():  # the seed's own weights; Adam's normalisation turns the
            # rounding of near-zero gradients into whole steps of lr, so entries drift apart by a few of those
            difference = torch.linalg.vector_norm(ours["state_dict"][key] - value)
            assert difference <= 1e-2 * torch.linalg.vector_norm(value) + 1e-3, key


def test_a_bf16_group_trains_as_bf16_solo_runs(tiny_treebank, short_config, reference, tmp_path):
    """``runtime.precision=bf16-mixed``: the group's forward runs under bf16 autocast (weights and Adam fp32), as a
    solo bf16-mixed run's: each seed's losses follow its solo bf16 run's within bf16's rounding, and differ from
    the fp32 group's."""
    from experiments.seed_group import train_group
    from experiments.train import train

    cfg = resolve(tiny_treebank, SHORT + ["runtime.precision=bf16-mixed"])
    group = train_group(cfg, SEEDS, dirs(tmp_path / "group"))
    solo = train(cfg, 1, tmp_path / "solo")
    grouped = tmp_path / "group" / "s1"
    for column in ("train/loss", "val/loss"):
        ours, theirs = logged(grouped, column), logged(tmp_path / "solo", column)
        assert ours.keys() == theirs.keys() and ours
        assert all(ours[k] == pytest.approx(theirs[k], rel=2e-2) for k in ours), column
    assert group[1]["best_val_loss"] == pytest.approx(solo["best_val_loss"], rel=2e-2)
    assert group[1]["best_val_loss"] != reference[1]["best_val_loss"]  # bf16 rounding: not the fp32 run
    assert json.loads((grouped / "config.json").read_text())["runtime"]["precision"] == "bf16-mixed"


def test_dropout_makes_the_group_another_run(tiny_treebank):
    """With dropout the masks are the group's, not the solo run's: the group is part of the run id."""
    from experiments.config import run_id
    from experiments.seed_grouping import group_config

    plain = resolve(tiny_treebank, SHORT)
    dropping = resolve(tiny_treebank, SHORT + ["model.core_dropout=0.1"])
    assert run_id(group_config(plain, SEEDS), 1) == run_id(plain, 1)
    assert group_config(dropping, SEEDS)["runtime"]["seed_group"] == "0,1"
    assert run_id(group_config(dropping, SEEDS), 1) != run_id(dropping, 1)
    assert group_config(dropping, [1]) == dropping  # a group of one is a solo run


def _attempt(kill_step: str, config_json: str, root: str) -> None:
    """One group attempt that SIGKILLs itself between the backward pass and the update of step ``kill_step``."""
    from experiments.seed_group import train_group
    from lightning_modules.models.seed_stack import SeedStack

    real_clip, steps = SeedStack.clip_per_seed, {"n": 0}

    def clip(self, max_norm):
        if steps["n"] == int(kill_step):
            os.kill(os.getpid(), signal.SIGKILL)
        steps["n"] += 1
        return real_clip(self, max_norm)

    SeedStack.clip_per_seed = clip
    train_group(json.loads(config_json), SEEDS, dirs(Path(root)))


def test_a_killed_group_resumes_where_the_uninterrupted_group_ends(short_config, reference, tmp_path):
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(REPO)}
    # killed inside step 9 (after the step-8 checkpoint, before the next): the rerun resumes both seeds at 8
    attempt = subprocess.run([sys.executable, __file__, "9", json.dumps(short_config), str(tmp_path)],
                             cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    assert attempt.returncode == -signal.SIGKILL, attempt.stderr[-3000:]
    assert all(not (d / "DONE").exists() for d in dirs(tmp_path))
    from experiments.seed_group import train_group

    assert outcomes(train_group(short_config, SEEDS, dirs(tmp_path))) == reference
    assert [done(d) for d in dirs(tmp_path)] == [reference[s] for s in SEEDS]


def test_a_done_seed_is_not_trained_again(short_config, reference, tmp_path):
    from experiments.seed_group import train_group

    seeds = [0, 1, 2]
    first = train_group(short_config, [0], dirs(tmp_path, [0]))  # a group of one pending seed (S = 1: rounding
    assert close(first[0], reference[0])                           # differs from S = 2 in the last digits)
    before = sorted((dirs(tmp_path, [0])[0]).rglob("*"))
    stamps = [p.stat().st_mtime_ns for p in before]
    results = train_group(short_config, seeds, dirs(tmp_path, seeds))
    assert sorted(dirs(tmp_path, [0])[0].rglob("*")) == before
    assert [p.stat().st_mtime_ns for p in before] == stamps
    assert results[0] == first[0] and close(results[1], reference[1]) and 2 in results


@pytest.mark.parametrize("log_every", [1, 3])
def test_a_seed_whose_loss_goes_nan_fails_alone(short_config, reference, tmp_path, monkeypatch, capsys, log_every):
    """The losses stay on the device until the trainer logs (every ``train.log_every`` steps), validates or saves:
    at 3, the step-4 divergence is read at step 6, and the failure still names step 4."""
    import copy

    import torch

    from experiments.seed_group import train_group
    from lightning_modules.models.seed_stack import SeedStack

    real_losses, calls = SeedStack.losses, {"n": 0}

    def losses(self, batch, batched=True, seeds=slice(None)):
        loss, total, count = real_losses(self, batch, batched, seeds)
        if batched:
            calls["n"] += 1
            if calls["n"] >= 5:  # seed 1's loss diverges at step 4
                loss = torch.where(torch.arange(len(loss)) == 1, torch.full_like(loss, float("nan")), loss)
        return loss, total, count

    monkeypatch.setattr(SeedStack, "losses", losses)
    config = copy.deepcopy(short_config)
    config["train"]["log_every"] = log_every
    results = train_group(config, SEEDS, dirs(tmp_path))
    s0, s1 = dirs(tmp_path)
    assert outcomes(results) == {0: reference[0]} and done(s0) == reference[0]
    assert not (s1 / "DONE").exists()
    assert (s1 / "FAILED").read_text() == "training step 4: training loss is nan (diverged); lower model.peak_lr " \
                                           "or check the data\n"
    assert "seed 1: training step 4" in capsys.readouterr().err
    assert set(logged(s1, "train/loss")) == {k for k in range(4) if (k + 1) % log_every == 0}  # before it failed


def test_sigusr1_saves_every_seed_and_the_rerun_ends_as_the_uninterrupted_group(short_config, reference, tmp_path,
                                                                                 monkeypatch):
    from experiments.checkpoints import read_checkpoint
    from experiments.seed_group import train_group
    from experiments.training_callbacks import Preempted
    from lightning_modules.models.seed_stack import SeedStack

    real_clip, steps = SeedStack.clip_per_seed, {"n": 0}

    def clip(self, max_norm):
        steps["n"] += 1
        if steps["n"] == 6:  # SLURM's warning arrives during step 6 (not a checkpoint step)
            os.kill(os.getpid(), signal.SIGUSR1)
        return real_clip(self, max_norm)

    monkeypatch.setattr(SeedStack, "clip_per_seed", clip)
    with pytest.raises(Preempted) as stopped:
        train_group(short_config, SEEDS, dirs(tmp_path))
    assert stopped.value.step == 6 and stopped.value.code == 128 + signal.SIGUSR1  # not under SLURM: no requeue
    assert signal.getsignal(signal.SIGUSR1) is signal.SIG_DFL
    for d in dirs(tmp_path):
        assert read_checkpoint(d / "checkpoints" / "last.ckpt", "tg")["global_step"] == 6
        assert not (d / "DONE").exists() and not (d / "FAILED").exists()
    monkeypatch.setattr(SeedStack, "clip_per_seed", real_clip)
    assert outcomes(train_group(short_config, SEEDS, dirs(tmp_path))) == reference


def test_cli_names_the_group_and_refuses_a_family_without_a_stacked_form(tiny_treebank, tmp_path, capsys):
    from experiments.cli import main

    data = [f"data.corpus={tiny_treebank}", "data.train_split=file", "data.valid_split=file"]
    assert main(["train", "tg", "--seeds", "3-4", *TINY, *SHORT, *data, "--print-config"]) == 0
    assert len(json.loads(capsys.readouterr().out)["run_ids"]) == 2
    # AWD-LSTM: cuDNN's fused LSTM has no vmap rule (README "Seed groups")
    assert main(["train", "awd-lstm", "--seeds", "0-1", "--runs-dir", str(tmp_path), "train.max_steps=1",
                 "model.d_hidden=16", "model.d_embedding=16", "model.n_layers=2", "runtime.wandb=disabled",
                 *data]) == 2
    assert capsys.readouterr().err.strip().splitlines()[-1].startswith(
        "synbench: error: --seeds: awd-lstm cannot train seeds as a group")
    assert all((d / "FAILED").exists() for d in (tmp_path / "train").iterdir())


if __name__ == "__main__":
    _attempt(*sys.argv[1:4])
