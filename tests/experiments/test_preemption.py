"""Preemption: a signal mid-training saves ``last.ckpt`` at a step boundary and stops (requeueing the SLURM task
on SIGUSR1); the next attempt resumes and ends with the metrics of an uninterrupted run."""

from __future__ import annotations

import csv
import json
import os
import signal
import stat
import sys

import pytest
from pytorch_lightning import Callback

from experiments.config import resolve_train_config
from experiments.train import train
from experiments.training_callbacks import Preempted

TINY = ["model.d_model=32", "model.n_layers=2", "model.n_heads=2", "model.d_ff=64", "model.warmup_steps=4",
        "model.total_steps=40", "train.batch_size=4", "train.eval_batch_size=8", "train.log_every=1",
        "train.max_steps=12", "train.val_every=4", "train.ckpt_every=4", "runtime.wandb=disabled",
        "runtime.progress=false", "runtime.threads=1"]


class SignalAt(Callback):
    """Sends ``signum`` to this process after training step ``step`` (what SLURM does from outside)."""

    def __init__(self, signum: int, step: int):
        self.signum, self.step = signum, step

    def on_train_batch_end(self, trainer, *args):
        if trainer.global_step == self.step:
            os.kill(os.getpid(), self.signum)


def logged(run_dir, column: str) -> dict[int, float]:
    """{step: value} of one metric over all CSV segments of a run."""
    out = {}
    for path in sorted(run_dir.glob("csv/version_*/metrics.csv")):
        with path.open() as f:
            out.update({int(r["step"]): float(r[column]) for r in csv.DictReader(f) if r.get(column)})
    return out


@pytest.fixture(scope="module")
def tiny_config(tiny_treebank):
    return resolve_train_config("tg", "cpu-small", TINY + [
        f"data.corpus={tiny_treebank}", "data.train_split=file", "data.valid_split=file"])


@pytest.fixture(scope="module")
def full_run(tmp_path_factory, tiny_config):
    run = tmp_path_factory.mktemp("full") / "run"
    train(tiny_config, seed=4, run_dir=run)
    return run


@pytest.fixture(scope="module")
def uninterrupted(full_run):
    return json.loads((full_run / "DONE").read_text())


def test_sigterm_saves_at_a_step_boundary_and_the_resumed_run_matches(tmp_path, tiny_config, uninterrupted):
    run = tmp_path / "run"
    with pytest.raises(Preempted) as stopped:
        train(tiny_config, seed=4, run_dir=run, callbacks=[SignalAt(signal.SIGTERM, 6)])
    assert stopped.value.code == 128 + signal.SIGTERM and stopped.value.requeued is None
    assert stopped.value.step == 6  # not a multiple of ckpt_every: saved because of the signal
    assert not (run / "FAILED").exists() and not (run / "DONE").exists()
    assert not list(run.glob("hpc_ckpt_*.ckpt"))  # Lightning's own requeue checkpoints are not used
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL  # handlers restored after fit
    resumed = train(tiny_config, seed=4, run_dir=run)
    assert resumed == uninterrupted
    assert sorted(p.parent.name for p in run.glob("csv/version_*/metrics.csv")) == ["version_0", "version_1"]


def test_sigusr1_requeues_the_slurm_array_task(tmp_path, tiny_config, uninterrupted, monkeypatch):
    # A FAKE `scontrol` (this test needs no cluster): it records its arguments. The real requeue is tested
    # against the SLURM cluster in test_orchestration_slurm.py.
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "scontrol"
    fake.write_text(f"#!{sys.executable}\nimport json, sys\n"
                    f"open({str(tmp_path / 'calls')!r}, 'a').write(json.dumps(sys.argv[1:]) + '\\n')\n")
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("SLURM_ARRAY_JOB_ID", "77")
    monkeypatch.setenv("SLURM_ARRAY_TASK_ID", "3")
    monkeypatch.setenv("SLURM_JOB_ID", "80")
    run = tmp_path / "run"
    with pytest.raises(Preempted) as stopped:
        train(tiny_config, seed=4, run_dir=run, callbacks=[SignalAt(signal.SIGUSR1, 5)])
    assert stopped.value.code == 0 and stopped.value.requeued == "77_3"
    assert [json.loads(line) for line in (tmp_path / "calls").read_text().splitlines()] == [["requeue", "77_3"]]
    monkeypatch.delenv("SLURM_ARRAY_JOB_ID")
    assert train(tiny_config, seed=4, run_dir=run) == uninterrupted


def test_a_new_attempt_clears_an_earlier_failure(tmp_path, tiny_config, uninterrupted):
    run = tmp_path / "run"
    run.mkdir()
    (run / "FAILED").write_text("killed by the OOM killer\n")
    assert train(tiny_config, seed=4, run_dir=run) == uninterrupted
    assert not (run / "FAILED").exists()


@pytest.mark.parametrize("step", [8, 12])
def test_a_signal_on_a_validation_step_saves_after_the_validation(tmp_path, tiny_config, full_run, uninterrupted,
                                                                 step):
    # steps 8 and 12 validate: the checkpoint is written after that validation, otherwise the resumed run
    # would skip it (Lightning does not repeat the validation of the step it resumes at); 12 is the last step
    run = tmp_path / "run"
    with pytest.raises(Preempted) as stopped:
        train(tiny_config, seed=4, run_dir=run, callbacks=[SignalAt(signal.SIGTERM, step)])
    assert stopped.value.step == step
    assert train(tiny_config, seed=4, run_dir=run) == uninterrupted
    assert logged(run, "val/loss") == logged(full_run, "val/loss")  # every validation ran exactly once
    assert logged(run, "train/loss") == logged(full_run, "train/loss")


def test_a_run_killed_after_its_last_checkpoint_but_before_done(tmp_path, tiny_config, uninterrupted):
    run = tmp_path / "run"
    train(tiny_config, seed=4, run_dir=run)
    (run / "DONE").unlink()  # as if it died while computing the final metrics
    assert train(tiny_config, seed=4, run_dir=run) == uninterrupted


def test_a_damaged_done_marker_is_written_again_on_the_next_attempt(tmp_path, tiny_config, uninterrupted, capsys):
    run = tmp_path / "run"
    train(tiny_config, seed=4, run_dir=run)
    (run / "DONE").write_text('{"best_val_loss": ')  # e.g. a copy of the run folder cut short
    assert train(tiny_config, seed=4, run_dir=run) == uninterrupted
    assert json.loads((run / "DONE").read_text()) == uninterrupted
    assert "damaged DONE marker" in capsys.readouterr().err
