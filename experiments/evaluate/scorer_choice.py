"""Choosing the Scorer of a model file from the evaluation command line, and describing that choice.

A model source is a checkpoint (``synbench train``; its family adapter builds the scorer), an n-gram baseline
(the JSON file of ``scorers/ngram.py``'s ``save``) or ``hf:DIR``, a causal LM saved locally with
``transformers`` (``scorers/hf.py``: exact, on raw text through its own tokenizer, as minicons or lm-eval build
its inputs: ``--hf-convention``), or ``hf:ORG/NAME@REV``, one in the local Hugging Face cache
(``scorers/hub.py``). The method defaults to the family's first (``exact`` for string models, ``beam`` for
joint sentence-level models); ``proposals`` takes a proposal file (``--proposals``) or the built-in parser
(``--parser``). A method option left unset (``-n``, ``--beam``, ...) takes the default the family's method
declares (``adapter.Method``).
Everything that changes a number (method, N, beam widths, the proposal source's sha256) goes into the
evaluation's ``settings`` and task identity, and a one-line description goes into its headline. A checkpoint's
settings also record ``stacked_scoring``: whether its seed stack scored it (``scorers/stacked.py``; float
rounding only, so not in the identity).

Proposals from the built-in parser are drawn **per sentence** with a seed derived from the base seed and
the sentence's words, so a sentence gets the same proposal set whatever else is evaluated with it — the
item cache stays valid when an interrupted run resumes with a different set of missing items.

Document-level checkpoints (``data.level=document``) are accepted by ``eval ppl`` only (``choose(...,
documents=True)``): their scorer has ``score_documents``.
"""

from __future__ import annotations

import argparse
import hashlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from experiments.cli_options import add_device_argument, checked_device, natural, positive_int
from experiments.evaluate.scorer import Scorer
from experiments.evaluate.scorers import HF_CONVENTIONS as CONVENTIONS
from experiments.evaluate.word_prob import WORD_PROBS
from experiments.families import declared_defaults
from experiments.families.adapter import ScoringRequest
from lightning_modules.data.checksums import file_sha256
from lightning_modules.data.tree import Tree
from lightning_modules.errors import InputError

# read by the methods
METHOD_OPTIONS = ("n", "beam", "word_beam", "max_actions", "fast_track", "pop_root", "hf_convention", "word_prob")
TreeSource = Callable[[Sequence[Sequence[str]]], list[list[Tree]]]


