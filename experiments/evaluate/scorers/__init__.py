"""Scorers of model checkpoints (the Scorer protocol of ``experiments/evaluate/scorer.py``).

``load_scorer(checkpoint, method=...)`` picks the implementation from the checkpoint's family and the method:

- ``exact``: string models (TXL (terminals));
- ``gold``: joint models on given gold trees, log p(x, y_gold) (``trees``: a treebank file or a tree source);
- ``proposals``: joint models marginalised over N proposal trees per sentence (``proposals``: a proposal
  file, see ``tree_files``, or a callable ``sentences -> list[list[Tree]]`` such as the proposal parser);
- ``beam``: joint models marginalised over a word-synchronous beam.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from experiments.evaluate.scorer import Scorer
from lightning_modules.data.tree import Tree
from lightning_modules.errors import InputError

TreeSource = Callable[[Sequence[Sequence[str]]], list[list[Tree]]]


def load_scorer(checkpoint: str | Path, method: str = "exact", *, batch_size: int = 32,
                proposals: str | Path | TreeSource | None = None, n_proposals: int = 300,
                trees: str | Path | TreeSource | None = None, pos_tags: bool | None = None,
                beam: int = 100, word_beam: int = 10, max_actions: int = 15, device: str = "cpu",
                source_name: str | None = None) -> Scorer:
    """A Scorer for ``checkpoint``.

    ``pos_tags``: whether the given trees carry POS tags (dropped before scoring: the models read POS-free
    trees). Default: True for files (treebanks and proposal files are PTB-style), False for callables
    (the proposal parser produces the model's own POS-free trees). ``batch_size`` counts sequences (trees
    for the joint methods) per forward pass; all trees of one sentence always share one pass.
    """
    from experiments.evaluate.scorers import tg

    model = tg.TGModel.load(str(checkpoint), device)
    if method == "exact":
        return tg.ExactScorer(model, batch_size)
    if method == "beam":
        return tg.BeamScorer(model, beam, word_beam, max_actions)
    if method in ("proposals", "gold"):
        given = proposals if method == "proposals" else trees
        if given is None:
            key = "proposals" if method == "proposals" else "trees"
            raise InputError(f"method={method} needs {key} (a file or a tree source)", key)
        source, from_file = _source(given, method)
        return tg.TreeScorer(model, source, method=method, n=n_proposals, batch_size=batch_size,
                             pos_tags=from_file if pos_tags is None else pos_tags,
                             source_name=source_name or getattr(source, "name", None))
    raise InputError(f"unknown method {method!r}; expected exact, gold, proposals or beam", "method")


def _source(given: Any, method: str) -> tuple[TreeSource, bool]:
    from experiments.evaluate.scorers.tree_files import GoldTrees, ProposalFile

    if isinstance(given, str | Path):
        return (ProposalFile(given) if method == "proposals" else GoldTrees(given)), True
    if not callable(given):
        raise InputError(f"expected a file path or a callable tree source, not {type(given).__name__}",
                         "proposals" if method == "proposals" else "trees")
    return given, False
