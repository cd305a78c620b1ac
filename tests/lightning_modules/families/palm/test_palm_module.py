"""AWD-LSTM / PaLM LightningModule: sizes of Table 1, the regularisers, causality and state carrying, the
PaLM-S loss, and NT-ASGD inside a Lightning run (switch, averaged weights validated and checkpointed, resume)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import pytorch_lightning as pl
import torch
import torch.nn.functional as F

from lightning_modules.data.train_data import FixedBatches
from lightning_modules.families.palm.awd_dropout import WeightDroppedLSTM, embedding_dropout, locked_dropout
from lightning_modules.families.palm.bptt import StreamBatch, StreamBatches, batchify, fixed_windows
from lightning_modules.families.palm.model import FAMILIES, build, parameter_count

TINY = {"vocab_size": 30, "d_embedding": 8, "d_hidden": 12, "max_span": 4, "d_rrnn": 3, "d_span_mlp": 5, "bptt": 6}


@pytest.mark.parametrize("family,hidden", [("awd-lstm", 1150), ("palm-u", 1020), ("palm-s", 1020), ("palm-rb", 1020)])
def test_paper_sizes_have_about_24m_parameters(family, hidden):
    """Table 1: AWD-LSTM, PaLM-U, PaLM-RB and PaLM-S all have 24M parameters on PTB."""
    with torch.device("meta"):  # shapes only: no orthogonal initialisation of 1150-wide LSTMs to wait for
        assert 23.5e6 < parameter_count(build({"d_hidden": hidden}, family)) < 24.5e6


@pytest.mark.parametrize("family", FAMILIES)
def test_next_word_logits_are_causal(family):
    torch.manual_seed(0)
    model = build(TINY, family).eval()
    x = torch.randint(0, 30, (2, 10))
    y = x.clone()
    y[:, 5:] = torch.randint(0, 30, (2, 5))
    assert torch.equal(model(x).logits[:, :5], model(y).logits[:, :5])


@pytest.mark.parametrize("family", FAMILIES)
def test_windows_carrying_the_state_equal_one_long_window(family):
    torch.manual_seed(1)
    model = build(TINY, family).double().eval()
    x = torch.randint(0, 30, (3, 13))
    whole = model(x)
    first = model(x[:, :4])
    second = model(x[:, 4:9], first.state)
    third = model(x[:, 9:], second.state.detach())
    torch.testing.assert_close(torch.cat([first.logits, second.logits, third.logits], dim=1), whole.logits)


def test_weight_drop_masks_the_hidden_matrix_once_per_call_and_keeps_the_lstm_kernel():
    torch.manual_seed(2)
    layer = WeightDroppedLSTM(4, 6, p=0.5).train()
    x = torch.randn(2, 7, 4)
    torch.manual_seed(5)
    out, _ = layer(x)
    torch.manual_seed(5)
    dropped = F.dropout(layer.lstm.weight_hh_l0, 0.5, training=True)
    reference = torch.nn.LSTM(4, 6, batch_first=True)
    reference.load_state_dict({**layer.lstm.state_dict(), "weight_hh_l0": dropped.detach()})
    torch.testing.assert_close(out, reference(x)[0])
    out.sum().backward()  # the raw matrix is what trains
    assert layer.lstm.weight_hh_l0.grad is not None and (layer.lstm.weight_hh_l0.grad == 0).any()
    layer.eval()
    torch.testing.assert_close(layer(x)[0], layer.lstm(x)[0])


def test_locked_dropout_shares_its_mask_over_time_and_embedding_dropout_drops_word_types():
    torch.manual_seed(3)
    x = torch.ones(4, 9, 5)
    dropped = locked_dropout(x, 0.5, True)
    assert torch.equal(dropped, dropped[:, :1].expand_as(dropped))
    assert set(dropped.unique().tolist()) <= {0.0, 2.0}
    assert torch.equal(locked_dropout(x, 0.5, False), x)
    embedding = torch.nn.Embedding(6, 3)
    ids = torch.tensor([[1, 1, 2, 1]])
    out = embedding_dropout(embedding, ids, 0.5, True)
    assert torch.equal(out[0, 0], out[0, 1]) and torch.equal(out[0, 0], out[0, 3])  # a type is dropped everywhere
    for row, word in zip(out[0], ids[0]):
        assert torch.equal(row, torch.zeros(3)) or torch.allclose(row, 2 * embedding.weight[word])


def test_palm_s_loss_is_lambda_times_the_mean_cross_entropy_to_the_gold_selections():
    torch.manual_seed(4)
    model = build({**TINY, "span_loss_weight": 0.3}, "palm-s").eval()
    x = torch.randint(0, 30, (2, 6))
    targets = torch.zeros(2, 6, 4)
    targets[0, 3, 1] = 1.0
    targets[1, 5, 0] = targets[1, 5, 2] = 0.5
    out = model(x)
    terms = model.losses(StreamBatch(x, x, targets), out)
    weights = out.log_weights.exp()
    manual = -(torch.log(weights[0, 3, 1]) + 0.5 * torch.log(weights[1, 5, 0]) + 0.5 * torch.log(weights[1, 5, 2]))
    torch.testing.assert_close(terms["span"], 0.3 * manual / 12)
    assert set(terms) == {"lm", "ar", "tar", "span"}
    assert "span" not in build(TINY, "palm-u").losses(StreamBatch(x, x, None), build(TINY, "palm-u")(x))


def test_span_attention_gradient_norms_are_each_terms_own_gradient_on_the_attention_weights():
    """What the CSV log's train/grad_norm_span_attention_{lm,span} hold: λ scales the span term's alone."""
    x = torch.randint(0, 30, (2, 6), generator=torch.Generator().manual_seed(0))
    targets = torch.zeros(2, 6, 4)
    targets[:, 3:, 1] = 1.0
    norms = {}
    for weight in (0.01, 1.0):
        torch.manual_seed(4)
        model = build({**TINY, "span_loss_weight": weight}, "palm-s").eval()
        terms = model.losses(StreamBatch(x, x, targets), model(x))
        norms[weight] = model.span_attention_gradient_norms(terms)
        params = list(model.span_attention.parameters())
        manual = torch.autograd.grad(terms["lm"], params, retain_graph=True, allow_unused=True)
        expected = torch.sqrt(sum(g.pow(2).sum() for g in manual if g is not None))
        assert norms[weight]["lm"] == pytest.approx(float(expected), rel=1e-5)
    assert norms[1.0]["lm"] == pytest.approx(norms[0.01]["lm"], rel=1e-6) and norms[1.0]["span"] > 0
    assert norms[1.0]["span"] == pytest.approx(100 * norms[0.01]["span"], rel=1e-4)
    model = build(TINY, "palm-u")
    assert set(model.span_attention_gradient_norms(model.losses(StreamBatch(x, x), model(x)))) == {"lm"}


@pytest.mark.parametrize("family", FAMILIES)
def test_a_one_token_window_has_finite_losses(family):
    """An epoch's last BPTT window may hold a single token: TAR has no step to penalise there."""
    model = build(TINY, family)
    x = torch.randint(0, 30, (2, 1))
    terms = model.losses(StreamBatch(x, x, torch.zeros(2, 1, 4)), model(x))
    assert all(torch.isfinite(v) for v in terms.values()) and terms["tar"] == 0.0


