"""What a model family plugs in: the adapter every part of synbench asks instead of naming a family.

A family is its encoding, its model file, its config and this adapter. Training asks the adapter for data, a
module and final metrics; evaluation for the loader of its checkpoints, its kind, its capabilities and the
scorer of each method; ``inspect``, ``model-info``, parsing and probing for their family-specific parts.
Evaluators, the evaluation plan, the analysis and the report ask the registry (``experiments.families``),
never a family name.

Kinds: ``string`` (an exact p(x)), ``joint`` (p(x, y): log p(x) is bounded by marginalising trees) and
``tool`` (a component of the protocol, such as the proposal parser: trained, never evaluated as a model).

Capabilities (what a task may need, ``experiments.evaluate.tasks``): ``perplexity`` (log p(x) of a corpus
split), ``score`` (log p of single sentences: BLiMP), ``surprisal`` (per-word incremental values: SyntaxGym),
``rerank`` (log p(x, y) of given trees), ``parse`` (the model's own best trees), ``dependency_parse`` (its
own dependency trees, scored by UAS), ``terminals``
(teacher-forced log-probabilities of every terminal), ``dyck`` (closing-bracket accuracy), ``probe``
(per-layer node representations), ``sample``, ``propose`` (draws proposal trees for joint models).
"""

from __future__ import annotations

import argparse
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

from experiments.config_ranges import Range
from lightning_modules.errors import InputError

KINDS = ("string", "joint", "tool")
CAPABILITIES = ("perplexity", "score", "surprisal", "rerank", "parse", "dependency_parse", "terminals", "dyck",
                "probe", "sample", "propose")
TreeSource = Callable[[Sequence[Sequence[str]]], list[list[Any]]]


@dataclass(frozen=True)
class ScoringRequest:
    """Everything an evaluation asks of a scorer; a family reads what its method needs."""

    method: str
    batch_size: int = 32
    beam: int = 20
    word_beam: int = 5
    max_actions: int = 8
    fast_track: int | None = None  # word-synchronous beams: completions kept whatever their rank (None: all)
    n: int = 300  # proposal trees per sentence
    proposals: TreeSource | None = None
    source_name: str | None = None  # of the proposals or gold trees
    pos_tags: bool = True  # whether the given trees carry POS tags (files do, the parser's not)
    gold: TreeSource | None = None
    documents: bool = False  # the caller scores whole documents (eval ppl)
    device: str = "cpu"
    precision: str = "float32"


@dataclass
class Scoring:
    """A scorer for one method, with the settings that change its numbers and a one-line description."""

    scorer: Any
    identity: dict[str, Any]  # method settings (beam, N, ...) that change a number
    description: str  # e.g. "exact", "beam 20/5, <= 8 actions per word (paper: 300 proposals)"
    chunk: int = 32  # sentences between two appends to the item cache (few for slow per-sentence scorers)
    level: str = "sentence"  # "document": the scorer has score_documents
    data: dict[str, Path] = field(default_factory=dict)  # files read besides the model


@dataclass(frozen=True)
class ParseView:
    """How a family's parses are scored (``eval parse``): the tree lines EVALB compares, and the baseline.

    ``gold(tree)`` is the EVALB line of a cleaned gold tree (of ``gold_kind``) as the family's parses are
    shaped (e.g. binarized, unlabelled), ``parsed(score, tags)`` the line of the scorer's best tree of a
    sentence with the gold POS tags, ``baseline(words, tags)`` a trivial parse scored beside (or None),
    ``evalb`` the parameter set name (``collins`` or ``unlabeled``). Optionally ``oracle(tree)``: the EVALB line
    of the best parse the family's parser can build for a gold tree (e.g. a binary parser against n-ary gold),
    scored as the ceiling beside the parses; ``decisions(score, tree)``: ``{name: (correct, scored)}`` of the
    parser's structural decisions against the labels the gold tree gives them (e.g. SOM's p and p'), pooled
    over sentences into accuracies.
    """

    gold: Callable[[Any], str]
    parsed: Callable[[Any, Sequence[str]], str]
    baseline: Callable[[Sequence[str], Sequence[str]], str] | None
    baseline_name: str
    evalb: str
    convention: str
    gold_name: str  # e.g. "binarized"
    excluded: Callable[[Any, Sequence[Sequence[str]], str], list[bool]] | None = None  # (model, words, unknown)
    gold_kind: str | None = "constituency"  # the gold ``gold`` reads: constituency (Tree), dependency (DepTree)
    # or None (either, as the corpus has them)
    oracle: Callable[[Any], str] | None = None  # (gold tree) -> the line of the family's best possible parse
    decisions: Callable[[Any, Any], dict[str, tuple[int, int]]] | None = None  # (score, gold tree) -> hits


@dataclass(frozen=True)
class InspectOption:
    """A command-line option of ``synbench inspect`` that a family reads (``flag`` and argparse keywords)."""

    flag: str
    kwargs: dict[str, Any]


