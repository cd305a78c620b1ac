"""JSON read from user files: malformed JSON is one ``InputError`` at FILE:LINE, never a traceback."""

from __future__ import annotations

import json
from typing import Any

from lightning_modules.errors import InputError


def json_document(text: str, source: str) -> Any:
    """The value of a whole JSON document; the error names the line of ``source`` where parsing failed."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise InputError(f"invalid JSON: {e.msg}", f"{source}:{e.lineno}") from None


def json_line(line: str, location: str) -> Any:
    """The value of one JSONL line; ``location`` is its FILE:LINE."""
    try:
        return json.loads(line)
    except json.JSONDecodeError as e:
        raise InputError(f"invalid JSON: {e.msg}", location) from None
