"""What a model family plugs in: the adapter every part of synbench asks instead of naming a family.

An adapter has a **core** every family provides: its ``names``, ``kind``, presets, ``build_data``,
``build_module``, ``final_metrics`` and ``load`` (the one loader of its checkpoints). Everything else is an
**optional part**, offered for what the family can do; each part returns None (or nothing) where the family
does not offer it, and a capability exists exactly when its part does (``capabilities`` derives them):

- ``methods`` and ``scoring``: the scoring methods, each declaring its options with their defaults
  (``Method``), and the scorer of a method (``Scoring``) -> ``perplexity``; at sentence level also ``score``,
  ``surprisal``, and ``rerank`` when a method scores given constituency proposals (a gold-tree method alone,
  which reads no proposals, gives no ``rerank``);
- ``proposing``: draws proposal trees (``Proposing``) -> ``propose``;
- ``parse_view``: how its own parses are scored (``ParseView``) -> ``parse``;
- ``probing``: where node representations are read -> ``probe``;
- ``sampling``: draws samples from a checkpoint -> ``sample``;
- ``evaluations``: evaluations it runs itself, by the capability they serve (``terminals``, ``dyck``,
  ``dependency_parse``);
- ``inspection`` (``synbench inspect``, ``Inspection``) and ``model_info`` (``synbench model-info``): commands.
- ``importing``: converts a checkpoint of the family's official implementation (``Importing``) for
  ``synbench import``.

Kinds: ``string`` (an exact p(x)), ``joint`` (p(x, y): log p(x) is bounded by marginalising trees) and
``tool`` (a component of the protocol, such as the proposal parser: trained, never evaluated as a model).

Capabilities (what a task may need, ``experiments.evaluate.tasks``): ``perplexity`` (log p(x) of a corpus
split), ``score`` (log p of single sentences: BLiMP), ``surprisal`` (per-word incremental values: SyntaxGym),
``rerank`` (log p(x, y) of given trees), ``parse`` (the model's own best trees), ``dependency_parse`` (its
own dependency trees, scored by UAS), ``terminals``
(teacher-forced log-probabilities of every terminal), ``dyck`` (closing-bracket accuracy), ``probe``
(per-layer node representations), ``sample``, ``propose`` (draws proposal trees for joint models).

No ``argparse`` object crosses this interface: parts take plain values and mappings of options.
"""

from __future__ import annotations

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
# (sentences, n, seed) -> n distinct trees per sentence, most probable first
Proposer = Callable[[Sequence[Sequence[str]], int, int], list[list[Any]]]
# (options of a family-run evaluation, e.g. checkpoint, corpus, split, out, device) -> (result, computed, items)
OwnEvaluation = Callable[[Mapping[str, Any]], tuple[dict[str, Any], int, int]]


