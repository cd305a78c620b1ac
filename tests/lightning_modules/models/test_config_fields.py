"""The shared key/type check of model configs (TG, proposal parser, Pushdown)."""

from dataclasses import dataclass

import pytest

from lightning_modules.errors import InputError
from lightning_modules.models.config_fields import checked_values


@dataclass
class Example:
    layers: int = 2
    rate: float = 0.1
    tied: bool = True
    mode: str = "a"


def test_values_are_checked_and_floats_accept_ints():
    assert checked_values(Example, {"layers": 3, "rate": 1, "tied": False, "mode": "b"}) == {
        "layers": 3, "rate": 1.0, "tied": False, "mode": "b"}


@pytest.mark.parametrize("key,value", [("layers", 2.0), ("layers", True), ("rate", "1e-3"), ("tied", 1),
                                       ("mode", 3), ("nope", 1)])
def test_bad_key_or_type_names_the_key(key, value):
    with pytest.raises(InputError) as e:
        checked_values(Example, {key: value}, prefix="model.")
    assert e.value.location == f"model.{key}"
