"""The marks beside the headline's numbers: what a reader must know before comparing them.

- ``†`` a perplexity that is an upper bound (a joint model's, over proposal trees or a beam: the method the
  run's scorer recorded, ``settings.json["scoring"]``), not the exact perplexity;
- ``‡`` such a bound more than ``FAR_FROM_GOLD`` times the same model's perplexity with the gold trees on the
  same sentences: the proposals or the beam miss most of the probability mass, so the number says more about
  the trees it was computed over than about the model;
- ``✗`` beside a model: it did not converge (``settings.json["not_converged"]``, from
  ``analysis.convergence``: worse than a uniform guess on its validation data).

Nothing here names a family: the methods and the gold-tree values come from the analysis folder.
"""

from __future__ import annotations

from typing import Any

from analysis.comparison import COMMON_PPL
from analysis.report import formatting as fmt
from analysis.report.sources import Sources
from experiments.evaluate import tasks

BOUND, FAR_BOUND, NOT_CONVERGED = "†", "‡", "✗"
FAR_FROM_GOLD = 2.0  # a bound more than this many times its gold-tree value is marked
EXACT, GOLD = "exact", "gold"
MEANINGS = {
    BOUND: "an upper bound on the perplexity (a joint model's, over proposal trees or a beam)",
    FAR_BOUND: f"an upper bound more than {FAR_FROM_GOLD:g} times the same model's perplexity with the gold trees "
               "of the same sentences: a loose bound",
    NOT_CONVERGED: "the model did not converge: its validation perplexity per token is above its vocabulary size "
                   "(worse than a uniform guess)",
}


def labelled_metric(metric: str, folder: str) -> str:
    """The name of a task's ``metric`` in the results of its (possibly labelled) folder: ``ppl@gold``."""
    label = folder.split(tasks.LABEL_SEPARATOR, 1)[1] if tasks.LABEL_SEPARATOR in folder else None
    return tasks.labelled(metric, label)


def methods(sources: Sources, folder: str, model: str) -> list[str]:
    """The scoring methods of ``model``'s results in the evaluation folder ``folder`` (one per seed group)."""
    scoring = sources.settings.get("scoring") or {}
    entries = scoring.get(folder, {}).get(model, []) if isinstance(scoring.get(folder), dict) else []
    return [str(e.get("method")) for e in entries if isinstance(e, dict)]


def gold_value(sources: Sources, cells: dict[tuple[str, str], Any], metric: str, model: str) -> Any:
    """The summary row of ``model``'s ``metric`` scored with the gold trees (an evaluation of the same task whose
    method was ``gold``), or None."""
    task = tasks.unlabelled(metric)
    scoring = sources.settings.get("scoring") or {}
    for folder in sorted(f for f in scoring if tasks.unlabelled(f) == task):
        if methods(sources, folder, model) == [GOLD]:
            return cells.get((labelled_metric(task, folder), model))
    return None


def perplexity_mark(sources: Sources, cells: dict[tuple[str, str], Any], metric: str, model: str) -> str:
    """``†``, ``‡`` or nothing for ``model``'s headline perplexity ``metric`` (a ``ppl`` or ``ppl@LABEL``)."""
    if tasks.unlabelled(metric) != COMMON_PPL:
        return ""
    used = methods(sources, metric, model)
    if not used or set(used) == {EXACT}:
        return ""
    row, gold = cells.get((metric, model)), gold_value(sources, cells, metric, model)
    if (GOLD not in used and row is not None and gold is not None and fmt.is_finite(row.mean)
            and fmt.is_finite(gold.mean) and gold.mean > 0 and row.mean > FAR_FROM_GOLD * gold.mean):
        return FAR_BOUND
    return BOUND


def not_converged(sources: Sources) -> dict[str, str]:
    """Model -> why it did not converge (``settings.json["not_converged"]``; empty for older analyses)."""
    found = sources.settings.get("not_converged")
    return {str(k): str(v) for k, v in found.items()} if isinstance(found, dict) else {}


def legend(used: set[str]) -> str:
    """What each mark in ``used`` means, in one sentence (empty when none is used)."""
    return "; ".join(f"{mark} {MEANINGS[mark]}" for mark in MEANINGS if mark in used)
