"""The optimisation hooks every family's LightningModule shares: the per-step learning rate and gradient clipping.

Each module keeps its own ``configure_optimizers`` (TG and Pushdown use Adam, the proposal parser AdamW); the
schedule (``lr_schedule.schedule_for``) and clipping by global norm to ``config.grad_clip_norm`` are the same
for all, so they live here once.
"""

from __future__ import annotations

from typing import Any

import torch

from lightning_modules.models.lr_schedule import schedule_for


class ScheduledClipping:
    """Mixin for a ``pl.LightningModule`` with a ``config`` holding the schedule fields and ``grad_clip_norm``.

    List it before ``pl.LightningModule`` in the bases so its ``configure_gradient_clipping`` wins.
    """

    config: Any

    def learning_rate(self, step: int) -> float:
        """The schedule's learning rate after ``step`` completed optimiser updates."""
        return schedule_for(self.config)(step)

    def configure_gradient_clipping(self, optimizer: torch.optim.Optimizer, gradient_clip_val: float | None = None,
                                    gradient_clip_algorithm: str | None = None) -> None:
        """Always clip by global norm to ``config.grad_clip_norm`` (the official 3.0 for TG and Pushdown)."""
        self.clip_gradients(optimizer, gradient_clip_val=self.config.grad_clip_norm,  # type: ignore[attr-defined]
                            gradient_clip_algorithm="norm")


def global_token_mean(module: Any, total: torch.Tensor, count: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(loss to backpropagate, loss to log) for a summed NLL ``total`` over ``count`` tokens of this process.

    On one process both are ``total / count``. Data-parallel (DDP averages the processes' gradients), the
    backpropagated loss is ``total · world / global_count``, so the averaged gradient is exactly that of the
    token mean over the global batch, as one process on the whole batch computes it; the logged loss is that
    global token mean (the ``count`` and the detached ``total`` summed over processes).
    """
    trainer = getattr(module, "_trainer", None)
    world = trainer.world_size if trainer is not None else 1
    if world == 1:
        loss = total / count.clamp(min=1)
        return loss, loss.detach()
    strategy = trainer.strategy
    global_count = strategy.reduce(count.float(), reduce_op="sum").clamp(min=1)
    logged = strategy.reduce(total.detach().clone(), reduce_op="sum") / global_count  # reduces in place
    return total * world / global_count, logged
