"""NT-ASGD: the base phase is SGD or Adam exactly, the trigger is Merity et al.'s non-monotone rule, and after
the switch the average is the Polyak average of the iterates (torch.optim.ASGD with t0=0, lambd=0, which
leaves out the first iterate)."""

from __future__ import annotations

import pytest
import torch

from lightning_modules.families.palm.nt_asgd import NTASGD, nonmonotone_trigger


def quadratic_steps(optimizer: torch.optim.Optimizer, p: torch.Tensor, steps: int, target: torch.Tensor) -> list:
    iterates = []
    for _ in range(steps):
        optimizer.zero_grad()
        ((p - target) ** 2 * torch.arange(1.0, p.numel() + 1)).sum().backward()
        optimizer.step()
        iterates.append(p.detach().clone())
    return iterates


@pytest.mark.parametrize("base", ["sgd", "adam"])
def test_base_phase_is_torch_sgd_or_adam(base):
    target = torch.randn(5)
    p1, p2 = torch.nn.Parameter(torch.zeros(5)), torch.nn.Parameter(torch.zeros(5))
    ours = NTASGD([p1], lr=0.05, weight_decay=0.01, base=base)
    reference = (torch.optim.SGD([p2], lr=0.05, weight_decay=0.01) if base == "sgd"
                 else torch.optim.Adam([p2], lr=0.05, weight_decay=0.01))
    a, b = quadratic_steps(ours, p1, 7, target), quadratic_steps(reference, p2, 7, target)
    for x, y in zip(a, b):
        torch.testing.assert_close(x, y)
    assert not ours.averaging and ours.averages() == {}


@pytest.mark.parametrize("base", ["sgd", "adam"])
def test_averaged_phase_is_sgd_with_the_polyak_average_of_its_iterates(base):
    target = torch.randn(4)
    p = torch.nn.Parameter(torch.zeros(4))
    optimizer = NTASGD([p], lr=0.1, weight_decay=0.001, base=base)
    quadratic_steps(optimizer, p, 3, target)  # before the switch: not averaged
    optimizer.start_averaging(lr=0.02)
    start = p.detach().clone()
    reference_p = torch.nn.Parameter(start.clone())
    reference = torch.optim.ASGD([reference_p], lr=0.02, t0=0, lambd=0.0, alpha=0.75, weight_decay=0.001)
    iterates = quadratic_steps(optimizer, p, 6, target)
    quadratic_steps(reference, reference_p, 6, target)
    torch.testing.assert_close(p.detach(), reference_p.detach())  # the SGD iterates
    torch.testing.assert_close(optimizer.averages()[p], torch.stack(iterates).mean(0))  # their mean
    # torch's ASGD (the official code's) starts its average one step later: the mean of iterates 2..n
    torch.testing.assert_close(torch.stack(iterates[1:]).mean(0), reference.state[reference_p]["ax"])
    assert optimizer.averaging and optimizer.param_groups[0]["averaged_steps"] == 6


def test_lr_scale_scales_the_next_step():
    p = torch.nn.Parameter(torch.ones(2))
    optimizer = NTASGD([p], lr=0.5)
    optimizer.param_groups[0]["lr_scale"] = 0.5
    p.grad = torch.ones(2)
    optimizer.step()
    torch.testing.assert_close(p.detach(), torch.full((2,), 0.75))


def test_state_round_trips_through_state_dict():
    p = torch.nn.Parameter(torch.zeros(3))
    optimizer = NTASGD([p], lr=0.1, base="adam")
    quadratic_steps(optimizer, p, 2, torch.ones(3))
    optimizer.start_averaging(0.05)
    quadratic_steps(optimizer, p, 2, torch.ones(3))
    q = torch.nn.Parameter(p.detach().clone())
    restored = NTASGD([q], lr=1.0, base="adam")
    restored.load_state_dict(optimizer.state_dict())
    assert restored.averaging and restored.param_groups[0]["lr"] == 0.05
    a, b = quadratic_steps(optimizer, p, 3, torch.ones(3)), quadratic_steps(restored, q, 3, torch.ones(3))
    torch.testing.assert_close(a[-1], b[-1])
    torch.testing.assert_close(optimizer.averages()[p], restored.averages()[q])


def test_unknown_base_optimiser_is_an_error():
    with pytest.raises(ValueError):
        NTASGD([torch.nn.Parameter(torch.zeros(1))], lr=1.0, base="rmsprop")


@pytest.mark.parametrize("previous,current,nonmono,expected", [
    ([5.0, 4.0, 3.0], 3.5, 2, False),  # better than 5.0, the best before the last 2 validations
    ([5.0, 4.0, 3.0], 5.5, 2, True),  # 5.5 > 5.0
    ([5.0, 4.0, 3.0], 4.9, 2, False),
    ([5.0, 4.0], 9.0, 2, False),  # needs more than nonmono earlier validations
    ([5.0, 3.0, 4.0, 4.5, 4.2], 3.1, 3, True),  # min(5, 3) = 3 < 3.1: no improvement for 3+ validations
    ([5.0, 3.0, 4.0, 4.5, 4.2], 2.9, 3, False),
])
def test_nonmonotone_trigger(previous, current, nonmono, expected):
    assert nonmonotone_trigger(previous, current, nonmono) is expected