def test_palm_rb_attention_prefers_the_longest_span():
    model = build(TINY, "palm-rb").eval()
    weights = model(torch.randint(0, 30, (1, 8))).log_weights.exp()[0, 7]
    torch.testing.assert_close(weights, torch.softmax(torch.arange(1.0, 5.0), 0))


def test_awd_lstm_has_no_span_attention_to_parse_with():
    from lightning_modules.errors import InputError

    with pytest.raises(InputError):
        build(TINY, "awd-lstm").all_span_scores(torch.zeros(1, 3, dtype=torch.long))
    assert build(TINY, "palm-u").all_span_scores(torch.zeros(1, 5, dtype=torch.long)).shape == (1, 5, 5)


def test_bad_config_values_name_the_key():
    from lightning_modules.errors import InputError

    with pytest.raises(InputError, match="optimizer"):
        build({**TINY, "optimizer": "rmsprop"}, "palm-u")
    with pytest.raises(InputError, match="n_layers"):
        build({**TINY, "n_layers": 1}, "palm-u")
    with pytest.raises(InputError, match="before the last") as late:  # the finetuning stage would never run
        build({**TINY, "epochs": 10, "finetune_at": 10}, "palm-u")
    assert late.value.location == "model.finetune_at"
    with pytest.raises(InputError, match="not both") as both:
        build({**TINY, "switch_after": 2, "switch_after_epochs": 40}, "palm-u")
    assert both.value.location == "model.switch_after_epochs"
    with pytest.raises(InputError, match="switch_after_epochs"):
        build({**TINY, "switch_after_epochs": -1}, "palm-u")


