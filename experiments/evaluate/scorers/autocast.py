"""Running a scorer under bf16 autocast with the numerically sensitive functions in float32
(``experiments/evaluate/inference_dtype.py`` says what the setting promises and what it does not)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import torch
import torch.nn.functional as F
from torch.overrides import TorchFunctionMode

# functions whose bf16 inputs are cast to float32 first (method and function forms)
_FLOAT32_FUNCTIONS = frozenset({
    torch.log_softmax, F.log_softmax, torch.Tensor.log_softmax,
    torch.softmax, F.softmax, torch.Tensor.softmax,
    torch.logsumexp, torch.Tensor.logsumexp,
    torch.sum, torch.Tensor.sum, torch.cumsum, torch.Tensor.cumsum,
    F.cross_entropy, F.nll_loss,
})


class Float32Reductions(TorchFunctionMode):
    """Runs log-softmax, softmax, logsumexp, sums and the losses on float32 inputs (bf16 ones cast up)."""

    def __torch_function__(self, func: Callable[..., Any], types: Any, args: tuple = (),
                           kwargs: dict[str, Any] | None = None) -> Any:
        kwargs = kwargs or {}
        if func in _FLOAT32_FUNCTIONS:
            args = tuple(a.float() if isinstance(a, torch.Tensor) and a.dtype == torch.bfloat16 else a
                         for a in args)
        return func(*args, **kwargs)


@contextmanager
def running(device: str) -> Iterator[None]:
    """bf16 autocast on ``device``'s kind, with the sensitive reductions in float32."""
    with torch.autocast(torch.device(device).type, dtype=torch.bfloat16), Float32Reductions():
        yield


class AutocastScorer:
    """A scorer whose every method call runs under ``running(device)``; attributes pass through."""

    def __init__(self, scorer: Any, device: str):
        self.inner, self.device = scorer, device

    def __getattr__(self, name: str) -> Any:
        value = getattr(self.inner, name)
        if not callable(value) or isinstance(value, type):
            return value

        def call(*args: Any, **kwargs: Any) -> Any:
            with running(self.device):
                return value(*args, **kwargs)

        return call
