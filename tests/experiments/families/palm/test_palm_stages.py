"""AWD-LSTM / PaLM trained on the official loops through ``experiments.train.train``: validation once at the
end of every epoch, the non-monotone switch on that schedule with the best weights put back, the finetuning
stage whose best validation is the model evaluated, resuming in the middle of it, and the paper specs'
schedules."""

from __future__ import annotations

import os
import signal

import numpy as np
import pytest
import torch
from pytorch_lightning import Callback

from experiments.config import resolve_train_config
from experiments.families import get_family
from experiments.train import train
from experiments.training_callbacks import Preempted
from lightning_modules.families.palm.bptt import StreamBatches, batchify
from lightning_modules.families.palm.nt_asgd import nonmonotone_trigger

TINY = ["model.d_embedding=16", "model.d_hidden=24", "model.bptt=12", "train.batch_size=4",
        "train.eval_batch_size=10", "runtime.wandb=disabled", "runtime.progress=false", "runtime.threads=1",
        "train.max_steps=null", "train.ckpt_every=7", "model.finetune_min=0", "model.nonmono=1"]
SPANS = ["model.d_rrnn=4", "model.d_span_mlp=8", "model.max_span=5"]


def tiny_config(family: str, treebank, *overrides: str) -> dict:
    return resolve_train_config(family, "cpu-small", [*TINY, *overrides, f"data.corpus={treebank}",
                                                      "data.train_split=file", "data.valid_split=file",
                                                      "data.test_split=file"])


def epoch_ends(cfg: dict, seed: int, epochs: int) -> list[int]:
    """The global steps at which the run's epochs end (its own variable-length windows)."""
    data = get_family(cfg["family"]).build_data(cfg)
    rows, _ = batchify(data.train_ids, cfg["train"]["batch_size"])
    batches = StreamBatches(rows, None, cfg["model"]["bptt"], seed)
    return np.cumsum([len(batches.epoch_lengths(e)) for e in range(epochs)]).tolist()


class Stages(Callback):
    """Each validation's step, stage and loss, and at the first step of averaged SGD the weights it starts
    from beside the best checkpoint's."""

    def __init__(self, best_path):
        self.best_path, self.validations, self.history, self.at_switch = best_path, [], [], None

    def on_validation_start(self, trainer, module):
        self.validations.append((trainer.global_step, module.stage()))

    def on_validation_end(self, trainer, module):
        self.history.append(module._val_sums[0] / module._val_sums[1])

    def on_train_batch_start(self, trainer, module, batch, batch_idx):
        if module.switched_at is not None and self.at_switch is None:
            best = torch.load(self.best_path, weights_only=True)["state_dict"]
            self.at_switch = ({k: v.detach().clone() for k, v in module.named_parameters()}, best)


class SignalAt(Callback):
    """SIGTERM to this process after training step ``step`` (a preemption)."""

    def __init__(self, step: int):
        self.step = step

    def on_train_batch_end(self, trainer, *args):
        if trainer.global_step == self.step:
            os.kill(os.getpid(), signal.SIGTERM)


@pytest.fixture(scope="module")
def switched(tmp_path_factory, tiny_treebank):
    """AWD-LSTM with SGD at lr 100 (its validation loss rises at the 2nd and 3rd epoch), NT interval 1."""
    cfg = tiny_config("awd-lstm", tiny_treebank, "model.epochs=4", "model.optimizer=sgd", "model.lr=100.0",
                      "model.switch_after=0", "model.reload_at_switch=true")
    run = tmp_path_factory.mktemp("switched")
    stages = Stages(run / "checkpoints" / "best.ckpt")
    metrics = train(cfg, seed=1, run_dir=run, callbacks=[stages])
    return cfg, metrics, stages


def test_validation_ends_every_epoch_and_the_switch_fires_on_that_schedule(switched):
    cfg, metrics, stages = switched
    steps = [step for step, _ in stages.validations]
    assert steps == epoch_ends(cfg, 1, 4) and metrics["global_step"] == steps[-1]
    history = stages.history
    first = next(k for k in range(1, len(history)) if nonmonotone_trigger(history[:k], history[k], 1))
    # averaged SGD from the epoch after the validation that fired the trigger
    assert [stage for _, stage in stages.validations] == ["base"] * (first + 1) + ["averaged"] * (3 - first)


def test_at_the_switch_the_best_weights_are_put_back(switched):
    _, _, stages = switched
    weights, best = stages.at_switch
    history = stages.history
    first = next(k for k in range(1, len(history)) if nonmonotone_trigger(history[:k], history[k], 1))
    assert int(np.argmin(history[: first + 1])) < first  # the best is an earlier epoch's, not the last one
    for name, value in weights.items():
        assert torch.equal(value, best[name])


def test_the_finetuning_stages_trigger_ends_the_run_at_the_end_of_an_epoch(tiny_treebank, tmp_path):
    """finetune.py's end: the first validation of the stage at which the NT trigger fires is the last one."""
    cfg = tiny_config("awd-lstm", tiny_treebank, "model.epochs=8", "model.optimizer=sgd", "model.lr=100.0",
                      "model.finetune_at=2")
    stages = Stages(tmp_path / "checkpoints" / "best.ckpt")
    metrics = train(cfg, seed=1, run_dir=tmp_path, callbacks=[stages])
    tuned = [loss for loss, (_, stage) in zip(stages.history, stages.validations, strict=True) if stage == "finetune"]
    fired = [k for k in range(1, len(tuned)) if nonmonotone_trigger(tuned[:k], tuned[k], 1)]
    assert fired and fired[0] == len(tuned) - 1  # stopped at the first firing
    ends = epoch_ends(cfg, 1, 8)
    assert metrics["global_step"] == ends[len(stages.validations) - 1] < ends[-1]


