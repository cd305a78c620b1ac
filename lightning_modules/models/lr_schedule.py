"""The official TG learning-rate schedule, ``linear_warmup_then_cosine_anneal`` (lr_schedules.py).

For ``step < warmup_steps``: linear from ``start_lr`` to ``max_lr``. From then on: cosine from ``max_lr`` to
``min_lr`` over ``cosine_cycle_steps`` counted from the end of the warm-up; after the cycle the rate stays at
``min_lr``. (The official config sets the cycle to the number of training steps, 100k, so with 8k warm-up
steps training ends before the minimum is reached.) ``step`` is the number of optimizer updates already made.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from functools import partial
from typing import Any

import torch


def linear_warmup_then_cosine_anneal(step: int, *, start_lr: float, max_lr: float, min_lr: float,
                                     warmup_steps: int, cosine_cycle_steps: int) -> float:
    """Learning rate for the update that follows ``step`` earlier updates."""
    if step < warmup_steps:
        return start_lr + (step / warmup_steps) * (max_lr - start_lr)
    t = min((step - warmup_steps) / cosine_cycle_steps, 1.0)
    return min_lr + (max_lr - min_lr) * 0.5 * (1.0 + math.cos(math.pi * t))


def schedule_for(config: Any) -> Callable[[int], float]:
    """The schedule of a model config with ``start_lr, peak_lr, min_lr, warmup_steps, total_steps``."""
    return partial(linear_warmup_then_cosine_anneal, start_lr=config.start_lr, max_lr=config.peak_lr,
                   min_lr=config.min_lr, warmup_steps=config.warmup_steps, cosine_cycle_steps=config.total_steps)


def stepwise_scheduler(optimizer: torch.optim.Optimizer, config: Any) -> dict[str, Any]:
    """Lightning's ``lr_scheduler`` entry applying the schedule at every optimizer step.

    The optimizer's base rate must be ``config.peak_lr``: ``LambdaLR`` multiplies it by schedule / peak.
    """
    rate = schedule_for(config)
    peak = config.peak_lr
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: rate(step) / peak if peak else 0.0)
    return {"scheduler": scheduler, "interval": "step"}
