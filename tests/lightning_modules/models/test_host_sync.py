"""``no_host_sync`` refuses what would make the host wait for the device: a scalar read and an operator whose
output shape depends on values; device-side work passes. (The group's training step runs under it in every
seed-group equivalence test: ``group_equivalence.trains_as_solo``.)"""

import pytest
import torch

from lightning_modules.models.host_sync import HostSync, no_host_sync

CPU = torch.device("cpu")


@pytest.mark.parametrize("read", [lambda t: t.sum().item(), lambda t: float(t[0]), lambda t: bool(t.any()),
                                  lambda t: t.nonzero(), lambda t: t.masked_select(t > 0),
                                  lambda t: torch.unique(t)])
def test_host_reads_are_refused(read):
    t = torch.randn(5)
    with pytest.raises(HostSync), no_host_sync(CPU):
        read(t)
    read(t)  # outside, allowed


def test_device_work_passes():
    t = torch.randn(5, requires_grad=True)
    with no_host_sync(CPU):
        loss = torch.where(t > 0, t * 2, torch.zeros_like(t)).sum()
        loss.backward()
        index = torch.tensor([0, 2])
        out = t.detach()[index] + torch.clamp(t.detach(), max=1.0)[:2]
    assert out.shape == (2,) and t.grad is not None
