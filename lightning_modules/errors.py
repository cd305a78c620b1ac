"""The one error type for bad user input (files, configs, checkpoints).

The CLI turns it into a single line ``synbench: error: LOCATION: message`` and exit status 2, so every
reader reports *where* the input is wrong (a ``FILE:LINE``, a config key, a training step).
"""

from __future__ import annotations


class InputError(Exception):
    """Bad input with an optional location (``path:line``, ``config.key``, ``step 120``)."""

    def __init__(self, message: str, location: str | None = None):
        super().__init__(message)
        self.message = message
        self.location = location

    def __str__(self) -> str:
        return f"{self.location}: {self.message}" if self.location else self.message
