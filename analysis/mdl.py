"""Minimum description length probing: the online code of Voita & Titov (2020), in **bits**.

The sender transmits the labels y_1..y_N of a probing dataset to a receiver who already has the
representations x_1..x_N. The data (its *units*: sentences when ``groups`` gives each target's sentence, else
the targets themselves) is shuffled with ``seed`` and cut at ``t_i = int(frac_i · U)`` units for the fractions
0.1, 0.2, 0.4, 0.8, 1.6, 3.2, 6.25, 12.5, 25, 50, 100 % (``PAPER_FRACTIONS``, the reference code's
``regimen.inds``). The first block [0, t_0) is sent with the uniform code, log2 K bits per target; each later
block [t_i, t_{i+1}) with a **fresh probe** trained on [0, t_i) (early stopping on the real dev set), costing
its summed cross-entropy in bits::

    online = n(block 0) · log2 K + Σ_i Σ_{j in block i+1} -log2 p_i(y_j | x_j)
    uniform = N · log2 K,   compression = uniform / online

Units: PyTorch's cross-entropy is in nats and is divided by ln 2 here. Both of the reference notebooks
(``Eval_MDL_online_code.ipynb`` of the control-tasks and jiant folders) add the per-block nats to the first
block's bits without converting, which overstates the online code length by up to a factor 1/ln 2 ≈ 1.44;
numbers from this module are not directly comparable with numbers computed that way.

Degenerate blocks (small N): when a block's training prefix is empty (e.g. t_0 = 0 units for U < 1000) the
block is sent with the uniform code as well (a receiver with no data has nothing better); an empty block
costs 0 bits and trains nothing. A class absent from a prefix is still one of the probe's K outputs. The
probe trained on 100 % of the data is not used for coding; its dev accuracy is the usual probing accuracy.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from analysis.probes import PROBE_KINDS, ProbeSettings, train_probe
from lightning_modules.errors import InputError

PAPER_FRACTIONS = (0.001, 0.002, 0.004, 0.008, 0.016, 0.032, 0.0625, 0.125, 0.25, 0.5, 1.0)
BITS = "bits (cross-entropy sums in nats divided by ln 2)"


@dataclass
class Block:
    """One transmitted block: targets [start, end) of the shuffled data, units [unit_start, unit_end)."""

    start: int
    end: int
    unit_start: int
    unit_end: int
    bits: float
    code: str  # "uniform" | "probe" | "empty"
    train_size: int  # targets the coding probe was trained on (0 for uniform/empty)
    epochs: int = 0  # epochs the coding probe ran


@dataclass
class OnlineCodeResult:
    """Online code length of one probing dataset, with everything needed to recompute it."""

    n: int  # targets
    n_units: int  # sentences (or targets without groups)
    n_classes: int
    uniform_bits: float
    online_bits: float
    compression: float
    dev_accuracy: float  # of the probe trained on 100 %
    dev_n: int
    blocks: list[Block]
    fractions: tuple[float, ...]
    kind: str
    seed: int
    settings: dict[str, Any] = field(default_factory=dict)

    @property
    def block_bits(self) -> list[float]:
        """Bits of every block, the uniform first block included; they sum to ``online_bits``."""
        return [b.bits for b in self.blocks]

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["fractions"] = list(self.fractions)
        out["block_bits"] = self.block_bits
        out["units"] = BITS
        return out


def shuffle_units(n: int, groups: np.ndarray | None, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """The seeded shuffle of the online code: (target order [n], start of every unit in that order [U + 1]).

    Units are the distinct ``groups`` (targets keep their input order within a unit), or the targets.
    """
    rng = np.random.default_rng(seed)
    if groups is None:
        return rng.permutation(n), np.arange(n + 1)
    _, first, unit = np.unique(groups, return_index=True, return_inverse=True)
    appearance = np.argsort(np.argsort(first))  # unit ids in order of first appearance (stable input order)
    unit = appearance[unit.reshape(-1)]
    units = len(first)
    rank = np.empty(units, dtype=np.int64)
    rank[rng.permutation(units)] = np.arange(units)
    order = np.argsort(rank[unit], kind="stable")  # targets keep their input order within a unit
    offsets = np.zeros(units + 1, dtype=np.int64)
    np.cumsum(np.bincount(rank[unit], minlength=units), out=offsets[1:])
    return order, offsets


def online_code(X: np.ndarray, y: np.ndarray, n_classes: int, dev_X: np.ndarray, dev_y: np.ndarray,
                groups: np.ndarray | None = None, fractions: tuple[float, ...] = PAPER_FRACTIONS,
                kind: str = "linear", seed: int = 0, settings: ProbeSettings | None = None
                ) -> OnlineCodeResult:
    """Online code length (bits) of labels ``y`` given features ``X``; see the module docstring.

    ``groups`` (one id per target, e.g. the sentence index) makes the blocks whole units, as the reference
    code's sentence-level splits. Every probe is trained with ``seed`` and ``settings``.
    """
    settings = (settings or ProbeSettings()).validate()
    X, y = np.asarray(X), np.asarray(y)
    if kind not in PROBE_KINDS:
        raise InputError(f"unknown probe {kind!r} (expected one of {', '.join(PROBE_KINDS)})", "probe")
    if n_classes < 2:
        raise InputError(f"the online code needs at least 2 classes, got {n_classes}", "n_classes")
    if len(y) == 0:
        raise InputError("no targets to encode", "train")
    if len(X) != len(y):
        raise InputError(f"{len(X)} feature rows for {len(y)} labels", "train")
    if y.min() < 0 or y.max() >= n_classes:
        raise InputError(f"labels must be in [0, {n_classes}), got [{y.min()}, {y.max()}]", "train")
    if groups is not None:
        groups = np.asarray(groups)
        if groups.shape != y.shape:
            raise InputError(f"{len(groups)} group ids for {len(y)} targets", "groups")
    fractions = tuple(float(f) for f in fractions)
    if (not fractions or fractions[-1] != 1.0 or any(not 0 < f <= 1 for f in fractions)
            or any(a >= b for a, b in zip(fractions, fractions[1:]))):
        raise InputError(f"must increase strictly within (0, 1] and end at 1.0, got {fractions}", "fractions")

    order, offsets = shuffle_units(len(y), groups, seed)
    X, y = X[order], y[order]
    units = len(offsets) - 1
    cuts = [int(f * units) for f in fractions]  # the reference's boundaries, over units
    log2k = math.log2(n_classes)
    first_end = int(offsets[cuts[0]])
    blocks = [Block(0, first_end, 0, cuts[0], first_end * log2k, "uniform", 0)]
    for lo, hi in zip(cuts, cuts[1:]):
        start, end = int(offsets[lo]), int(offsets[hi])
        if end == start:
            blocks.append(Block(start, end, lo, hi, 0.0, "empty", 0))
        elif start == 0:
            blocks.append(Block(start, end, lo, hi, (end - start) * log2k, "uniform", 0))
        else:
            probe = train_probe(X[:start], y[:start], n_classes, dev_X, dev_y, kind, seed, settings)
            nats = probe.summed_cross_entropy(X[start:end], y[start:end], settings.eval_batch_size)
            blocks.append(Block(start, end, lo, hi, nats / math.log(2), "probe", start, probe.epochs))
    final = train_probe(X, y, n_classes, dev_X, dev_y, kind, seed, settings)
    uniform = len(y) * log2k
    online = float(sum(b.bits for b in blocks))
    return OnlineCodeResult(
        n=len(y), n_units=units, n_classes=n_classes, uniform_bits=uniform, online_bits=online,
        compression=uniform / online if online > 0 else math.inf,
        dev_accuracy=final.accuracy(dev_X, dev_y, settings.eval_batch_size), dev_n=len(dev_y),
        blocks=blocks, fractions=fractions, kind=kind, seed=seed, settings=settings.to_dict(),
    )
