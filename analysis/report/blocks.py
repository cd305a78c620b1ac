"""The report's one structure: a list of blocks that sections build and both formats are rendered from.

A block is a heading, a paragraph (``strong``: the warning style), a bullet list, a table of text cells (a
line break in a cell is a line break in HTML and a space in Markdown; ``compact``: the headline's dense
style), an image with its caption, or a folded section: a title over blocks, which the HTML folds
(``<details>``) and the Markdown shows under a heading, as its ``brief`` where one is given (a pointer to the
long tables that keep ``report.md`` short). Blocks hold plain text; escaping is the renderer's
(``analysis.report.render``).
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
    compact: bool = False


@dataclass
class Image:
    src: str  # relative to the report's folder, posix separators
    caption: str
    pdf: str | None = None


@dataclass
class Folded:
    """A section below the headline: folded in the HTML, under a level-2 heading in the Markdown."""

    title: str
    blocks: list[Block]
    brief: list[Block] | None = None  # what the Markdown shows instead of ``blocks`` (None: the blocks)


Block = Heading | Paragraph | Bullets | Table | Image | Folded