class Family(ABC):
    """The adapter base: every family declares its kind; the rest defaults to a clear error for what a family
    does not offer."""

    names: tuple[str, ...] = ()  # the family names this adapter registers (e.g. tg, txl-trees, txl-terminals)
    paper: str | None = None  # the paper registry key of the paper that introduces it
    inspect_names: tuple[str, ...] = ()  # ``synbench inspect NAME`` encodings it prints
    inspect_options: tuple[InspectOption, ...] = ()
    inspect_one_input_per_file = False  # True: without --jsonl, --trees-file holds one input, printed as one object
    pretrained = False  # True: spec models name a ``source`` to evaluate, nothing is trained
    config_ranges: Mapping[str, Range] = MappingProxyType({})  # key name -> range, beyond the shared rules

    def __init__(self, name: str):
        self.name = name

    # -- identity ------------------------------------------------------------------------------------------
    @abstractmethod
    def kind(self, config: dict[str, Any] | None = None) -> str:
        """``string``, ``joint`` or ``tool`` (``KINDS``) for a run with ``config`` (None: the family)."""

    def capabilities(self, config: dict[str, Any] | None = None) -> frozenset[str]:
        """What a run of this family with ``config`` (None: the family in general) can be evaluated on."""
        return frozenset()

    def methods(self, config: dict[str, Any] | None = None) -> tuple[str, ...]:
        """Scoring methods, the default first (``exact`` for string models)."""
        return ()

    def method_options(self, method: str) -> tuple[str, ...]:
        """The evaluation options (``beam``, ``word_beam``, ``n``) that ``method`` reads; ``n`` means it reads
        proposal trees (``proposals``, or a beam that pools its trees with them)."""
        return ()

    def level(self, config: dict[str, Any]) -> str:
        return config.get("data", {}).get("level", "sentence")

    # -- training ------------------------------------------------------------------------------------------
    def model_presets(self) -> tuple[dict[str, Any], str]:
        """The model presets by name and where they come from (for messages): by default the YAML file
        ``configs/model/FAMILY.yaml``; a plug-in may keep them in code."""
        from experiments.config import configs_dir, load_yaml

        path = configs_dir() / "model" / f"{self.name}.yaml"
        return load_yaml(path), str(path)

    def train_presets(self) -> dict[str, Any]:
        """The data/train presets by name and the ``runtime`` defaults (``configs/train.yaml``, shared by the
        built-in families)."""
        from experiments.config import configs_dir, load_yaml

        return load_yaml(configs_dir() / "train.yaml")

    def build_data(self, cfg: dict[str, Any]) -> Any:
        raise InputError(f"{self.name} cannot be trained", "family")

    def build_module(self, cfg: dict[str, Any], data: Any) -> Any:
        raise InputError(f"{self.name} cannot be trained", "family")

    def final_metrics(self, module: Any, data: Any, best_path: str) -> dict[str, Any]:
        return {}

    # -- checkpoints and scoring ---------------------------------------------------------------------------
    def load(self, checkpoint: str | Path, device: str = "cpu") -> Any:
        """The one loader of this family's checkpoints."""
        raise InputError(f"{self.name} checkpoints cannot be loaded", str(checkpoint))

    def scoring(self, checkpoint: str | Path, meta: dict[str, Any], request: ScoringRequest) -> Scoring:
        """The scorer of ``request.method`` for a checkpoint whose metadata is ``meta``."""
        raise InputError(f"a {self.name} model does not score sentences", str(checkpoint))

    def proposer(self, checkpoint: str | Path) -> Callable[[Sequence[Sequence[str]], int, int], list[list[Any]]]:
        """Capability ``propose``: ``(sentences, n, seed) -> n distinct trees per sentence`` (sampled without
        replacement from the checkpoint's q(y | x), most probable first)."""
        raise InputError(f"a {self.name} checkpoint does not propose trees", str(checkpoint))

    def write_proposals(self, args: argparse.Namespace) -> str:
        """Capability ``propose``: ``synbench propose`` (the proposals file, its log q and meta files); returns
        the line it prints."""
        raise InputError(f"a {self.name} checkpoint does not propose trees", str(args.checkpoint))

    # -- parsing, inspection, model size, probing ------------------------------------------------------------
    def parse_view(self) -> ParseView:
        raise InputError(f"a {self.name} model does not parse", "family")

    def inspect_sources(self, args: argparse.Namespace) -> list[tuple[str, Any]]:
        """(location, input) pairs of ``--tree``/``--trees-file``: bracketed trees by default."""
        from lightning_modules.data.tree import parse_tree, read_bracketed

        if args.tree is not None:
            return [("--tree", parse_tree(args.tree, "--tree"))]
        return [(f"{args.trees_file}:{line}", tree) for line, tree in read_bracketed(args.trees_file)]

    def inspect(self, name: str, item: Any, args: argparse.Namespace) -> dict[str, Any]:
        raise InputError(f"{self.name} has no inspect encoding", "family")

    def model_info(self, config: dict[str, Any], prefix: str) -> dict[str, Any]:
        """``{"parameters", "parts", "config"}`` of a preset's model config (built on the meta device)."""
        raise InputError(f"{self.name} has no model-info", "family")

    def prober(self, checkpoint: str | Path, device: str = "cpu") -> Any:
        """A ``analysis.features.Prober`` for this family's checkpoints (capability ``probe``)."""
        raise InputError(f"{self.name} checkpoints cannot be probed", str(checkpoint))

    def evaluate(self, task: str, args: argparse.Namespace) -> tuple[dict[str, Any], int, int]:
        """Family-owned evaluations (``terminals``, ``dyck``): (result, items computed now, items)."""
        raise InputError(f"a {self.name} model has no {task} evaluation", "family")