def add_arguments(p: argparse.ArgumentParser, methods: Sequence[str] = ("exact", "gold", "proposals", "beam"),
                  proposals_required: bool = False, model_optional: bool = False,
                  several_models: bool = False, results: bool = True) -> None:
    """The model and scorer options shared by ``eval ppl|sg|blimp|rerank`` (``several_models``: any number of
    models, ``eval pairs FILE MODEL...``); ``results``: also ``--out DIR``, ``--data-dir`` and ``--json``."""
    p.add_argument("checkpoint", nargs="*" if several_models else "?" if model_optional else None,
                   metavar="MODEL" if several_models else None,
                   help="checkpoint (RUN/checkpoints/best.ckpt), n-gram model (.json), hf:DIR (a local "
                        "transformers causal LM with its tokenizer) or hf:ORG/NAME@REV (one in the local Hugging "
                        "Face cache)")
    if len(methods) > 1:
        p.add_argument("--method", choices=list(methods),
                       help="exact (string models, the default for them), gold (joint models on gold trees), "
                            "proposals (--proposals FILE or --parser CKPT), beam (word-synchronous beam search; "
                            "the default for joint models; with --proposals/--parser, TG and TXL (trees) pool the "
                            "beam's trees with the proposals)")
    source = p.add_mutually_exclusive_group(required=proposals_required)
    source.add_argument("--proposals", type=Path, metavar="FILE",
                        help="proposal trees (synbench propose output, or SENTENCE<TAB>TREE lines)")
    if not proposals_required:
        source.add_argument("--parser", type=Path, metavar="CKPT", help="proposal parser checkpoint (draws N trees)")
    # method options: unset (None), each takes the default of the family's method
    p.add_argument("-n", type=positive_int,
                   help="proposal trees per sentence (default: the family's paper's: "
                        f"{declared_defaults('n', 'proposals')})")
    p.add_argument("--parser-seed", type=natural, default=0, help="seed of the parser's sampling without replacement")
    p.add_argument("--beam", type=positive_int,
                   help=f"action beam of --method beam (default: the family's paper's: {declared_defaults('beam')})")
    p.add_argument("--word-beam", type=positive_int,
                   help=f"hypotheses kept after each word (default: the family's paper's: "
                        f"{declared_defaults('word_beam')})")
    p.add_argument("--max-actions", type=positive_int,
                   help="most actions between two words in the beam (DTG: token steps, an arc two; default: the "
                        f"family's paper's: {declared_defaults('max_actions')})")
    p.add_argument("--fast-track", type=natural, default=None, metavar="K",
                   help="word-synchronous beams over nonterminal actions: words compete for the action beam and "
                        "the best K are kept regardless (Stern et al. 2017); default: the family's paper's: "
                        f"{declared_defaults('fast_track')}")
    p.add_argument("--pop-root", choices=("official", "single-word"),
                   help="arc-standard DTG and TXL (trans) beams: when pop_root may come: official (the default, the "
                        "official beam's: on any stack, arcs after it) or single-word (one word on the stack, "
                        "complete trees only)")
    p.add_argument("--batch-size", type=positive_int, default=32,
                   help="sequences per forward pass (results do not depend on it)")
    add_device_argument(p)
    p.add_argument("--precision", default="float32", choices=("float32", "float16", "bfloat16"),
                   help="hf: models only: weights' precision (half precision on GPU only; default float32)")
    p.add_argument("--hf-convention", choices=CONVENTIONS,
                   help="hf: models only: whose requests to reproduce: minicons (the default; every text after "
                        "the BOS token) or lm-eval (lm-evaluation-harness: BLiMP sentences after a space, other "
                        "texts in rolling windows)")
    p.add_argument("--word-prob", choices=WORD_PROBS,
                   help="subword models (hf:, SentencePiece terminals): a word's probability from its pieces: "
                        "sum-pieces (the default, the papers') or corrected (Pimentel & Meister 2024: times the "
                        "probability that a word boundary follows, over that one came before it)")
    if not results:
        return
    p.add_argument("--out", type=Path, metavar="DIR",
                   help="results folder (default: RUN_DIR/eval/TASK-HASH, the hash of the task identity; "
                        "hf: models: DIR/eval/TASK-HASH)")
    p.add_argument("--data-dir", help="data directory (default: $SYNBENCH_DATA or ~/.cache/synbench/data)")
    p.add_argument("--json", action="store_true", help="print the result as JSON")


@dataclass
class ChosenScorer:
    """A Scorer with what identifies it (for the task hash) and describes it (settings, headline)."""

    scorer: Scorer
    family: str
    joint: bool
    identity: dict[str, Any]  # model sha256, family, and every setting that changes a number
    settings: dict[str, Any]  # results.json's settings: method, description and the identity's settings
    description: str  # e.g. "exact", "beam 20/5, <= 8 actions per word (paper: 300 proposals)"
    data: dict[str, Path] = field(default_factory=dict)  # files read besides the model (for results.json)
    # sentences scored between two appends to the item cache: few for the (slow, per-sentence) beam, so an
    # interrupted run loses little; more for batched scorers, whose batches they fill
    chunk: int = 32
    level: str = "sentence"  # "document": the scorer is a DocumentScorer (score_documents)
    adapter: Any = None  # the family adapter of a checkpoint (None for n-gram and hf: sources)
    capabilities: frozenset[str] = frozenset({"perplexity", "score", "surprisal"})
    options: dict[str, Any] = field(default_factory=dict)  # the method's options, resolved (Method.resolve)


def is_ngram_file(path: Path) -> bool:
    """n-gram models are JSON (they start with ``{``); checkpoints are torch zip files."""
    try:
        with open(path, "rb") as f:
            return f.read(64).lstrip()[:1] == b"{"
    except OSError as e:
        raise InputError(f"cannot read model: {e.strerror or e}", str(path)) from None


