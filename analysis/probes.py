"""Probing classifiers and their training regimen (Hewitt & Liang 2019 control tasks, used by Voita & Titov).

Two probes: ``linear`` (one affine map to K logits) and ``mlp`` (one hidden ReLU layer, then K logits; no
dropout). Training follows the control-tasks ``ProbeRegimen`` that Voita & Titov's online code runs:

- Adam (lr 1e-3), mini-batches of ``batch_size`` (20 there) in a fresh random order every epoch, the loss the
  mean cross-entropy of the batch;
- after every epoch, the dev loss: ``ReduceLROnPlateau(factor 0.5, patience 0)`` steps on it, and the probe's
  state is kept when the mean dev loss improves on the best so far by more than ``min_delta`` (1e-3);
- early stopping as there: training stops at the first evaluation more than ``patience`` (4) evaluations after
  the best one (``best_eval < eval - patience``), or after ``max_epochs`` (40);
- the best dev state is restored at the end.

Everything random (initialisation, batch order) comes from one ``torch.Generator`` seeded with ``seed``, so
the same data and seed give the same probe. Probes train on one CPU thread (restored afterwards): their
matrices are far too small to gain from threads (several times slower on a loaded 2-core machine), and the
numbers then do not depend on the caller's thread count.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from lightning_modules.errors import InputError

PROBE_KINDS = ("linear", "mlp")


@dataclass(frozen=True)
class ProbeSettings:
    """Probe size and training regimen (defaults: the control-tasks configs of Voita & Titov 2020)."""

    hidden: int = 1000  # MLP hidden size (control tasks: ``maximum_rank`` 1000)
    lr: float = 1e-3
    batch_size: int = 20
    max_epochs: int = 40
    patience: int = 4  # ``wait_without_improvement_for``
    min_delta: float = 1e-3  # a dev-loss improvement must exceed this (mean nats per target)
    scheduler_factor: float = 0.5
    scheduler_patience: int = 0
    eval_batch_size: int = 4096  # evaluation only: no effect on the numbers beyond float summation order

    def validate(self) -> ProbeSettings:
        for key in ("hidden", "batch_size", "max_epochs", "eval_batch_size"):
            if getattr(self, key) < 1:
                raise InputError(f"must be at least 1 (got {getattr(self, key)!r})", f"probe.{key}")
        for key in ("patience", "scheduler_patience"):
            if getattr(self, key) < 0:
                raise InputError(f"must be >= 0 (got {getattr(self, key)!r})", f"probe.{key}")
        if not self.lr > 0:
            raise InputError(f"must be positive (got {self.lr!r})", "probe.lr")
        if not 0 < self.scheduler_factor < 1:
            raise InputError(f"must be in (0, 1) (got {self.scheduler_factor!r})", "probe.scheduler_factor")
        if self.min_delta < 0:
            raise InputError(f"must be >= 0 (got {self.min_delta!r})", "probe.min_delta")
        return self

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class TrainedProbe:
    """A trained probe (best dev state restored) and how its training went."""

    module: Any  # torch.nn.Module
    kind: str
    epochs: int  # epochs run (early stopping included)
    best_epoch: int  # 1-based epoch of the restored state
    dev_loss: float  # mean dev cross-entropy of the restored state, nats per target

    def logits(self, X: np.ndarray, batch_size: int = 4096) -> Any:
        """Logits [N, K] (float32 tensor) of a feature matrix."""
        import torch

        self.module.eval()
        with torch.no_grad(), single_thread():
            return _logits(self.module, torch.as_tensor(np.asarray(X, dtype=np.float32)), batch_size)

    def summed_cross_entropy(self, X: np.ndarray, y: np.ndarray, batch_size: int = 4096) -> float:
        """Sum over the examples of -ln p(y | x), in **nats** (divide by ln 2 for bits)."""
        import torch
        import torch.nn.functional as F

        logits = self.logits(X, batch_size).double()
        return float(F.cross_entropy(logits, torch.as_tensor(np.asarray(y, dtype=np.int64)), reduction="sum"))

    def accuracy(self, X: np.ndarray, y: np.ndarray, batch_size: int = 4096) -> float:
        predicted = self.logits(X, batch_size).argmax(-1).numpy()
        return float((predicted == np.asarray(y)).mean()) if len(y) else math.nan


def make_probe(kind: str, d_in: int, n_classes: int, hidden: int, generator: Any) -> Any:
    """A fresh probe, initialised from ``generator`` (PyTorch's ``nn.Linear`` initialisation)."""
    import torch
    from torch import nn

    if kind == "linear":
        module = nn.Linear(d_in, n_classes)
    elif kind == "mlp":
        module = nn.Sequential(nn.Linear(d_in, hidden), nn.ReLU(), nn.Linear(hidden, n_classes))
    else:
        raise InputError(f"unknown probe {kind!r} (expected one of {', '.join(PROBE_KINDS)})", "probe")
    with torch.no_grad():
        for layer in module.modules():
            if isinstance(layer, nn.Linear):  # as nn.Linear.reset_parameters, from our generator
                nn.init.kaiming_uniform_(layer.weight, a=math.sqrt(5), generator=generator)
                bound = 1 / math.sqrt(layer.in_features)
                nn.init.uniform_(layer.bias, -bound, bound, generator=generator)
    return module


def _logits(module: Any, X: Any, batch_size: int) -> Any:
    import torch

    if len(X) == 0:
        return module(X)
    return torch.cat([module(X[i : i + batch_size]) for i in range(0, len(X), batch_size)])


@contextmanager
def single_thread() -> Iterator[None]:
    """Run torch on one intra-op thread inside the block."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


def _check(X: np.ndarray, y: np.ndarray, n_classes: int, name: str) -> None:
    if X.ndim != 2:
        raise InputError(f"features must be a matrix [N, D], got shape {X.shape}", name)
    if y.shape != (len(X),):
        raise InputError(f"{len(X)} feature rows but labels of shape {y.shape}", name)
    if len(y) and (y.min() < 0 or y.max() >= n_classes):
        raise InputError(f"labels must be in [0, {n_classes}), got [{y.min()}, {y.max()}]", name)


def train_probe(X: np.ndarray, y: np.ndarray, n_classes: int, dev_X: np.ndarray, dev_y: np.ndarray,
                kind: str = "linear", seed: int = 0, settings: ProbeSettings | None = None) -> TrainedProbe:
    """Train a fresh probe on (X, y) with early stopping on (dev_X, dev_y); see the module docstring."""
    settings = (settings or ProbeSettings()).validate()
    X, dev_X = np.asarray(X, dtype=np.float32), np.asarray(dev_X, dtype=np.float32)
    y, dev_y = np.asarray(y, dtype=np.int64), np.asarray(dev_y, dtype=np.int64)
    if n_classes < 2:
        raise InputError(f"a probe needs at least 2 classes, got {n_classes}", "n_classes")
    _check(X, y, n_classes, "train")
    _check(dev_X, dev_y, n_classes, "dev")
    if len(X) == 0:
        raise InputError("no training examples", "train")
    if len(dev_X) == 0:
        raise InputError("no dev examples (early stopping needs a dev set)", "dev")
    if dev_X.shape[1] != X.shape[1]:
        raise InputError(f"dev features have {dev_X.shape[1]} dimensions, training ones {X.shape[1]}", "dev")

    with single_thread():
        return _train(X, y, n_classes, dev_X, dev_y, kind, seed, settings)


def _train(X: np.ndarray, y: np.ndarray, n_classes: int, dev_X: np.ndarray, dev_y: np.ndarray, kind: str,
           seed: int, settings: ProbeSettings) -> TrainedProbe:
    import torch
    import torch.nn.functional as F

    generator = torch.Generator().manual_seed(int(seed))
    module = make_probe(kind, X.shape[1], n_classes, settings.hidden, generator)
    optimizer = torch.optim.Adam(module.parameters(), lr=settings.lr)
    scheduler = torch.optim.lr_scheduler.ReduceLROnPlateau(
        optimizer, mode="min", factor=settings.scheduler_factor, patience=settings.scheduler_patience)
    train_x, train_y = torch.from_numpy(X), torch.from_numpy(y)
    dev_x, dev_t = torch.from_numpy(dev_X), torch.from_numpy(dev_y)

    best_loss, best_epoch, best_state = math.inf, 0, None
    epoch = 0
    for epoch in range(1, settings.max_epochs + 1):
        module.train()
        order = torch.randperm(len(train_x), generator=generator)
        for start in range(0, len(order), settings.batch_size):
            batch = order[start : start + settings.batch_size]
            loss = F.cross_entropy(module(train_x[batch]), train_y[batch])
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
        module.eval()
        with torch.no_grad():
            dev_sum = float(F.cross_entropy(_logits(module, dev_x, settings.eval_batch_size).double(), dev_t,
                                            reduction="sum"))
        scheduler.step(dev_sum)  # on the summed dev loss, as the regimen (relative threshold: same decisions)
        dev_loss = dev_sum / len(dev_t)
        if dev_loss < best_loss - settings.min_delta:
            best_loss, best_epoch = dev_loss, epoch
            best_state = {k: v.detach().clone() for k, v in module.state_dict().items()}
        elif best_epoch < epoch - settings.patience:
            break
    if best_state is not None:  # None only if the dev loss was never finite: keep the last state
        module.load_state_dict(best_state)
    module.eval()
    return TrainedProbe(module, kind, epochs=epoch, best_epoch=best_epoch, dev_loss=best_loss)
