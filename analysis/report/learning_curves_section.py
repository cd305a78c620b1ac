"""The report's learning curves: each metric against the training step (``analysis.learning_curves``), present
when the experiment evaluated the checkpoints its runs kept over training (``train.keep_every``, ``synbench
evaluate EXPERIMENT --checkpoints all``); absent otherwise."""

from __future__ import annotations

from analysis.learning_curves import LEARNING_CURVES
from analysis.report.blocks import Block, Heading, Paragraph
from analysis.report.figure_block import figure_block, written
from analysis.report.sources import Sources

ABOUT = ("Each metric of the checkpoints the runs kept over training (train.keep_every N: one every N steps), "
         "evaluated as the best checkpoints are (synbench evaluate EXPERIMENT --checkpoints all), against the "
         "training step; per step and model the values are in learning_curves.csv.")


def learning_curves(sources: Sources) -> list[Block]:
    """The heading, what the curves show, and the figure; nothing when the analysis drew none."""
    if not written(sources, LEARNING_CURVES):
        return []
    caption = "Each metric against the training step: mean over seeds (line) ± sd (band)."
    return [Heading("Learning curves"), Paragraph(ABOUT), *figure_block(sources, LEARNING_CURVES, caption)]
