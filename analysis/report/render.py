"""Markdown and HTML of the report's blocks: the same content, each value escaped for its format.

Markdown: special characters backslash-escaped and HTML characters as entities, so that no value becomes
markup; HTML: ``html.escape`` and a self-contained page (inline CSS, figures by relative links).
"""

from __future__ import annotations

import html
import re
from urllib.parse import quote

from analysis.report.blocks import Block, Bullets, Heading, Image, Paragraph, Table

_MARKDOWN_SPECIAL = re.compile(r"([\\`*_\[\]|#])")


def _md(text: str) -> str:
    """``text`` as literal Markdown: special characters backslash-escaped, HTML characters as entities."""
    text = " ".join(str(text).split("\n"))
    text = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return _MARKDOWN_SPECIAL.sub(r"\\\1", text)


def render_markdown(blocks: list[Block]) -> str:
    out = []
    for block in blocks:
        if isinstance(block, Heading):
            out.append(f"{'#' * block.level} {_md(block.text)}")
        elif isinstance(block, Paragraph):
            out.append(f"**{_md(block.text)}**" if block.strong else _md(block.text))
        elif isinstance(block, Bullets):
            out.append("\n".join(f"- {_md(item)}" for item in block.items))
        elif isinstance(block, Table):
            lines = ["| " + " | ".join(_md(h) for h in block.header) + " |",
                     "|" + "|".join("---" for _ in block.header) + "|"]
            lines += ["| " + " | ".join(_md(c) for c in row) + " |" for row in block.rows]
            out.append("\n".join(lines))
        elif isinstance(block, Image):
            pdf = f" ([PDF]({quote(block.pdf)}))" if block.pdf else ""
            out.append(f"![{_md(block.caption)}]({quote(block.src)})\n\n*{_md(block.caption)}*{pdf}")
    return "\n\n".join(out) + "\n"


CSS = """
body { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; max-width: 1200px; margin: 2em auto;
       padding: 0 1em; color: #222; line-height: 1.45; }
table { border-collapse: collapse; margin: 0.8em 0 1.2em; font-size: 0.9em; }
th, td { border: 1px solid #ccc; padding: 0.25em 0.6em; text-align: left; vertical-align: top; }
th { background: #f2f2f2; }
tr:nth-child(even) td { background: #fafafa; }
p.strong { background: #fff4e5; border-left: 4px solid #e67e22; padding: 0.5em 0.8em; font-weight: 600; }
figure { margin: 1em 0; }
figure img { max-width: 100%; border: 1px solid #ddd; }
figcaption { font-size: 0.9em; color: #555; }
"""


def _h(text: str) -> str:
    return html.escape(str(text), quote=True)


def render_html(blocks: list[Block], title: str) -> str:
    body = []
    for block in blocks:
        if isinstance(block, Heading):
            body.append(f"<h{block.level}>{_h(block.text)}</h{block.level}>")
        elif isinstance(block, Paragraph):
            css = ' class="strong"' if block.strong else ""
            body.append(f"<p{css}>{_h(block.text)}</p>")
        elif isinstance(block, Bullets):
            body.append("<ul>\n" + "\n".join(f"<li>{_h(item)}</li>" for item in block.items) + "\n</ul>")
        elif isinstance(block, Table):
            head = "".join(f"<th>{_h(h)}</th>" for h in block.header)
            rows = "\n".join("<tr>" + "".join(f"<td>{_h(c)}</td>" for c in row) + "</tr>"
                             for row in block.rows)
            body.append(f"<table>\n<thead><tr>{head}</tr></thead>\n<tbody>\n{rows}\n</tbody>\n</table>")
        elif isinstance(block, Image):
            pdf = f' (<a href="{_h(quote(block.pdf))}">PDF</a>)' if block.pdf else ""
            body.append(f'<figure><img src="{_h(quote(block.src))}" alt="{_h(block.caption)}">'
                        f"<figcaption>{_h(block.caption)}{pdf}</figcaption></figure>")
    return (f'<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n<title>{_h(title)}</title>\n'
            f"<style>{CSS}</style>\n</head>\n<body>\n" + "\n".join(body) + "\n</body>\n</html>\n")
