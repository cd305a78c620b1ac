"""``runtime.compile``: run a module's network forward through ``torch.compile`` to cut kernel-launch overhead.

Modes (``COMPILE_MODES``):
  * ``none`` (default): eager;
  * ``default``: ``torch.compile`` with its default backend (inductor: fused kernels, Triton on CUDA, C++ on CPU);
  * ``reduce-overhead``: the same plus CUDA graphs (a step's kernels replayed as one launch). CUDA graphs need a
    CUDA device: on any other accelerator this mode is refused (one error line), not silently run eagerly.

A module opts in by naming its compilable submodules in the class attribute ``compiled_parts`` (the Transformer-XL
core models: ``("network",)``); a module without it cannot be compiled (an error naming ``runtime.compile``), so
shared code never names a family. Each part is compiled in place (``nn.Module.compile``), so parameter names and
checkpoints are those of the eager module. A seed group (``SeedStack.compile``) compiles its whole vmapped loss.
What stays eager: the loss, the optimizer step and gradient clipping.

Shapes: the chunk tensors are [B, L] and [B, L, M + L], where the collate trims each chunk to its longest
sequence, so L (and B on a last, short batch) vary between steps. They are left to torch's automatic dynamic
shapes (``dynamic=None``): the first call compiles for its exact shapes, and a dimension seen to change is
recompiled once as symbolic; the memory (None on a chunk that starts the batch, else a tensor) and train/eval
mode are guards, each a graph of its own. The memory shortcut of the core (``reset.all()``, a host sync) breaks
each chunk's forward into two graphs: the embedding and memory reset, then every layer and the output. Under
``reduce-overhead`` CUDA graphs are recorded per distinct shape (cudagraph trees).

The compiled forward computes the same function, but not the same numbers: fused kernels round differently
(without dropout, per-step losses equal eager's within rtol 1e-5: tests/lightning_modules/models/test_compiled.py)
and inductor draws dropout masks with its own generator, so its masks are not the eager run's. So, like
``runtime.precision``, a mode other than ``none`` is part of the run id (``experiments.config.RESULT_RUNTIME``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch
from torch import nn

from lightning_modules.errors import InputError

COMPILE_MODES = ("none", "default", "reduce-overhead")
KEY = "runtime.compile"


def compile_mode(runtime: Mapping[str, Any]) -> str:
    """The checked ``runtime.compile`` of a run (``reduce-overhead`` only where ``runtime.accelerator`` is CUDA:
    cuda | gpu, or auto on a machine with CUDA)."""
    mode = str(runtime.get("compile", "none"))
    if mode not in COMPILE_MODES:
        raise InputError(f"unknown compile mode {mode!r} (known: {', '.join(COMPILE_MODES)})", KEY)
    accelerator = str(runtime.get("accelerator", "auto"))
    cuda = accelerator in ("cuda", "gpu") or (accelerator == "auto" and torch.cuda.is_available())
    if mode == "reduce-overhead" and not cuda:
        raise InputError("reduce-overhead captures CUDA graphs and needs a CUDA device; use default or none", KEY)
    return mode


def compile_options(module: nn.Module, mode: str, backend: str = "inductor") -> dict[str, Any]:
    """``torch.compile``'s arguments for ``mode`` (not ``none``), once ``module`` is known to be compilable.

    ``backend``: training always uses inductor; tests may take ``aot_eager`` (the same graph capture and
    autograd, without inductor's code generation, slow on CPU)."""
    if not getattr(module, "compiled_parts", None):
        raise InputError(f"{type(module).__name__} names no compilable network (compiled_parts); use none", KEY)
    options: dict[str, Any] = {"backend": backend, "dynamic": None}
    if mode != "default":
        options["mode"] = mode
    return options


def compile_module(module: nn.Module, mode: str, backend: str = "inductor") -> nn.Module:
    """Compile the ``compiled_parts`` of ``module`` in place (``mode`` from ``compile_mode``); returns it."""
    if mode == "none":
        return module
    options = compile_options(module, mode, backend)
    for name in module.compiled_parts:
        module.get_submodule(name).compile(**options)
    return module
