"""Finding host syncs: a read of a tensor's value by the host (``.item()``, ``float(t)``, ``bool(t)``, ``if t:``)
inside code meant to run without one, such as a seed group's training step.

A sync stalls the host until the device has caught up, so no work is queued ahead, and a CUDA graph cannot hold
one. On CUDA ``torch.cuda.set_sync_debug_mode("error")`` refuses every synchronising call; on any device (the CPU
included, where nothing is asynchronous but the same code must not read values either) a dispatch mode refuses
``aten._local_scalar_dense``, the one operator through which every scalar read goes, and the operators whose
output shape depends on values (``nonzero``, ``masked_select``, ``unique``). Boolean indexing (whose kernel
finds the indices itself) and copies to the host (``.cpu()``, ``.tolist()``: no-ops on a CPU tensor) are caught
on CUDA only. Both checks are on inside ``no_host_sync``.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode


class HostSync(RuntimeError):
    """A tensor's value was read by the host where no sync is allowed."""


# operators whose output shape depends on tensor values: on CUDA the host must wait to learn it
_SHAPE_READS = {torch.ops.aten.nonzero.default, torch.ops.aten.masked_select.default,
                torch.ops.aten._unique2.default, torch.ops.aten.unique_consecutive.default}


class _ScalarReads(TorchDispatchMode):
    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        if func is torch.ops.aten._local_scalar_dense.default:
            raise HostSync("a tensor's value was read by the host (item, float, bool)")
        if func in _SHAPE_READS:
            raise HostSync(f"{func} has an output shape the host must read (nonzero, masked_select, unique)")
        return func(*args, **(kwargs or {}))


@contextmanager
def no_host_sync(device: torch.device) -> Iterator[None]:
    """Raise ``HostSync`` on a scalar read inside (any device), and a RuntimeError on any synchronising CUDA call
    (on CUDA)."""
    cuda = device.type == "cuda"
    if cuda:
        previous = torch.cuda.get_sync_debug_mode()
        torch.cuda.set_sync_debug_mode("error")
    try:
        with _ScalarReads():
            yield
    finally:
        if cuda:
            torch.cuda.set_sync_debug_mode(previous)
