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
