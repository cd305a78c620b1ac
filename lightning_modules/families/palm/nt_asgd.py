"""NT-ASGD (Merity et al. 2018, §3): train with SGD — or Adam, as PaLM does (Appendix A) — until validation
stalls, then switch to averaged SGD (Polyak & Juditsky 1992): plain SGD steps whose iterates are averaged,
and the average is the model that is evaluated and kept.

``NTASGD`` is one optimiser for the whole run, so Lightning never has to swap optimisers and its state (the
phase, the Adam moments, the running average and the number of averaged steps) is saved and restored with
every checkpoint. After ``start_averaging`` each step is ``p ← p − lr (∇ + wd · p)`` followed by
``avg ← avg + (p − avg) / n`` (n = averaged steps so far): the mean of every iterate since the switch. The
official code's ``torch.optim.ASGD(t0=0, lambd=0)`` takes the same SGD steps but, by its update order, leaves
the first iterate out of its average (tested). ``lr_scale`` multiplies the learning rate of the next step
(variable-length BPTT scales it by seq_len / bptt).

``nonmonotone_trigger`` is the official switching rule: with the validation losses seen so far, switch when
the new loss is worse than the best one from before the last ``nonmono`` validations.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

import torch
from torch import Tensor


def nonmonotone_trigger(previous: Sequence[float], current: float, nonmono: int) -> bool:
    """Merity et al.'s rule (``len(logs) > nonmono and val_loss > min(logs[:-nonmono])``; logs exclude now)."""
    return len(previous) > nonmono and current > min(previous[:-nonmono])


class NTASGD(torch.optim.Optimizer):
    """SGD or Adam, then averaged SGD after ``start_averaging``; L2 weight decay added to the gradient."""

    def __init__(self, params: Iterable[Tensor], lr: float, weight_decay: float = 0.0, base: str = "sgd",
                 betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8):
        if base not in ("sgd", "adam"):
            raise ValueError(f"base optimiser must be 'sgd' or 'adam', not {base!r}")
        defaults = {"lr": lr, "weight_decay": weight_decay, "base": base, "betas": betas, "eps": eps,
                    "averaging": False, "averaged_steps": 0, "lr_scale": 1.0}
        super().__init__(params, defaults)

    @property
    def averaging(self) -> bool:
        return bool(self.param_groups[0]["averaging"])

    def start_averaging(self, lr: float | None = None) -> None:
        """Switch to averaged SGD (optionally with a new learning rate); the average starts at the next step."""
        for group in self.param_groups:
            group["averaging"] = True
            if lr is not None:
                group["lr"] = lr

    def restart_averaging(self, lr: float | None = None) -> None:
        """Start a new average (AWD-LSTM's finetuning: a fresh ASGD from the current weights): the running
        averages are dropped and the next step's iterate is the first of the new average."""
        for group in self.param_groups:
            group["averaged_steps"] = 0
            for p in group["params"]:
                self.state[p].pop("average", None)
        self.start_averaging(lr)

    @torch.no_grad()
    def step(self, closure: Callable[[], float] | None = None) -> float | None:  # type: ignore[override]
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for group in self.param_groups:
            lr = group["lr"] * group["lr_scale"]
            if group["averaging"]:
                group["averaged_steps"] += 1
            for p in group["params"]:
                if p.grad is None:
                    continue
                grad = p.grad.add(p, alpha=group["weight_decay"]) if group["weight_decay"] else p.grad
                state = self.state[p]
                if group["averaging"] or group["base"] == "sgd":
                    p.add_(grad, alpha=-lr)
                else:
                    self._adam(p, grad, state, group, lr)
                if group["averaging"]:
                    if "average" not in state:
                        state["average"] = p.detach().clone()
                    state["average"].add_(p - state["average"], alpha=1.0 / group["averaged_steps"])
        return loss

    @staticmethod
    def _adam(p: Tensor, grad: Tensor, state: dict, group: dict, lr: float) -> None:
        """``torch.optim.Adam``'s update (L2 weight decay in the gradient, bias-corrected moments)."""
        beta1, beta2 = group["betas"]
        if "adam_step" not in state:
            state["adam_step"] = 0
            state["exp_avg"] = torch.zeros_like(p)
            state["exp_avg_sq"] = torch.zeros_like(p)
        state["adam_step"] += 1
        t = state["adam_step"]
        state["exp_avg"].mul_(beta1).add_(grad, alpha=1.0 - beta1)
        state["exp_avg_sq"].mul_(beta2).addcmul_(grad, grad, value=1.0 - beta2)
        denominator = (state["exp_avg_sq"].sqrt() / (1.0 - beta2**t) ** 0.5).add_(group["eps"])
        p.addcdiv_(state["exp_avg"], denominator, value=-lr / (1.0 - beta1**t))

    def averages(self) -> dict[Tensor, Tensor]:
        """Parameter -> its running average, for every parameter averaged so far (empty before the switch)."""
        return {p: self.state[p]["average"] for group in self.param_groups for p in group["params"]
                if "average" in self.state[p]}
