"""The papers synbench reproduces: a registry of their published numbers, provenance and reproduction specs.

A paper is a plug-in, one module each: a ``Paper`` (the module's ``PAPER``) with the model families its tables
describe, its numbers mapped to our models and metrics, the directions its text claims between its models
(``claims``), and its reproductions (scale -> experiment spec). ``synbench reproduce PAPER --scale S`` runs
``get(PAPER).reproductions[S]``; a report shows the numbers of ``paper_for(the experiment's families)`` beside
ours, and checks every paper's claims whose models the experiment has (``analysis.claims``). Every module of
this package that defines ``PAPER`` is a built-in paper, registered (by module name) when the registry is first
asked, so adding a paper is adding its module; plug-ins ``register`` more. Nothing here imports ``analysis`` or
torch, so every stage and the analysis can ask it.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from experiments.papers.tables import (
    METRIC_TITLES,
    Column,
    PaperClaim,
    PaperNumber,
    PaperRegression,
    metric_title,
    percent_scale,
)
from lightning_modules.errors import InputError

__all__ = [
    "METRIC_TITLES", "Column", "Paper", "PaperClaim", "PaperNumber", "PaperRegression", "get", "metric_title",
    "model_order", "paper_for", "papers", "percent_scale", "published_regression", "register",
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
    claims: tuple[PaperClaim, ...] = ()  # the directions its text states between its models
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


_loaded = False


def _registered() -> dict[str, Paper]:
    """The registry, after the built-in papers (the modules of this package that define ``PAPER``, by name) and
    the plug-ins (``experiments.plugins``) have registered."""
    global _loaded
    if not _loaded:
        _loaded = True
        for module in sorted(pkgutil.iter_modules(__path__, f"{__name__}."), key=lambda m: m.name):
            paper = getattr(importlib.import_module(module.name), "PAPER", None)
            if isinstance(paper, Paper) and _PAPERS.get(paper.key) is not paper:
                register(paper)
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
    """The paper that describes these model families best, or None when no registered paper describes any
    of them: the most of them described, less the paper's families the experiment lacks (a paper's own
    experiment, not the comparison of every family, whose families include every paper's). Ties: the paper
    whose tables show most of them as rows (Pushdown Layers' tables quote TG's), then the first registered."""
    wanted = set(families)
    best, covered = None, None
    for paper in _registered().values():
        shared = len(wanted & set(paper.families))
        n = (shared - len(set(paper.families) - wanted), len(wanted & set(paper.model_order)))
        if shared and (covered is None or n > covered):
            best, covered = paper, n
    return best


def model_order(labels: Iterable[str]) -> list[str]:
    """``labels`` (deduplicated) in the papers' tables' order, unknown labels after them, sorted. The paper
    whose tables list most of them orders first (ties: the one with fewest other rows, then the first
    registered), then the next."""
    labels = set(labels)
    ranked = sorted(_registered().values(),  # ties: the paper with fewest other rows (as ``paper_for``)
                    key=lambda paper: (-len(labels & set(paper.model_order)), len(set(paper.model_order) - labels)))
    known = list(dict.fromkeys(label for paper in ranked for label in paper.model_order if label in labels))
    return known + sorted(labels - set(known))


def published_regression(name: str) -> PaperRegression | None:
    """The published regression our regression ``name`` compares with (the first paper that has one).

    Our regressions are named after a paper's analyses, so their published coefficients stand beside ours
    whichever paper's tables the report's headline shows."""
    return next((r for paper in _registered().values() if (r := paper.regression(name)) is not None), None)

