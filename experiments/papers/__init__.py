"""The papers synbench reproduces: a registry of their published numbers, provenance and reproduction specs.

A paper is a plug-in, one module each (``tg.py``, ``pushdown.py``, ``palm.py``, ``som.py``, ``dtg.py``): a ``Paper``
with the model families its tables describe, its numbers mapped to our models and metrics, and its reproductions
(scale -> experiment spec). ``synbench reproduce PAPER --scale S`` runs ``get(PAPER).reproductions[S]``; a report
shows the numbers of ``paper_for(the experiment's families)`` beside ours. The built-in papers register when this
package is
imported; nothing here imports ``analysis`` or torch, so every stage and the analysis can ask it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from experiments.papers.tables import (
    METRIC_TITLES,
    Column,
    PaperNumber,
    PaperRegression,
    metric_title,
    percent_scale,
)
from lightning_modules.errors import InputError

__all__ = [
    "METRIC_TITLES", "Column", "Paper", "PaperNumber", "PaperRegression", "get", "metric_title", "model_order",
    "paper_for", "papers", "percent_scale", "published_regression", "register",
]


@dataclass(frozen=True)
class Paper:
    """Whose numbers a report shows beside ours, the words that keep them apart, and how to reproduce them."""

    key: str  # `synbench reproduce KEY`
    citation: str
    column: str  # header of the paper's column in the report
    not_comparable: str  # the report's warning for a reduced-scale experiment
    provenance: str  # where every number comes from, under the report's table
    families: tuple[str, ...]  # the model families whose experiments the paper's tables describe
    model_order: tuple[str, ...]  # our model labels in the order of the paper's tables
    # (model label, our metric, the experiment's data names or None) -> the published numbers to show beside it
    numbers_for: Callable[..., list[PaperNumber]]
    regressions: tuple[PaperRegression, ...] = ()
    reproductions: Mapping[str, str] = field(default_factory=dict)  # scale -> experiment spec name

    def regression(self, name: str) -> PaperRegression | None:
        """The published regression our regression ``name`` compares with, or None."""
        return next((r for r in self.regressions if r.name == name), None)


_PAPERS: dict[str, Paper] = {}


def register(paper: Paper) -> Paper:
    """Add ``paper`` to the registry (its key must be new); returns it."""
    if paper.key in _PAPERS:
        raise ValueError(f"paper {paper.key!r} is already registered")
    _PAPERS[paper.key] = paper
    return paper


def _registered() -> dict[str, Paper]:
    """The registry, after the plug-ins (``experiments.plugins``) have had their chance to register."""
    from experiments.plugins import load_plugins

    load_plugins()
    return _PAPERS


def papers() -> list[Paper]:
    """Every registered paper, in the order of registration."""
    return list(_registered().values())


def get(key: str) -> Paper:
    """The paper registered as ``key``; an unknown key is an ``InputError`` naming the known ones."""
    if key not in _registered():
        raise InputError(f"unknown paper {key!r} (known: {', '.join(_PAPERS)})", "PAPER")
    return _PAPERS[key]


def paper_for(families: Iterable[str]) -> Paper | None:
    """The paper whose tables describe most of these model families (ties: the first registered), or None
    when no registered paper describes any of them."""
    wanted = set(families)
    best, covered = None, 0
    for paper in _registered().values():
        n = len(wanted & set(paper.families))
        if n > covered:
            best, covered = paper, n
    return best


def model_order(labels: Iterable[str]) -> list[str]:
    """``labels`` (deduplicated) in the papers' order (registration order, then each paper's tables), unknown
    labels after them, sorted."""
    labels = set(labels)
    known = list(dict.fromkeys(label for paper in _registered().values() for label in paper.model_order
                               if label in labels))
    return known + sorted(labels - set(known))


def published_regression(name: str) -> PaperRegression | None:
    """The published regression our regression ``name`` compares with (the first paper that has one).

    Our regressions are named after a paper's analyses, so their published coefficients stand beside ours
    whichever paper's tables the report's headline shows."""
    return next((r for paper in _registered().values() if (r := paper.regression(name)) is not None), None)


def _register_builtins() -> None:
    # Pushdown Layers first: its tables quote TG's, so it is the better choice for an experiment with as many
    # Pushdown-family as TG-family models (paper_for's tie-break), and its models come first in tables.
    from experiments.papers import dtg, palm, pushdown, som, tg

    for module in (pushdown, tg, palm, som, dtg):
        register(module.PAPER)


_register_builtins()
