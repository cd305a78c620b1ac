"""A report's figure block and the analysis pipeline's reasons for what it skipped, shared by every section."""

from __future__ import annotations

import os
from pathlib import Path

from analysis.report.blocks import Block, Image, Paragraph
from analysis.report.sources import Sources


def skipped_reasons(sources: Sources) -> dict[str, str]:
    """The analysis pipeline's reason for each output it skipped (its `skipped` setting), by key."""
    skipped = sources.settings.get("skipped")
    return {str(k): str(v) for k, v in skipped.items()} if isinstance(skipped, dict) else {}


def figure_block(sources: Sources, stem: str, caption: str) -> list[Block]:
    """The figure ``figures/stem.png`` (and its PDF) if written, else why not (from the figure notes)."""
    folder = sources.analysis_dir / "figures"
    png, pdf = folder / f"{stem}.png", folder / f"{stem}.pdf"
    if not png.is_file():
        pipeline_notes = skipped_reasons(sources).get("figures", "").split("; ")
        notes = [n for n in [*sources.figure_notes, *pipeline_notes] if n.startswith(stem)]
        why = "; ".join(notes) if notes else "no such file"
        return [Paragraph(f"Figure {stem}: not written: {why}.")]

    def relative(path: Path) -> str:
        return Path(os.path.relpath(path, sources.out_dir)).as_posix()

    return [Image(relative(png), caption, relative(pdf) if pdf.is_file() else None)]
