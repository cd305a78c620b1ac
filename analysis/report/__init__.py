"""The experiment report: ``report.md`` and ``report.html`` from the files of ``RUNS/EXPERIMENT/analysis/``.

It reads ``settings.json``, ``summary.csv``, ``welch.csv``, ``claims.csv``, ``comparison.csv``,
``variance.csv``, ``regressions.json``, ``mdl.csv`` and ``figures/`` (with ``figures/notes.json``). Any of them
may be absent or unreadable: its section then says so and why, and the rest of the report is written.

The report reads in one screen: the title, whether its numbers compare with a paper's (the scale, and that
reduced settings make them not comparable), one line of context, then the headline table (one row per model:
each measured metric's mean ± sd over seeds with a compact CI, marked where a number is an upper bound, a
loose one, or from a model that did not converge; the paper's published numbers beside, marked as a different
scale), the papers' claims' verdicts and the key figures. Everything else (the setup with every reduced
setting, the published numbers with their sources, the comparison across models, all metrics, Welch tests,
how each number was obtained, ...) is in sections below, folded in the HTML. Numbers are formatted for
reading (scientific notation past 1e6), SG and BLiMP in percent everywhere in it (the CSVs keep the fractions
measured).

Both files are rendered from one list of blocks (headings, paragraphs, bullet lists, tables, images, folded
sections), so they say the same thing, except that the Markdown gives a brief in place of the longest tables
(every metric, every Welch test), which ``report.html`` and the CSVs have. Every value is escaped for its
format (HTML: ``html.escape``; Markdown: a backslash where a character would become markup, no HTML entities),
and the HTML is self-contained apart from the figure files (inline CSS, relative links). Each file is written
atomically.

The steps, one module each: ``sources`` (reading the analysis folder), ``sections`` (the sections in reading
order: ``headline_section``, ``claims_section``, ``setup_section``, ``comparison_section`` and the rest, building
``blocks``), ``marks`` (the warnings beside numbers), ``formatting`` (numbers as table cells) and ``render``
(Markdown and HTML).
"""

from __future__ import annotations

from pathlib import Path

from analysis.report import headline_section
from analysis.report.blocks import Block, Bullets, Folded, Heading, Image, Paragraph, Table
from analysis.report.render import render_html, render_markdown
from analysis.report.sections import build_report
from analysis.report.sources import Sources, read_sources
from lightning_modules.data.atomic import atomic_write_text

__all__ = [
    "Block", "Bullets", "Folded", "Heading", "Image", "Paragraph", "Sources", "Table", "build_report", "headline_table",
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
    """The Markdown of the headline table (mean ± sd and CI per model x metric, the paper's numbers beside)
    and its legend: what ``synbench reproduce`` prints."""
    sources = read_sources(analysis_dir)
    return render_markdown(headline_section.results(sources)[1:])
