"""Markdown and HTML of the report's blocks: the same content, each value escaped for its format.

Markdown: plain text as written (``model-a < model-b``, no HTML entities), with a backslash only before what
would otherwise become markup: Markdown's special characters, a bracket that would make a link (``](``, or a
``[`` that would start a link reference definition; a bracket alone is text, as no reference is defined), an
underscore that could open or close emphasis (not one inside a word: ``sg.all_34``), a ``<`` that could open
an HTML tag, an ``&`` that could start an entity, a ``>`` that would start a quote. A folded section is a
level-2 heading over its brief (or its blocks). HTML: ``html.escape`` and a self-contained page (inline CSS,
figures by relative links), each folded section a closed ``<details>`` whose summary is its heading.
"""

from __future__ import annotations

import html
import re
from urllib.parse import quote

from analysis.report.blocks import Block, Bullets, Folded, Heading, Image, Paragraph, Table

_MARKDOWN_SPECIAL = re.compile(
    r"[\\`*|]|^#"  # always special; a heading
    r"|^\[|\](?=\()"  # a link reference definition, a link or image (no reference is ever defined)
    r"|(?<![0-9A-Za-z])_|_(?![0-9A-Za-z])"  # an underscore that is not inside a word
    r"|<(?=[A-Za-z/!?])"  # an HTML tag, comment or autolink
    r"|&(?=#?\w+;)"  # an entity
    r"|^>")  # a quote


def _md(text: str) -> str:
    """``text`` as literal Markdown: one line, a backslash before each character that would become markup."""
    text = " ".join(str(text).split("\n"))
    return _MARKDOWN_SPECIAL.sub(lambda m: "\\" + m.group(0), text)


def _markdown_block(block: Block) -> str:
    if isinstance(block, Heading):
        return f"{'#' * block.level} {_md(block.text)}"
    if isinstance(block, Paragraph):
        return f"**{_md(block.text)}**" if block.strong else _md(block.text)
    if isinstance(block, Bullets):
        return "\n".join(f"- {_md(item)}" for item in block.items)
    if isinstance(block, Table):
        lines = ["| " + " | ".join(_md(h) for h in block.header) + " |",
                 "|" + "|".join("---" for _ in block.header) + "|"]
        lines += ["| " + " | ".join(_md(c) for c in row) + " |" for row in block.rows]
        return "\n".join(lines)
    if isinstance(block, Image):
        pdf = f" ([PDF]({quote(block.pdf)}))" if block.pdf else ""
        return f"![{_md(block.caption)}]({quote(block.src)})\n\n*{_md(block.caption)}*{pdf}"
    if isinstance(block, Folded):
        shown = block.blocks if block.brief is None else block.brief
        return "\n\n".join([_markdown_block(Heading(block.title, 2)), *(_markdown_block(b) for b in shown)])
    raise TypeError(f"not a report block: {type(block).__name__}")


def render_markdown(blocks: list[Block]) -> str:
    return "\n\n".join(_markdown_block(block) for block in blocks) + "\n"


CSS = """
body { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; max-width: 1360px; margin: 1.2em auto;
       padding: 0 1em; color: #222; line-height: 1.45; }
h1 { font-size: 1.6em; margin: 0.2em 0 0.4em; }
h2 { font-size: 1.3em; margin: 1em 0 0.4em; }
p, ul { max-width: 75em; }
table { border-collapse: collapse; margin: 0.8em 0 1.2em; font-size: 0.9em; }
th, td { border: 1px solid #ccc; padding: 0.25em 0.6em; text-align: left; vertical-align: top; }
th { background: #f2f2f2; }
tr:nth-child(even) td { background: #fafafa; }
table.compact { font-size: 0.8em; margin: 0.4em 0 0.6em; }
table.compact th, table.compact td { padding: 0.05em 0.45em; line-height: 1.2; }
table.compact td { white-space: nowrap; }
p.strong { background: #fff4e5; border-left: 4px solid #e67e22; padding: 0.4em 0.8em; font-weight: 600;
           margin: 0.4em 0; }
figure { margin: 1em 0; }
figure img { max-width: 100%; border: 1px solid #ddd; }
figcaption { font-size: 0.9em; color: #555; }
details { border-top: 1px solid #ddd; }
details > summary { cursor: pointer; }
details > summary > h2 { display: inline-block; margin: 0.5em 0; }
"""


def _h(text: str) -> str:
    return html.escape(str(text), quote=True)


def _cell(text: str) -> str:
    """A table cell's text, escaped, its line breaks kept."""
    return "<br>".join(_h(line) for line in str(text).split("\n"))


def _html_block(block: Block) -> str:
    if isinstance(block, Heading):
        return f"<h{block.level}>{_h(block.text)}</h{block.level}>"
    if isinstance(block, Paragraph):
        css = ' class="strong"' if block.strong else ""
        return f"<p{css}>{_h(block.text)}</p>"
    if isinstance(block, Bullets):
        return "<ul>\n" + "\n".join(f"<li>{_h(item)}</li>" for item in block.items) + "\n</ul>"
    if isinstance(block, Table):
        head = "".join(f"<th>{_cell(h)}</th>" for h in block.header)
        rows = "\n".join("<tr>" + "".join(f"<td>{_cell(c)}</td>" for c in row) + "</tr>" for row in block.rows)
        css = ' class="compact"' if block.compact else ""
        return f"<table{css}>\n<thead><tr>{head}</tr></thead>\n<tbody>\n{rows}\n</tbody>\n</table>"
    if isinstance(block, Image):
        pdf = f' (<a href="{_h(quote(block.pdf))}">PDF</a>)' if block.pdf else ""
        return (f'<figure><img src="{_h(quote(block.src))}" alt="{_h(block.caption)}">'
                f"<figcaption>{_h(block.caption)}{pdf}</figcaption></figure>")
    if isinstance(block, Folded):
        inner = "\n".join(_html_block(b) for b in block.blocks)
        return f"<details>\n<summary><h2>{_h(block.title)}</h2></summary>\n{inner}\n</details>"
    raise TypeError(f"not a report block: {type(block).__name__}")


def render_html(blocks: list[Block], title: str) -> str:
    body = "\n".join(_html_block(block) for block in blocks)
    return (f'<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n<title>{_h(title)}</title>\n'
            f"<style>{CSS}</style>\n</head>\n<body>\n{body}\n</body>\n</html>\n")
