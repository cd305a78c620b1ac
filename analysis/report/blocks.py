"""The report's one structure: a list of blocks that sections build and both formats are rendered from.

A block is a heading, a paragraph (``strong``: the warning style), a bullet list, a table of text cells or an
image with its caption. Blocks hold plain text; escaping is the renderer's (``analysis.report.render``).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class Heading:
    text: str
    level: int = 2


@dataclass
class Paragraph:
    text: str
    strong: bool = False


@dataclass
class Bullets:
    items: list[str]


@dataclass
class Table:
    header: list[str]
    rows: list[list[str]]


@dataclass
class Image:
    src: str  # relative to the report's folder, posix separators
    caption: str
    pdf: str | None = None


Block = Heading | Paragraph | Bullets | Table | Image