def choose(args: argparse.Namespace, gold: TreeSource | None = None, documents: bool = False) -> ChosenScorer:
    """The Scorer the options ask for; ``gold`` is the tree source of ``--method gold`` (the corpus trees).

    The model source is ``hf:DIR`` (a local ``transformers`` causal LM), an n-gram JSON file, or a checkpoint,
    whose family adapter builds the scorer of the method. ``documents``: the caller scores whole documents, so
    a document-level checkpoint is accepted (its scorer has ``score_documents``).
    """
    for flag, value in (("-n", args.n), ("--beam", args.beam), ("--word-beam", args.word_beam),
                        ("--max-actions", args.max_actions), ("--batch-size", args.batch_size)):
        if value is not None and value < 1:
            raise InputError("must be at least 1", flag)
    checked_device(getattr(args, "device", "cpu"))
    fast_track = getattr(args, "fast_track", None)
    if fast_track is not None and fast_track < 0:
        raise InputError("must be at least 0", "--fast-track")
    method = getattr(args, "method", None)
    given_trees = args.proposals is not None or getattr(args, "parser", None) is not None
    from experiments.families import checkpoint_family, source_family

    source = source_family(str(args.checkpoint))
    if source is not None:
        if given_trees:
            raise InputError(f"an {source.source_prefix} model is a string model: --proposals/--parser do not apply",
                             args.checkpoint)
        return _source(source, args, method)
    if getattr(args, "hf_convention", None) is not None:
        raise InputError("applies to hf: models only", "--hf-convention")
    path = Path(args.checkpoint)
    if not path.is_file():
        raise InputError("model file not found", str(path))
    sha = file_sha256(path)
    if is_ngram_file(path):
        if given_trees:
            raise InputError("an n-gram model is a string model: --proposals/--parser do not apply", str(path))
        _check_word_prob(args, {}, "an n-gram model")
        return _ngram(path, sha, method)
    adapter, meta = checkpoint_family(path)
    methods = [m.name for m in adapter.methods(meta["config"])]
    if not methods:
        raise InputError(f"a {adapter.name} checkpoint is a {adapter.kind(meta['config'])} and is not scored as a "
                         "language model", str(path))
    if method is not None and method not in methods:
        raise InputError(f"a {adapter.name} checkpoint is a {adapter.kind(meta['config'])} model: it is scored with "
                         f"--method {' or '.join(methods)}, not {method}", "--method")
    method = method or methods[0]
    if given_trees and "proposals" not in methods:
        raise InputError(f"{adapter.name} models are scored with --method {' or '.join(methods)}: "
                         "--proposals/--parser do not apply", str(path))
    if method not in ("proposals", "beam") and given_trees:
        raise InputError(f"--proposals/--parser need --method proposals or beam (the union of the beam's trees "
                         f"and the proposals), not {method}", "--method")
    declared = adapter.method(method, meta["config"])
    _check_word_prob(args, declared.options, f"{adapter.name} --method {method}")
    options = declared.resolve({key: getattr(args, key, None) for key in METHOD_OPTIONS})
    request = ScoringRequest(method=method, options=options, batch_size=args.batch_size, gold=gold,
                             documents=documents, device=getattr(args, "device", "cpu"))
    extra: dict[str, Any] = {}
    data: dict[str, Path] = {}
    if given_trees:
        if not declared.reads_proposals:  # e.g. a beam that does not pool its trees with proposals
            raise InputError(f"{adapter.name} does not pool its beam with proposals: use --method proposals, or the "
                             "beam without --proposals/--parser", "--method")
        trees, name, pos_tags, extra = _proposal_source(args, options["n"])
        # a source gives at most its own N (a file: its largest group): the results name the N pooled
        request = replace(request, proposals=trees, source_name=name, pos_tags=pos_tags,
                          options={**options, "n": min(options["n"], trees.most)})
        if args.proposals is not None:
            data["proposals"] = args.proposals
    try:
        scoring = adapter.scoring(path, meta, request)
    except InputError as e:  # what the checkpoint holds (its vocabularies, weights) is at the checkpoint
        if e.location is not None:
            raise
        raise InputError(e.message, str(path)) from None
    from experiments.evaluate.scorers import stacked
    identity: dict[str, Any] = {"model_sha256": sha, "family": adapter.name, "method": method, **scoring.identity,
                                **(extra if given_trees else {})}
    settings = {"method": method, "family": adapter.name, "description": scoring.description,
                **{k: v for k, v in identity.items() if k not in ("model_sha256", "family", "method")},
                "scorer_convention": scoring.scorer.convention.to_dict(),
                "stacked_scoring": stacked.scored_stacked(str(path))}  # not in the identity: solo up to rounding
    return ChosenScorer(scoring.scorer, adapter.name, adapter.kind(meta["config"]) == "joint", identity, settings,
                        scoring.description, {**data, **scoring.data}, scoring.chunk, scoring.level, adapter,
                        adapter.capabilities(meta["config"]), options)