# -- scoring -------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Method:
    """A scoring method, the options it reads with their defaults, and the trees it scores.

    The defaults here are the only ones: the CLI, experiment specs and ``load_scorer`` leave an option unset
    (None) and ``resolve`` fills it. ``n`` means the method reads proposal trees (``proposals``, or a beam that
    pools its trees with them); ``trees`` is the kind of given trees it scores (``constituency`` or
    ``dependency``; None: it finds its own structure).
    """

    name: str
    options: Mapping[str, Any] = field(default_factory=dict)  # option -> default (None: off)
    trees: str | None = None

    def resolve(self, given: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """The method's options: each given value that is not None over its default; other keys ignored."""
        given = given or {}
        return {key: default if given.get(key) is None else given[key] for key, default in self.options.items()}

    @property
    def reads_proposals(self) -> bool:
        return "n" in self.options


@dataclass(frozen=True)
class ScoringRequest:
    """Everything an evaluation asks of a scorer; a family reads what its method needs."""

    method: str
    options: Mapping[str, Any] = field(default_factory=dict)  # the method's options, resolved (Method.resolve)
    batch_size: int = 32
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


# -- proposing -----------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class ProposeRequest:
    """``synbench propose``: N trees per sentence of a corpus split or a file of sentences."""

    checkpoint: str | Path
    out: Path
    n: int
    method: str = "sample"  # sample (without replacement) or beam (top N)
    seed: int = 0
    max_rows: int = 2048
    corpus: str | None = None
    split: str | None = None
    sentences: Path | None = None
    data_dir: str | None = None
    logq: Path | None = None


@dataclass(frozen=True)
class Proposing:
    """Capability ``propose``: draws proposal trees from the family's checkpoints.

    ``proposer(checkpoint, method)`` loads a checkpoint and returns ``(sentences, n, seed) -> n distinct trees
    per sentence`` (``sample``: without replacement from q(y | x); ``beam``: the top N, the first the greedy
    parse), most probable first; ``write(request)`` writes ``synbench propose``'s files and returns the line
    it prints.
    """

    proposer: Callable[[str | Path, str], Proposer]
    write: Callable[[ProposeRequest], str]
    n: int  # trees per sentence when not given: the paper's N of the family's proposals


# -- parsing and inspection ----------------------------------------------------------------------------------
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
    over sentences into accuracies; ``tags(tree)``: the tags of a sentence's lines, read from its gold tree.
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
    # (gold tree) -> the POS tags its lines carry (e.g. SOM: UPOS of UD trees, whose PUNCT marks punctuation);
    # None: the corpus's tags (constituency: preterminals; dependency: XPOS, else UPOS)
    tags: Callable[[Any], Sequence[str]] | None = None


@dataclass(frozen=True)
class ImportedModel:
    """An official checkpoint converted to synbench's form: what ``synbench import`` writes as a run folder."""

    config: dict[str, Any]  # the resolved run config, as a trained run's config.json and checkpoint metadata
    vocab: dict[str, Any]  # the vocabularies, as ``checkpoints.Metadata`` records them
    state_dict: dict[str, Any]  # the family's LightningModule state_dict
    source: dict[str, Any]  # what was read: the official format, its conventions and the settings applied


@dataclass(frozen=True)
class Importing:
    """How ``synbench import FAMILY CHECKPOINT`` reads a checkpoint of the family's official code.

    ``convert(checkpoint, vocab, tokenizer)`` reads the files without running code from them (``torch.load``
    with ``weights_only=True``; pickled vocabularies through a restricted unpickler) and raises ``InputError``
    naming the file for anything it cannot read or that does not match."""

    official: str  # the official implementation and format, e.g. "MurtyShikhar/Pushdown-Layers model.pt"
    convert: Callable[[Path, Path | None, Path | None], ImportedModel]
    needs_vocab: bool = False
    takes_tokenizer: bool = False


@dataclass(frozen=True)
class InspectOption:
    """A command-line option of ``synbench inspect`` that a family reads (``flag`` and argparse keywords)."""

    flag: str
    kwargs: dict[str, Any]

    @property
    def dest(self) -> str:
        """The key of its value in the options an ``Inspection.record`` gets (``--memory-length``: memory_length)."""
        return self.flag.lstrip("-").replace("-", "_")


def bracketed_sources(tree: str | None, trees_file: str | None) -> list[tuple[str, Any]]:
    """(location, tree) pairs of ``--tree TEXT`` or ``--trees-file FILE``: bracketed trees."""
    from lightning_modules.data.tree import parse_tree, read_bracketed

    if tree is not None:
        return [("--tree", parse_tree(tree, "--tree"))]
    return [(f"{trees_file}:{line}", item) for line, item in read_bracketed(trees_file)]


@dataclass(frozen=True)
class Inspection:
    """``synbench inspect NAME``: the encodings a family prints, as the contracts of DESIGN.md.

    ``record(name, input, options)`` is the JSON record of one input, ``options`` the values of the family's
    own ``options`` by ``InspectOption.dest`` (None where not given); ``sources(tree, trees_file)`` reads the
    inputs of ``--tree``/``--trees-file`` as (location, input) pairs; ``one_input_per_file``: without
    ``--jsonl``, ``--trees-file`` holds one input, printed as one object.
    """

    names: tuple[str, ...]
    record: Callable[[str, Any, Mapping[str, Any]], dict[str, Any]]
    options: tuple[InspectOption, ...] = ()
    sources: Callable[[str | None, str | None], list[tuple[str, Any]]] = bracketed_sources
    one_input_per_file: bool = False


# -- the adapter ---------------------------------------------------------------------------------------------
class Family(ABC):
    """The adapter base: the core every family provides, and the optional parts (None or empty by default)."""

    names: tuple[str, ...] = ()  # the family names this adapter registers (e.g. tg, txl-trees, txl-terminals)
    config_ranges: Mapping[str, Range] = MappingProxyType({})  # key name -> range, beyond the shared rules
    source_prefix: str | None = None  # models named PREFIX... instead of a checkpoint file (``hf:DIR``)
    # whether S seeds of one config train in one process, parameters stacked (``train --seeds``, ``submit
    # --seeds-per-process``): its modules have a stacked form (``lightning_modules.models.seed_stack``)
    stacks_seeds: bool = False
    # where it cannot: why its modules have no stacked form (said when a seed group is asked for); empty: "no
    # stacked form"
    seed_stack_refusal: str = ""

    def __init__(self, name: str):
        self.name = name

    # -- core ----------------------------------------------------------------------------------------------
    @abstractmethod
    def kind(self, config: dict[str, Any] | None = None) -> str:
        """``string``, ``joint`` or ``tool`` (``KINDS``) for a run with ``config`` (None: the family)."""

    def level(self, config: dict[str, Any] | None) -> str:
        """``sentence`` or ``document`` (``data.level``) of a run with ``config`` (None: sentence)."""
        return (config or {}).get("data", {}).get("level", "sentence")

    def model_presets(self) -> tuple[dict[str, Any], str]:
        """The model presets by name and where they come from (for messages): by default the YAML file
        ``presets/FAMILY.yaml`` beside the adapter's module, ``extends`` resolved
        (``experiments.presets.load_presets``); a plug-in may keep them in code."""
        from experiments.presets import load_presets, presets_file

        path = presets_file(self)
        return load_presets(path), str(path)

    def train_presets(self) -> dict[str, Any]:
        """The data/train preset of each model preset, by model preset name, and the ``runtime`` defaults: the
        preset of ``configs/train.yaml`` (shared by the families) that the model preset's ``train_preset``
        names, else the one of its own name (``experiments.presets.train_presets_for``); with presets kept in
        code, ``train.yaml`` as it is."""
        from experiments.presets import configs_dir, load_yaml, presets_file, train_presets_for

        return train_presets_for(presets_file(self), load_yaml(configs_dir() / "train.yaml"))

    def build_data(self, cfg: dict[str, Any]) -> Any:
        raise InputError(f"{self.name} cannot be trained", "family")

    def build_module(self, cfg: dict[str, Any], data: Any) -> Any:
        raise InputError(f"{self.name} cannot be trained", "family")

    def final_metrics(self, module: Any, data: Any, best_path: str) -> dict[str, Any]:
        return {}

    def load(self, checkpoint: str | Path, device: str = "cpu") -> Any:
        """The one loader of this family's checkpoints."""
        raise InputError(f"{self.name} checkpoints cannot be loaded", str(checkpoint))

    # -- optional parts ------------------------------------------------------------------------------------
    def seed_stack(self, modules: Sequence[Any]) -> Any:
        """S seeds' networks of one config as one batched network (``SeedStack``: parameters stacked on a
        seed axis), for training seed groups and for scoring the same inputs with every seed at once; None where
        the modules have no stacked form (``stacks_seeds`` false, or a module without ``stacked_form``)."""
        from lightning_modules.models.seed_stack import SeedStack, stackable

        if not self.stacks_seeds or not all(stackable(m) for m in modules):
            return None
        return SeedStack(modules)

    def methods(self, config: dict[str, Any] | None = None) -> tuple[Method, ...]:
        """Scoring methods of a run with ``config`` (None: the family), the default first; none: not scored."""
        return ()

    def scoring(self, checkpoint: str | Path, meta: dict[str, Any], request: ScoringRequest) -> Scoring:
        """The scorer of ``request.method`` (one of ``methods``) for a checkpoint whose metadata is ``meta``."""
        raise InputError(f"a {self.name} model does not score sentences", str(checkpoint))

    def proposing(self, config: dict[str, Any] | None = None) -> Proposing | None:
        return None

    def parse_view(self, config: dict[str, Any] | None = None) -> ParseView | None:
        return None

    def probing(self, config: dict[str, Any] | None = None) -> Callable[[str | Path, str], Any] | None:
        """``(checkpoint, device) -> analysis.features.Prober`` (capability ``probe``)."""
        return None

    def sampling(self, config: dict[str, Any] | None = None) -> Callable[..., list[Any]] | None:
        """``(checkpoint, n, seed, temperature, max_length) -> samples`` with ``tree`` (or None), ``words`` and
        ``logprob`` (capability ``sample``)."""
        return None

    def evaluations(self, config: dict[str, Any] | None = None) -> Mapping[str, OwnEvaluation]:
        """Evaluations the family runs itself, by the capability (task need) they serve."""
        return {}

    def inspection(self) -> Inspection | None:
        return None

    def importing(self) -> Importing | None:
        """How a checkpoint of the family's official implementation is converted (``synbench import``)."""
        return None

    def model_info(self, config: dict[str, Any], prefix: str) -> dict[str, Any]:
        """``{"parameters", "parts", "config"}`` of a preset's model config (built on the meta device)."""
        raise InputError(f"{self.name} has no model-info", "family")

    # -- derived -------------------------------------------------------------------------------------------
    def capabilities(self, config: dict[str, Any] | None = None) -> frozenset[str]:
        """What a run of this family with ``config`` (None: the family in general) can be evaluated on: what
        its parts offer (the list in the module docstring)."""
        found: set[str] = set()
        methods = self.methods(config)
        if methods:
            found.add("perplexity")
            if self.level(config) == "sentence":
                found |= {"score", "surprisal"}
                if any(m.trees == "constituency" and m.reads_proposals for m in methods):
                    found.add("rerank")
        parts = {"propose": self.proposing(config), "parse": self.parse_view(config),
                 "probe": self.probing(config), "sample": self.sampling(config)}
        found |= {name for name, part in parts.items() if part is not None}
        return frozenset(found | set(self.evaluations(config)))

    def method(self, name: str, config: dict[str, Any] | None = None) -> Method:
        """The method ``name`` of a run with ``config``; an unknown one is an error naming the family's."""
        methods = {m.name: m for m in self.methods(config)}
        if name not in methods:
            known = " or ".join(methods) or "nothing (it is not scored as a language model)"
            raise InputError(f"a {self.name} model has no {name} method: it is scored with --method {known}",
                             "--method")
        return methods[name]

    def prober(self, checkpoint: str | Path, device: str = "cpu") -> Any:
        """The prober of the ``probing`` part for a checkpoint."""
        part = self.probing()
        if part is None:
            raise InputError(f"{self.name} checkpoints cannot be probed", str(checkpoint))
        return part(checkpoint, device)

    def evaluate(self, task: str, options: Mapping[str, Any]) -> tuple[dict[str, Any], int, int]:
        """Run the family's own evaluation serving ``task`` (a capability) with ``options``."""
        evaluation = self.evaluations().get(task)
        if evaluation is None:
            raise InputError(f"a {self.name} model has no {task} evaluation", "family")
        return evaluation(options)
