"""JSON read from user files: malformed JSON is one ``InputError`` at FILE:LINE, never a traceback."""

from __future__ import annotations

import json
import json.decoder
import json.scanner
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from lightning_modules.errors import InputError

T = TypeVar("T")


def json_document(text: str, source: str) -> Any:
    """The value of a whole JSON document; the error names the line of ``source`` where parsing failed."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise InputError(f"invalid JSON: {e.msg}", f"{source}:{e.lineno}") from None


def json_lines_text(path: str | Path, what: str) -> list[str]:
    """The lines of a JSON-lines file of ``what`` (e.g. "pairs"); unreadable or non-UTF-8 is an ``InputError``."""
    try:
        return Path(path).read_text(encoding="utf-8").splitlines()
    except OSError as e:
        raise InputError(f"cannot read {what}: {e.strerror or e}", str(path)) from None
    except UnicodeDecodeError as e:
        raise InputError(f"not UTF-8: {e}", str(path)) from None


def json_line(line: str, location: str) -> Any:
    """The value of one JSONL line; ``location`` is its FILE:LINE."""
    try:
        return json.loads(line)
    except json.JSONDecodeError as e:
        raise InputError(f"invalid JSON: {e.msg}", location) from None


def json_document_with_lines(text: str, source: str) -> tuple[Any, Callable[[Any], int]]:
    """The value of a whole JSON document and ``line_of(node)``: the line where an object or array of it starts
    (1 for anything else), so a structural error in a nested part names its ``FILE:LINE``. Parsed by the
    standard library's pure-Python scanner, which reports where each container starts."""
    starts: dict[int, int] = {}

    class Decoder(json.JSONDecoder):
        def __init__(self) -> None:
            super().__init__()

            def parse_object(s_and_end: tuple[str, int], *rest: Any) -> tuple[Any, int]:
                value, end = json.decoder.JSONObject(s_and_end, *rest)
                starts[id(value)] = s_and_end[1] - 1
                return value, end

            def parse_array(s_and_end: tuple[str, int], scan_once: Any) -> tuple[Any, int]:
                value, end = json.decoder.JSONArray(s_and_end, scan_once)
                starts[id(value)] = s_and_end[1] - 1
                return value, end

            self.parse_object, self.parse_array = parse_object, parse_array
            self.scan_once = json.scanner.py_make_scanner(self)

    try:
        value = json.loads(text, cls=Decoder)
    except json.JSONDecodeError as e:
        raise InputError(f"invalid JSON: {e.msg}", f"{source}:{e.lineno}") from None
    return value, lambda node: text.count("\n", 0, starts.get(id(node), 0)) + 1


def checked_json(text: str, source: str, check: Callable[[Any, Callable[[Any], str]], T]) -> T:
    """``check(value, where)`` of a JSON document, ``where(node)`` being the location of a part of it: parsed by
    the fast parser first; when the check fails, parsed again by the one that knows where each object and array
    starts, so the error names its ``FILE:LINE`` (good files pay nothing for it)."""
    try:
        return check(json_document(text, source), lambda node: source)
    except InputError:
        value, line_of = json_document_with_lines(text, source)
        return check(value, lambda node: f"{source}:{line_of(node)}")