# ---- NT-ASGD in a Lightning run --------------------------------------------------------------------------
def streams(seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    train, _ = batchify(rng.integers(0, 30, 400), 4)
    valid, _ = batchify(rng.integers(0, 30, 120), 2)
    return train, valid


def fit(model, max_steps: int, tmp_path: Path, ckpt: Path | None = None, train: np.ndarray | None = None
        ) -> pl.Trainer:
    train = streams()[0] if train is None else train
    valid = streams()[1]
    trainer = pl.Trainer(max_steps=max_steps, val_check_interval=2, check_val_every_n_epoch=None,
                         num_sanity_val_steps=0, logger=False, enable_checkpointing=False,
                         enable_progress_bar=False, enable_model_summary=False, default_root_dir=str(tmp_path))
    batches = StreamBatches(train, None, model.config.bptt, seed=0,
                            consumed=lambda: trainer.global_step)
    trainer.fit(model, train_dataloaders=batches, val_dataloaders=FixedBatches(fixed_windows(valid, None, 6)),
                ckpt_path=None if ckpt is None else str(ckpt))
    return trainer


def test_switch_after_validations_then_averaged_weights_are_validated_and_checkpointed(tmp_path):
    torch.manual_seed(5)
    model = build({**TINY, "optimizer": "adam", "lr": 0.01, "switch_after": 2, "asgd_lr": 0.5}, "palm-u")
    trainer = fit(model, 8, tmp_path)
    optimizer = model.nt_asgd()
    assert optimizer.averaging and optimizer.param_groups[0]["lr"] == 0.5
    assert len(model.nt_history) == 4  # validations at steps 2, 4, 6, 8; averaging from step 5
    assert optimizer.param_groups[0]["averaged_steps"] == 4
    averaged = model.averaged_weights()
    assert set(averaged) == {name for name, _ in model.named_parameters()}
    raw = {k: v.detach().clone() for k, v in model.state_dict().items()}
    path = tmp_path / "model.ckpt"
    trainer.save_checkpoint(path)
    saved = torch.load(path, weights_only=True)
    for name, value in averaged.items():
        assert torch.equal(saved["state_dict"][name], value)  # the model of the checkpoint is the average
        assert torch.equal(saved["training_state_dict"][name], raw[name])
    assert not torch.equal(averaged["embedding.weight"], raw["embedding.weight"])
    # validation ran with the averages and then put the raw weights back
    model.on_validation_epoch_start()
    assert torch.equal(model.embedding.weight, averaged["embedding.weight"])
    model.on_validation_epoch_end()
    assert torch.equal(model.embedding.weight, raw["embedding.weight"])


def test_the_nonmonotone_trigger_switches_on_a_stalled_validation_loss(tmp_path):
    torch.manual_seed(6)
    model = build({**TINY, "optimizer": "sgd", "lr": 1e-9, "nonmono": 2}, "awd-lstm")
    fit(model, 2, tmp_path)
    assert not model.nt_asgd().averaging and len(model.nt_history) == 1
    model.nt_history = [5.0, 4.0, 3.0]
    model._after_validation(4.9)  # better than 5.0 (the best before the last 2): keep going
    assert not model.nt_asgd().averaging
    model._after_validation(5.5)  # worse than 5.0: stalled
    assert model.nt_asgd().averaging and model.nt_history == [5.0, 4.0, 3.0, 4.9, 5.5]


def test_switch_after_epochs_starts_averaging_at_the_first_window_of_that_epoch(tmp_path):
    """PaLM's "Adam for 40 epochs": counted in passes over the stream, not in validations, and the NT trigger
    does not switch before."""
    config = {**TINY, "optimizer": "adam", "lr": 0.01, "switch_after_epochs": 1, "nonmono": 1}
    train, _ = batchify(np.random.default_rng(1).integers(0, 30, 80), 4)  # 3 or 4 windows an epoch
    first_epoch = len(StreamBatches(train, None, TINY["bptt"], seed=0).epoch_lengths(0))
    torch.manual_seed(7)
    model = build(config, "palm-u")
    fit(model, first_epoch + 3, tmp_path, train=train)
    optimizer = model.nt_asgd()
    assert optimizer.averaging and optimizer.param_groups[0]["averaged_steps"] == 3  # from step first_epoch
    assert model.switched_at == first_epoch // 2  # the validations (every 2 steps) before the switch
    model = build(config, "palm-u")
    fit(model, 2, tmp_path, train=train)
    model.nt_history = [5.0, 4.0]
    model._after_validation(9.0)  # stalled: the NT trigger would switch, but the switch is counted in epochs
    assert not model.nt_asgd().averaging


@pytest.mark.parametrize("finetune_at", [0, 3])  # 3: switch at step 4, finetuning from step 6
def test_resuming_from_a_checkpoint_ends_where_an_unbroken_run_does(tmp_path, finetune_at):
    quiet = {**TINY, "dropout": 0.0, "dropout_input": 0.0, "dropout_hidden": 0.0, "dropout_embedding": 0.0,
             "weight_drop": 0.0, "optimizer": "adam", "lr": 0.01, "switch_after": 2, "span_loss_weight": 0.0,
             "finetune_at": finetune_at}
    torch.manual_seed(7)
    unbroken = build(quiet, "palm-u")
    start = {k: v.clone() for k, v in unbroken.state_dict().items()}
    fit(unbroken, 8, tmp_path / "a")
    first = build(quiet, "palm-u")
    first.load_state_dict(start)
    trainer = fit(first, 5, tmp_path / "b")
    trainer.save_checkpoint(tmp_path / "mid.ckpt")
    second = build(quiet, "palm-u")
    fit(second, 8, tmp_path / "c", ckpt=tmp_path / "mid.ckpt")
    for name, value in unbroken.state_dict().items():
        torch.testing.assert_close(second.state_dict()[name], value)
    assert second.nt_history == unbroken.nt_history
    assert second.finetune_history == unbroken.finetune_history
    assert (unbroken.finetune_history is None) == (not finetune_at)  # finetuning: validation 4 (step 8)


QUIET = {**TINY, "dropout": 0.0, "dropout_input": 0.0, "dropout_hidden": 0.0, "dropout_embedding": 0.0,
         "weight_drop": 0.0, "optimizer": "adam", "lr": 0.01, "switch_after": 2, "asgd_lr": 0.3,
         "span_loss_weight": 0.0}


class ValidatedWeights(pl.Callback):
    """Each validation's loss and the weights it evaluated (callbacks run before the module's epoch-end hook)."""

    def __init__(self):
        self.seen: list[tuple[float, dict[str, torch.Tensor]]] = []

    def on_validation_epoch_end(self, trainer, module):
        self.seen.append((module._val_sums[0] / module._val_sums[1],
                          {k: v.detach().clone() for k, v in module.named_parameters()}))


def test_finetuning_restarts_averaged_sgd_from_the_best_validated_weights(tmp_path):
    torch.manual_seed(8)
    plain = build(QUIET, "palm-u")
    start = {k: v.clone() for k, v in plain.state_dict().items()}
    watch = ValidatedWeights()
    train, valid = streams()
    trainer = pl.Trainer(max_steps=8, val_check_interval=2, check_val_every_n_epoch=None, num_sanity_val_steps=0,
                         logger=False, enable_checkpointing=False, enable_progress_bar=False,
                         enable_model_summary=False, default_root_dir=str(tmp_path / "a"), callbacks=[watch])
    trainer.fit(plain, train_dataloaders=StreamBatches(train, None, 6, seed=0, consumed=lambda: trainer.global_step),
                val_dataloaders=FixedBatches(fixed_windows(valid, None, 6)))
    assert len(watch.seen) == 4 and plain.switched_at == 2 and plain.finetune_history is None
    best_loss, best_weights = min(watch.seen, key=lambda seen: seen[0])

    # validations 3 and 4 are averaged SGD's; at the 4th the finetuning stage starts from the best of the four
    for steps in (8, 9):
        tuned = build({**QUIET, "finetune_at": 4}, "palm-u")
        tuned.load_state_dict(start)
        fit(tuned, steps, tmp_path / f"b{steps}")
        optimizer = tuned.nt_asgd()
        assert tuned.finetune_history == [] and tuned.nt_history == plain.nt_history
        assert optimizer.averaging and optimizer.param_groups[0]["lr"] == 0.3
        assert optimizer.param_groups[0]["averaged_steps"] == steps - 8
    # after 8 steps: the weights are the best validated ones, and the old average is gone
    tuned8 = build({**QUIET, "finetune_at": 4}, "palm-u")
    tuned8.load_state_dict(start)
    fit(tuned8, 8, tmp_path / "c")
    assert tuned8.averaged_weights() == {}
    for name, value in tuned8.named_parameters():
        torch.testing.assert_close(value.detach(), best_weights[name])
    # one step later the new average is that step's iterate alone
    averaged = tuned.averaged_weights()
    for name, value in tuned.named_parameters():
        torch.testing.assert_close(averaged[name], value.detach())


def test_in_the_finetuning_stage_the_nonmonotone_trigger_ends_the_run(tmp_path):
    torch.manual_seed(9)
    model = build({**QUIET, "finetune_at": 3, "finetune_min": 0, "nonmono": 2}, "awd-lstm")
    trainer = fit(model, 6, tmp_path)
    assert model.finetune_history == [] and not trainer.should_stop  # started at validation 3 (step 6)
    model.finetune_history = [5.0, 4.0, 3.0]
    model._after_validation(4.9)
    assert not trainer.should_stop
    model._after_validation(5.5)  # worse than the best before the last 2: finetune.py stops here
    assert trainer.should_stop and model.finetune_history == [5.0, 4.0, 3.0, 4.9, 5.5]


def test_the_finetuning_stage_runs_its_minimum_before_the_trigger_may_end_it(tmp_path):
    """PaLM's main.py: ``epoch > args.finetuning + 100`` — the NT trigger of the finetuning stage is only read
    once the stage has had ``finetune_min`` validations."""
    torch.manual_seed(9)
    model = build({**QUIET, "finetune_at": 3, "finetune_min": 4, "nonmono": 1}, "awd-lstm")
    trainer = fit(model, 6, tmp_path)
    assert model.finetune_history == []
    for loss in (3.0, 3.5, 4.0, 4.5):  # stalled from the second on, but within the stage's first 4
        model._after_validation(loss)
        assert not trainer.should_stop
    model._after_validation(4.6)  # the 5th: worse than 3.0, the best before the last one
    assert trainer.should_stop and model.finetune_history == [3.0, 3.5, 4.0, 4.5, 4.6]
