"""The experiment report: ``report.md`` and ``report.html`` from the files of ``RUNS/EXPERIMENT/analysis/``.

It reads ``settings.json``, ``summary.csv``, ``welch.csv``, ``variance.csv``, ``regressions.json``,
``mdl.csv`` and ``figures/`` (with ``figures/notes.json``). Any of them may be absent or unreadable: its
section then says so and why, and the rest of the report is written. The headline states the scale, seeds,
data and every reduced setting, and that the results are not comparable with the paper's; the published
numbers of the paper whose tables describe the experiment's model families (``experiments.papers``) stand
beside ours, always marked as a different scale. An experiment no registered paper describes gets no paper
column.

Both files are rendered from one list of blocks (headings, paragraphs, bullet lists, tables, images), so they
say the same thing; every value is escaped for its format (HTML: ``html.escape``; Markdown: its special
characters), and the HTML is self-contained apart from the figure files (inline CSS, relative links).
Each file is written atomically.

The steps, one module each: ``sources`` (reading the analysis folder), ``sections`` (one function per
section, building ``blocks``), ``formatting`` (numbers as table cells) and ``render`` (Markdown and HTML).
"""

from __future__ import annotations

from pathlib import Path

from analysis.report import sections
from analysis.report.blocks import Block, Bullets, Heading, Image, Paragraph, Table
from analysis.report.render import render_html, render_markdown
from analysis.report.sections import build_report
from analysis.report.sources import Sources, read_sources
from lightning_modules.data.atomic import atomic_write_text

__all__ = [
    "Block", "Bullets", "Heading", "Image", "Paragraph", "Sources", "Table", "build_report", "headline_table",
    "read_sources", "render_html", "render_markdown", "write_report",
]


def write_report(analysis_dir: Path, out_dir: Path | None = None) -> tuple[Path, Path]:
    """Write ``report.md`` and ``report.html``, each atomically, into ``out_dir`` (default: analysis_dir)."""
    sources = read_sources(analysis_dir, out_dir)
    blocks = build_report(sources)
    title = blocks[0].text if blocks and isinstance(blocks[0], Heading) else "synbench report"
    md_path, html_path = sources.out_dir / "report.md", sources.out_dir / "report.html"
    atomic_write_text(md_path, render_markdown(blocks))
    atomic_write_text(html_path, render_html(blocks, title))
    return md_path, html_path


def headline_table(analysis_dir: Path) -> str:
    """The Markdown of the headline table (mean ± sd per model x metric, the paper's numbers beside)."""
    return render_markdown(sections.headline_table(read_sources(analysis_dir)))
