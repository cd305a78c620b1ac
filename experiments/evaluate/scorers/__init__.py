"""Scorers of model checkpoints (the Scorer protocol of ``experiments/evaluate/scorer.py``).

``load_scorer(checkpoint, method=...)`` asks the checkpoint's family adapter for the scorer of the method:

- ``exact``: string models;
- ``gold``: joint models on given gold trees, log p(x, y_gold) (``trees``: a treebank file or a tree source);
- ``proposals``: joint models marginalised over N proposal trees per sentence (``proposals``: a proposal
  file, see ``tree_files``, or a callable ``sentences -> list[list[Tree]]`` such as the proposal parser);
- ``beam``: joint models marginalised over their word-synchronous beam.

Generic scorers live here: ``tree_marginal`` (the marginal over given trees, for any joint family's
encoding), ``ngram`` (n-gram baselines) and ``hf`` (local ``transformers`` causal LMs); and what several
families' scorers share: ``txl_model`` (a loaded Transformer-XL core network scoring encoded sequences, the
base of the families built on ``lightning_modules/models/txl_lm.py``), ``stacked`` (the seeds of an eval group
scoring shared inputs in one vmapped forward) and ``beams`` (beam settings, top-k).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from experiments.evaluate.scorer import Scorer
from lightning_modules.errors import InputError

TreeSource = Callable[[Sequence[Sequence[str]]], list[list[Any]]]
HF_PREFIX = "hf:"  # a model source ``hf:DIR``: a local transformers causal LM (``hf.py``)
HF_CONVENTIONS = ("minicons", "lm-eval")  # whose requests an ``hf:`` score reproduces; the first is the default


def load_scorer(checkpoint: str | Path, method: str = "exact", *, batch_size: int = 32,
                proposals: str | Path | TreeSource | None = None, n_proposals: int | None = None,
                trees: str | Path | TreeSource | None = None, pos_tags: bool | None = None,
                beam: int | None = None, word_beam: int | None = None, max_actions: int | None = None,
                fast_track: int | None = None, device: str = "cpu", source_name: str | None = None) -> Scorer:
    """A Scorer for ``checkpoint`` (a sentence-level checkpoint of any family).

    The method's options left None (``n_proposals``, ``beam``, ``word_beam``, ``max_actions``, ``fast_track``)
    take the defaults the family's method declares (``experiments.families.adapter.Method``), as on the CLI.

    ``pos_tags``: whether the given trees carry POS tags (dropped before scoring: the models read POS-free
    trees). Default: True for files (treebanks and proposal files are PTB-style), False for callables
    (the proposal parser produces the model's own POS-free trees). ``batch_size`` counts sequences (trees
    for the joint methods) per forward pass; all trees of one sentence always share one pass.
    """
    from experiments.families import checkpoint_family
    from experiments.families.adapter import ScoringRequest

    if method not in ("exact", "beam", "proposals", "gold"):
        raise InputError(f"unknown method {method!r}; expected exact, gold, proposals or beam", "method")
    adapter, meta = checkpoint_family(checkpoint)
    options = adapter.method(method, meta["config"]).resolve(
        {"n": n_proposals, "beam": beam, "word_beam": word_beam, "max_actions": max_actions, "fast_track": fast_track})
    request = ScoringRequest(method=method, options=options, batch_size=batch_size, device=device)
    if method in ("proposals", "gold"):
        given = proposals if method == "proposals" else trees
        if given is None:
            key = "proposals" if method == "proposals" else "trees"
            raise InputError(f"method={method} needs {key} (a file or a tree source)", key)
        source, from_file = _source(given, method)
        name = source_name or getattr(source, "name", None)
        tagged = from_file if pos_tags is None else pos_tags
        request = replace(request, **{"proposals" if method == "proposals" else "gold": source},
                          source_name=name, pos_tags=tagged)
    return adapter.scoring(checkpoint, meta, request).scorer


def _source(given: Any, method: str) -> tuple[TreeSource, bool]:
    from experiments.evaluate.scorers.tree_files import GoldTrees, ProposalFile

    if isinstance(given, str | Path):
        return (ProposalFile(given) if method == "proposals" else GoldTrees(given)), True
    if not callable(given):
        raise InputError(f"expected a file path or a callable tree source, not {type(given).__name__}",
                         "proposals" if method == "proposals" else "trees")
    return given, False
