"""Reading a model config dataclass from a flat mapping (a YAML preset plus overrides), key by key.

Every key must be a field of the dataclass and its value of the field default's type (bool, int, float or
str; an int is accepted for a float field, a bool never for a number). Errors name the key with its prefix
(``model.d_model``), so a preset or an override is reported where it was written.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import fields
from typing import Any

from lightning_modules.errors import InputError
from lightning_modules.numeric import is_number


def checked_values(config_class: type, config: Mapping[str, Any], prefix: str = "model.") -> dict[str, Any]:
    """``config`` as constructor arguments of ``config_class`` (a dataclass with defaults), type-checked."""
    defaults = config_class()
    known = {f.name for f in fields(config_class)}
    values = {}
    for key, value in config.items():
        if key not in known:
            raise InputError(f"unknown model key (known: {', '.join(sorted(known))})", f"{prefix}{key}")
        default = getattr(defaults, key)
        number = is_number(value)
        if isinstance(default, bool):
            ok = isinstance(value, bool)
        elif isinstance(default, int):
            ok = isinstance(value, int) and not isinstance(value, bool)
        elif isinstance(default, float):
            ok, value = number, float(value) if number else value
        else:
            ok = isinstance(value, str)
        if not ok:
            raise InputError(f"expected {type(default).__name__}, got {value!r}", f"{prefix}{key}")
        values[key] = value
    return values
