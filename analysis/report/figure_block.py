"""A report's figure block and the analysis pipeline's reasons for what it skipped, shared by every section."""

from __future__ import annotations

import os
from pathlib import Path

from analysis.report.blocks import Block, Image, Paragraph
from analysis.report.sources import Sources

# the file -> the analysis step whose reason ``settings.json["skipped"]`` gives when it was not run
SKIP_KEYS = {"summary": "statistics", "welch": "statistics", "variance": "variance",
             "regressions": "regressions", "mdl": "probing"}


def skipped_reasons(sources: Sources) -> dict[str, str]:
    """The analysis pipeline's reason for each output it skipped (its `skipped` setting), by key."""
    skipped = sources.settings.get("skipped")
    return {str(k): str(v) for k, v in skipped.items()} if isinstance(skipped, dict) else {}


def missing(section: str, sources: Sources, name: str) -> Paragraph:
    """Why ``name``'s section is empty: the pipeline's reason for skipping it if the file is absent, else
    the problem with the file."""
    problem = sources.problems.get(name, "missing")
    reason = skipped_reasons(sources).get(SKIP_KEYS.get(name, name))
    if reason and problem.startswith("missing"):
        return Paragraph(f"{section}: skipped: {reason}.")
    return Paragraph(f"{section}: {problem}.")


def written(sources: Sources, stem: str) -> bool:
    """Whether the analysis wrote the figure ``figures/stem.png``."""
    return (sources.analysis_dir / "figures" / f"{stem}.png").is_file()


def why_not_written(sources: Sources) -> list[str]:
    """The notes on figures not drawn: the figures' own (``figures/notes.json``) and the pipeline's."""
    return [*sources.figure_notes, *(n for n in skipped_reasons(sources).get("figures", "").split("; ") if n)]


def figure_block(sources: Sources, stem: str, caption: str) -> list[Block]:
    """The figure ``figures/stem.png`` (and its PDF) if written, else why not (from the figure notes)."""
    folder = sources.analysis_dir / "figures"
    png, pdf = folder / f"{stem}.png", folder / f"{stem}.pdf"
    if not png.is_file():
        notes = [n for n in why_not_written(sources) if n.startswith(stem)]
        why = "; ".join(notes) if notes else "no such file"
        return [Paragraph(f"Figure {stem}: not written: {why}.")]

    def relative(path: Path) -> str:
        return Path(os.path.relpath(path, sources.out_dir)).as_posix()

    return [Image(relative(png), caption, relative(pdf) if pdf.is_file() else None)]
