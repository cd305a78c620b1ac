"""Probes and the control-tasks regimen: shapes, learning, early stopping, best state, determinism."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from analysis.probes import ProbeSettings, make_probe, train_probe
from lightning_modules.errors import InputError

SETTINGS = ProbeSettings(batch_size=32, hidden=16, max_epochs=30)


def clusters(n, d=6, k=3, seed=0, noise=0.3):
    rng = np.random.default_rng(seed)
    centers = rng.normal(size=(k, d)) * 2
    y = rng.integers(0, k, n)
    return (centers[y] + noise * rng.normal(size=(n, d))).astype(np.float32), y


def test_probe_shapes():
    g = torch.Generator().manual_seed(0)
    linear = make_probe("linear", 10, 4, 99, g)
    mlp = make_probe("mlp", 10, 4, 7, g)
    assert sum(p.numel() for p in linear.parameters()) == 10 * 4 + 4
    assert sum(p.numel() for p in mlp.parameters()) == 10 * 7 + 7 + 7 * 4 + 4
    assert isinstance(mlp[1], torch.nn.ReLU) and len(mlp) == 3  # one hidden layer, no dropout
    with pytest.raises(InputError, match="unknown probe"):
        make_probe("bilinear", 10, 4, 7, g)


@pytest.mark.parametrize("kind", ["linear", "mlp"])
def test_learns_a_separable_task(kind):
    x_all, y_all = clusters(800, seed=1)
    x, y, dev_x, dev_y = x_all[:600], y_all[:600], x_all[600:], y_all[600:]
    probe = train_probe(x, y, 3, dev_x, dev_y, kind, seed=0, settings=SETTINGS)
    assert probe.accuracy(dev_x, dev_y) > 0.97
    assert probe.logits(dev_x).shape == (200, 3)


def test_restores_the_best_dev_state_and_stops_early():
    """Random labels: the dev loss stops improving after a few epochs; the regimen stops ``patience + 1``
    evaluations after the best one and restores that state."""
    rng = np.random.default_rng(0)
    x, y = rng.normal(size=(400, 20)).astype(np.float32), rng.integers(0, 3, 400)
    dev_x, dev_y = rng.normal(size=(200, 20)).astype(np.float32), rng.integers(0, 3, 200)
    probe = train_probe(x, y, 3, dev_x, dev_y, "mlp", seed=1, settings=SETTINGS)
    assert probe.epochs < SETTINGS.max_epochs
    assert probe.epochs == probe.best_epoch + SETTINGS.patience + 1
    mean_nats = probe.summed_cross_entropy(dev_x, dev_y) / len(dev_y)
    assert mean_nats == pytest.approx(probe.dev_loss, rel=1e-9)


def test_deterministic_given_the_seed_and_independent_of_threads():
    x_all, y_all = clusters(300, seed=2, noise=2.0)
    args = (x_all[:200], y_all[:200], 3, x_all[200:], y_all[200:], "mlp")
    a = train_probe(*args, seed=4, settings=SETTINGS)
    threads = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        b = train_probe(*args, seed=4, settings=SETTINGS)
    finally:
        torch.set_num_threads(threads)
    c = train_probe(*args, seed=5, settings=SETTINGS)
    assert torch.get_num_threads() == threads  # restored
    for (name, pa), pb in zip(a.module.state_dict().items(), b.module.state_dict().values()):
        assert torch.equal(pa, pb), name
    assert not torch.equal(a.module[0].weight, c.module[0].weight)


def test_bad_input():
    x, y = clusters(20)
    with pytest.raises(InputError, match="no dev examples"):
        train_probe(x, y, 3, x[:0], y[:0])
    with pytest.raises(InputError, match="no training examples"):
        train_probe(x[:0], y[:0], 3, x, y)
    with pytest.raises(InputError, match="dimensions"):
        train_probe(x, y, 3, x[:, :2], y)
    with pytest.raises(InputError, match="labels must be in"):
        train_probe(x, y, 2, x, y)
    with pytest.raises(InputError, match="probe.batch_size"):
        train_probe(x, y, 3, x, y, settings=ProbeSettings(batch_size=0))
    with pytest.raises(InputError, match="at least 2 classes"):
        train_probe(x, y * 0, 1, x, y * 0)