def _source(adapter: Any, args: argparse.Namespace, method: str | None) -> ChosenScorer:
    """A model named by its family's prefix (``hf:DIR``, a local ``transformers`` causal LM), scored by the
    family's only method (exact) as it is."""
    (only,) = adapter.methods()
    if method not in (None, only.name):
        raise InputError(f"an {adapter.source_prefix} model is a string model: --method {method} does not apply",
                         "--method")
    _check_word_prob(args, only.options, f"an {adapter.source_prefix} model")
    options = only.resolve({key: getattr(args, key, None) for key in METHOD_OPTIONS})
    request = ScoringRequest(only.name, options, args.batch_size, device=getattr(args, "device", "cpu"),
                             precision=getattr(args, "precision", "float32"))
    scoring = adapter.scoring(args.checkpoint, {"family": adapter.name, "config": {}}, request)
    scorer = scoring.scorer
    identity = {"model": args.checkpoint, "family": adapter.name, "method": only.name, **scoring.identity}
    settings = {"method": only.name, "family": adapter.name, "description": scoring.description,
                "source": args.checkpoint, **options, "scorer_convention": scorer.convention.to_dict()}
    return ChosenScorer(scorer, adapter.name, False, identity, settings, scoring.description, {}, scoring.chunk,
                        capabilities=adapter.capabilities(), options=options)


def _ngram(path: Path, sha: str, method: str | None) -> ChosenScorer:
    from experiments.evaluate.scorers import ngram

    if method not in (None, "exact"):
        raise InputError(f"an n-gram model is a string model: --method {method} does not apply", "--method")
    model = ngram.load(path)
    identity = {"model_sha256": sha, "family": model.name, "method": "exact"}
    settings = {"method": "exact", "family": model.name, "description": "exact",
                "scorer_convention": model.convention.to_dict()}
    return ChosenScorer(model, model.name, False, identity, settings, "exact")


def _check_word_prob(args: argparse.Namespace, options: Mapping[str, Any], what: str) -> None:
    """A ``--word-prob`` other than the default only where the method declares the option (models of subword
    pieces); elsewhere a word is one token, and summing its pieces is the only convention."""
    word_prob = getattr(args, "word_prob", None)
    if word_prob not in (None, WORD_PROBS[0]) and "word_prob" not in options:
        raise InputError(f"{what} has no --word-prob {word_prob}: it applies to models of subword pieces whose "
                         "method offers it (hf: models; checkpoints of SentencePiece terminals)", "--word-prob")


def _proposal_source(args: argparse.Namespace, n: int) -> tuple[Any, str, bool, dict[str, Any]]:
    """(tree source, its name, whether its trees carry POS tags, identity fields); ``n``: trees per sentence."""
    if args.proposals is not None:
        if not args.proposals.is_file():
            raise InputError("proposal file not found", str(args.proposals))
        from experiments.evaluate.scorers.tree_files import ProposalFile

        source = ProposalFile(args.proposals)
        return source, source.name, True, {"proposals_sha256": file_sha256(args.proposals)}
    if getattr(args, "parser", None) is None:
        raise InputError("--method proposals needs --proposals FILE or --parser CKPT", "--method")
    source = SentenceSeededProposals(args.parser, n, args.parser_seed)
    return source, source.name, False, {"parser_sha256": file_sha256(args.parser), "parser_seed": args.parser_seed}


class SentenceSeededProposals:
    """N distinct trees per sentence from a parser checkpoint (its family's proposing part, sampling without
    replacement), seeded by (seed, the sentence's words)."""

    def __init__(self, checkpoint: str | Path, n: int, seed: int = 0):
        from experiments.families import checkpoint_family

        adapter, meta = checkpoint_family(checkpoint)
        proposing = adapter.proposing(meta["config"])
        if proposing is None:
            raise InputError(f"a {adapter.name} checkpoint does not propose trees", str(checkpoint))
        self.draw = proposing.proposer(checkpoint, "sample")
        self.n, self.seed = n, seed
        self.name = f"parser:{checkpoint} (sample, seed {seed})"

    @property
    def most(self) -> int:
        """The largest number of trees a sentence gets (N; fewer where the sentence has fewer trees)."""
        return self.n

    def sentence_seed(self, words: Sequence[str]) -> int:
        digest = hashlib.sha256(f"{self.seed}\t{' '.join(words)}".encode()).hexdigest()
        return int(digest[:8], 16)  # 32 bits: propose multiplies the seed by ~1e6 into a 64-bit seed

    def __call__(self, sentences: Sequence[Sequence[str]]) -> list[list[Any]]:
        return [self.draw([words], self.n, self.sentence_seed(words))[0] for words in sentences]