@pytest.fixture(scope="module")
def finetuned(tmp_path_factory, tiny_treebank):
    """PaLM-U per epoch: averaged SGD after 2 validations, the finetuning stage from the 3rd, 6 epochs; once
    uninterrupted, once preempted in the middle of the finetuning stage's second epoch and run again."""
    cfg = tiny_config("palm-u", tiny_treebank, *SPANS, "model.epochs=6", "model.switch_after=2",
                      "model.finetune_at=3")
    ends = epoch_ends(cfg, 1, 6)
    runs = {}
    for name, stop in (("unbroken", None), ("resumed", ends[3] + 5)):
        run = tmp_path_factory.mktemp(name)
        stages = Stages(run / "checkpoints" / "best.ckpt")
        if stop is not None:
            with pytest.raises(Preempted):
                train(cfg, seed=1, run_dir=run, callbacks=[SignalAt(stop)])
            assert not (run / "DONE").exists()
        runs[name] = (train(cfg, seed=1, run_dir=run, callbacks=[stages]), run, stages)
    return cfg, ends, runs


def test_the_finetuning_stage_runs_and_its_best_validation_is_the_model_evaluated(finetuned):
    _, ends, runs = finetuned
    metrics, run, stages = runs["unbroken"]
    assert [step for step, _ in stages.validations] == ends
    assert [stage for _, stage in stages.validations] == ["base", "base", "averaged", *["finetune"] * 3]
    best = torch.load(run / "checkpoints" / "best.ckpt", weights_only=True)
    assert best["nt_asgd_stage"]["validated_in"] == "finetune" and metrics["nt_asgd_stage"] == "finetune"
    assert metrics["best_val_loss"] == pytest.approx(min(stages.history), rel=1e-6)
    # the final perplexity (10 streams, as validation here) is the best checkpoint's, read again from its file
    assert np.log(metrics["val_ppl"]) == pytest.approx(metrics["best_val_loss"], rel=1e-5)


def test_a_run_preempted_during_finetuning_ends_as_the_unbroken_run(finetuned):
    _, _, runs = finetuned
    (unbroken, a, _), (resumed, b, _) = runs["unbroken"], runs["resumed"]
    for key in ("global_step", "best_val_loss", "val_ppl", "ppl_stream", "nt_asgd_stage"):
        assert resumed[key] == unbroken[key], key
    for name in ("best.ckpt", "last.ckpt"):
        x, y = (torch.load(r / "checkpoints" / name, weights_only=True) for r in (a, b))
        assert x["global_step"] == y["global_step"]
        assert x["nt_asgd_stage"]["finetune_history"] == y["nt_asgd_stage"]["finetune_history"]
        for key, value in x["state_dict"].items():
            assert torch.equal(value, y["state_dict"][key]), (name, key)


@pytest.mark.parametrize(("spec", "streams", "epochs"), [("reproduce-palm-paper", 20, 500),
                                                         ("reproduce-compare-paper", 20, 500),
                                                         ("reproduce-palm-wikitext2", 80, 750)])
def test_paper_specs_train_on_the_official_loops_in_epochs(spec, streams, epochs):
    """Validation once an epoch (no step interval, no step limit); AWD-LSTM Merity et al.'s epochs (PTB 500,
    WikiText-2 750), with finetune.py's stage after them for ``awd-lstm-finetuned``; PaLM as its main.py and
    train.sh."""
    from experiments.experiment_spec import load_spec

    seen = set()
    for model in load_spec(spec).models:
        if model.family not in ("awd-lstm", "palm-u", "palm-s", "palm-rb"):
            continue
        overrides = [f"{k}={v}" for k, v in model.overrides.items()]
        cfg = resolve_train_config(model.family, model.preset, overrides)
        m, t = cfg["model"], cfg["train"]
        assert t["val_every"] is None and t["batch_size"] == streams and m["bptt"] == 70
        assert t["max_steps"] == (0 if model.name == "palm-u-init" else None)
        if model.family == "awd-lstm":
            assert (m["nonmono"], m["reload_at_switch"], m["optimizer"]) == (5, False, "sgd")
            finetuned = model.name == "awd-lstm-finetuned"
            assert (m["epochs"], m["finetune_at"], m["finetune_min"]) == ((2 * epochs, epochs, 0) if finetuned
                                                                           else (epochs, 0, 0))
        else:
            assert (m["epochs"], m["finetune_at"], m["finetune_min"], m["nonmono"]) == (4000, 400, 100, 15)
            assert m["reload_at_switch"] and m["switch_after_epochs"] == 40 and m["asgd_lr"] == 30.0
        seen.add(model.name)
    assert {"awd-lstm", "palm-u"} <= seen
    assert ("awd-lstm-finetuned" in seen) == (spec == "reproduce-palm-paper")
