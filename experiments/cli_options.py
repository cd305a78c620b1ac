"""Checked argument types and shared options of the CLI: a bad number is one error line naming the option, never
a traceback.

``argparse`` calls the types on the raw string; a ``ValueError``/``ArgumentTypeError`` becomes
``synbench: error: argument --temperature: expected a finite number > 0, got 'nan'`` (exit status 2). The
commands (``experiments.commands``) and the evaluators that declare their own options (``experiments.evaluate``)
both read them here, so an evaluator never imports a command module.
"""

from __future__ import annotations

import argparse
import math


def _number(text: str, kind: type) -> int | float:
    try:
        value = kind(text)
    except ValueError:
        what = "an integer" if kind is int else "a number"
        raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"expected a finite number, got {text!r}")
    return value


def positive_int(text: str) -> int:
    """An integer >= 1 (sizes, counts, beams)."""
    value = _number(text, int)
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected an integer >= 1, got {text!r}")
    return value


def natural(text: str) -> int:
    """An integer >= 0 (seeds, worker indices)."""
    value = _number(text, int)
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected an integer >= 0, got {text!r}")
    return value


def positive_float(text: str) -> float:
    """A finite number > 0 (temperatures, intervals)."""
    value = _number(text, float)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"expected a finite number > 0, got {text!r}")
    return value


DEVICES = ("cpu", "cuda")


def add_device_argument(p: argparse.ArgumentParser) -> None:
    """``--device cpu|cuda`` of every command that scores with a model."""
    p.add_argument("--device", default="cpu", choices=DEVICES,
                   help="where the model runs (default cpu; cuda: the first visible GPU, batched)")


def checked_device(device: str) -> str:
    """``device``, after checking that CUDA is there when asked for (one error line otherwise)."""
    import torch

    from lightning_modules.errors import InputError

    if device == "cuda" and not torch.cuda.is_available():
        raise InputError("CUDA is not available on this machine (no GPU or a CPU-only torch): use --device cpu",
                         "--device")
    return device
