"""Choosing the Scorer of a model file from the evaluation command line, and describing that choice.

A model file is a TG-family checkpoint (``synbench train``) or an n-gram baseline (the JSON file of
``scorers/ngram.py``'s ``save``). The method defaults to ``exact`` for string models and ``beam`` for joint
models; ``proposals`` takes a proposal file (``--proposals``) or the built-in parser (``--parser``).
Everything that changes a number (method, N, beam widths, the proposal source's sha256) goes into the
evaluation's ``settings`` and task identity, and a one-line description goes into its headline.

Proposals from the built-in parser are drawn **per sentence** with a seed derived from the base seed and
the sentence's words, so a sentence gets the same proposal set whatever else is evaluated with it — the
item cache stays valid when an interrupted run resumes with a different set of missing items.

Document-level checkpoints (``data.level=document``) are accepted by ``eval ppl`` only (``choose(...,
documents=True)``): their scorer is a ``scorers.tg_document.DocumentScorer`` (exact for ``txl-terminals``;
``gold`` or ``proposals`` with TG §3.1's greedy single-path prefix for joint models; no beam).
"""

from __future__ import annotations

import argparse
import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from experiments.evaluate.results import file_sha256
from experiments.evaluate.scorer import Scorer
from lightning_modules.data.tree import Tree
from lightning_modules.errors import InputError

PAPER = "paper: 300 proposals"
TreeSource = Callable[[Sequence[Sequence[str]]], list[list[Tree]]]


def add_arguments(p: argparse.ArgumentParser, methods: Sequence[str] = ("exact", "gold", "proposals", "beam"),
                  proposals_required: bool = False, model_optional: bool = False) -> None:
    """The model and scorer options shared by ``eval ppl|sg|blimp|rerank``."""
    p.add_argument("checkpoint", nargs="?" if model_optional else None,
                   help="TG-family checkpoint (RUN/checkpoints/best.ckpt) or n-gram model (.json)")
    if len(methods) > 1:
        p.add_argument("--method", choices=list(methods),
                       help="exact (string models, the default for them), gold (joint models on gold trees), "
                            "proposals (--proposals FILE or --parser CKPT), beam (word-synchronous beam search; "
                            "the default for joint models)")
    source = p.add_mutually_exclusive_group(required=proposals_required)
    source.add_argument("--proposals", type=Path, metavar="FILE",
                        help="proposal trees (synbench propose output, or SENTENCE<TAB>TREE lines)")
    if not proposals_required:
        source.add_argument("--parser", type=Path, metavar="CKPT", help="proposal-parser checkpoint (draws N trees)")
    p.add_argument("-n", type=int, default=300, help="proposal trees per sentence (default 300, as TG §3.1)")
    p.add_argument("--parser-seed", type=int, default=0, help="seed of the parser's sampling without replacement")
    p.add_argument("--beam", type=int, default=20, help="action beam of --method beam (default 20; paper-style 300)")
    p.add_argument("--word-beam", type=int, default=5, help="hypotheses kept after each word (default 5)")
    p.add_argument("--max-actions", type=int, default=8,
                   help="most nonterminal actions between two words in the beam (default 8)")
    p.add_argument("--batch-size", type=int, default=32,
                   help="sequences per forward pass (results do not depend on it)")
    p.add_argument("--out", type=Path, metavar="DIR",
                   help="results folder (default: RUN_DIR/eval/TASK-HASH, the hash of the task identity)")
    p.add_argument("--data-dir", help="data directory (default: $SYNBENCH_DATA or ~/.cache/synbench/data)")
    p.add_argument("--json", action="store_true", help="print the result as JSON")


@dataclass
class ChosenScorer:
    """A Scorer with what identifies it (for the task hash) and describes it (settings, headline)."""

    scorer: Scorer
    family: str
    joint: bool
    identity: dict[str, Any]  # model sha256, family, and every setting that changes a number
    settings: dict[str, Any]
    description: str  # e.g. "exact", "beam 20/5, <= 8 actions per word (paper: 300 proposals)"
    data: dict[str, Path] = field(default_factory=dict)  # files read besides the model (for results.json)
    # sentences scored between two appends to the item cache: few for the (slow, per-sentence) beam, so an
    # interrupted run loses little; more for batched scorers, whose batches they fill
    chunk: int = 32
    level: str = "sentence"  # "document": the scorer is a DocumentScorer (score_documents)


def is_ngram_file(path: Path) -> bool:
    """n-gram models are JSON (they start with ``{``); checkpoints are torch zip files."""
    try:
        with open(path, "rb") as f:
            return f.read(64).lstrip()[:1] == b"{"
    except OSError as e:
        raise InputError(f"cannot read model: {e.strerror or e}", str(path)) from None


def choose(args: argparse.Namespace, gold: TreeSource | None = None, documents: bool = False) -> ChosenScorer:
    """The Scorer the options ask for; ``gold`` is the tree source of ``--method gold`` (the corpus trees).

    ``documents``: the caller scores whole documents, so a document-level checkpoint is accepted (its scorer
    is a ``DocumentScorer``); other callers get an error for document-level checkpoints.
    """
    path = Path(args.checkpoint)
    if not path.is_file():
        raise InputError("model file not found", str(path))
    for flag, value in (("-n", args.n), ("--beam", args.beam), ("--word-beam", args.word_beam),
                        ("--max-actions", args.max_actions), ("--batch-size", args.batch_size)):
        if value < 1:
            raise InputError("must be at least 1", flag)
    sha = file_sha256(path)
    if is_ngram_file(path):
        if args.proposals is not None or getattr(args, "parser", None) is not None:
            raise InputError("an n-gram model is a string model: --proposals/--parser do not apply", str(path))
        return _ngram(path, sha, getattr(args, "method", None))
    from experiments.checkpoints import read_checkpoint
    from experiments.evaluate.scorers import load_scorer
    from experiments.evaluate.scorers.tg import JOINT_FAMILIES

    meta = read_checkpoint(path, ("tg", "txl-trees", "txl-terminals", "pushdown", "base-lm"))["synbench"]
    family = meta["family"]
    if family in ("pushdown", "base-lm"):
        if args.proposals is not None or getattr(args, "parser", None) is not None:
            raise InputError("Pushdown-family models are marginalised by beam search: --proposals/--parser do "
                             "not apply", str(path))
        return _pushdown(path, sha, family, getattr(args, "method", None), args.beam)
    level = meta["config"]["data"].get("level", "sentence")
    joint = family in JOINT_FAMILIES
    method = getattr(args, "method", None) or ("beam" if joint else "exact")
    if level == "document":
        if not documents:
            raise InputError("this evaluation is sentence-level; a document-level checkpoint is evaluated "
                             "with eval ppl only (TG §3.1's greedy single-path prefix)", str(path))
        if method == "beam":
            raise InputError("document-level joint checkpoints are scored with --method gold or --method "
                             "proposals (the greedy single-path prefix of TG §3.1), not beam", "--method")
    if method != "proposals" and (args.proposals is not None or getattr(args, "parser", None) is not None):
        raise InputError(f"--proposals/--parser need --method proposals (not {method})", "--method")
    identity: dict[str, Any] = {"model_sha256": sha, "family": family, "method": method}
    data: dict[str, Path] = {}
    if method == "exact":
        scorer = load_scorer(path, "exact", batch_size=args.batch_size)
        description = "exact"
    elif method == "beam":
        scorer = load_scorer(path, "beam", beam=args.beam, word_beam=args.word_beam, max_actions=args.max_actions)
        identity.update(beam=args.beam, word_beam=args.word_beam, max_actions=args.max_actions)
        description = f"beam {args.beam}/{args.word_beam}, <= {args.max_actions} actions per word ({PAPER})"
    elif method == "gold":
        if gold is None:
            raise InputError("--method gold needs gold trees: evaluate a treebank corpus (eval ppl)", "--method")
        scorer = load_scorer(path, "gold", trees=gold, pos_tags=True, source_name="gold trees of the corpus")
        description = "gold trees, log p(x, y_gold)"
    else:
        source, name, pos_tags, extra = _proposal_source(args)
        identity.update(n_proposals=args.n, **extra)
        scorer = load_scorer(path, "proposals", proposals=source, n_proposals=args.n, batch_size=args.batch_size,
                             pos_tags=pos_tags, source_name=name)
        if args.proposals is not None:
            data["proposals"] = args.proposals
        description = f"N = {args.n} proposals from {name} ({PAPER})"
    if level == "document":
        from experiments.evaluate.scorers.tg_document import INCREMENTAL, DocumentScorer

        scorer = DocumentScorer(scorer)  # type: ignore[arg-type]
        identity["level"] = "document"
        description = f"{description}, {INCREMENTAL}"
    settings = {"method": method, "family": family, **{k: v for k, v in identity.items()
                                                        if k not in ("model_sha256", "family", "method")},
                "scorer_convention": scorer.convention.to_dict()}
    return ChosenScorer(scorer, family, joint, identity, settings, description, data, 4 if method == "beam" else 32,
                        level)


def _pushdown(path: Path, sha: str, family: str, method: str | None, beam: int) -> ChosenScorer:
    """Pushdown-LM: beam search over attachments (its only marginalisation); Base-LM: exact."""
    from experiments.evaluate.scorers import pushdown

    model = pushdown.PushdownModel.load(str(path))
    wanted = "beam" if family == "pushdown" else "exact"
    if method not in (None, wanted):
        raise InputError(f"a {family} checkpoint is scored with --method {wanted}, not {method}", "--method")
    identity: dict[str, Any] = {"model_sha256": sha, "family": family, "method": wanted}
    if family == "pushdown":
        scorer: Any = pushdown.BeamScorer(model, beam)
        identity["beam"] = beam
        description = f"beam {beam} over attachment decisions (paper: 300)"
    else:
        scorer = pushdown.ExactScorer(model)
        description = "exact"
    settings = {"method": wanted, "family": family, **({"beam": beam} if family == "pushdown" else {}),
                "scorer_convention": scorer.convention.to_dict()}
    return ChosenScorer(scorer, family, family == "pushdown", identity, settings, description, {}, 4)


def _ngram(path: Path, sha: str, method: str | None) -> ChosenScorer:
    from experiments.evaluate.scorers import ngram

    if method not in (None, "exact"):
        raise InputError(f"an n-gram model is a string model: --method {method} does not apply", "--method")
    model = ngram.load(path)
    identity = {"model_sha256": sha, "family": model.name, "method": "exact"}
    settings = {"method": "exact", "family": model.name, "scorer_convention": model.convention.to_dict()}
    return ChosenScorer(model, model.name, False, identity, settings, "exact")


def _proposal_source(args: argparse.Namespace) -> tuple[Any, str, bool, dict[str, Any]]:
    """(tree source, its name, whether its trees carry POS tags, identity fields)."""
    if args.proposals is not None:
        if not args.proposals.is_file():
            raise InputError("proposal file not found", str(args.proposals))
        from experiments.evaluate.scorers.tree_files import ProposalFile

        source = ProposalFile(args.proposals)
        return source, source.name, True, {"proposals_sha256": file_sha256(args.proposals)}
    if getattr(args, "parser", None) is None:
        raise InputError("--method proposals needs --proposals FILE or --parser CKPT", "--method")
    source = SentenceSeededProposals(args.parser, args.n, args.parser_seed)
    return source, source.name, False, {"parser_sha256": file_sha256(args.parser), "parser_seed": args.parser_seed}


class SentenceSeededProposals:
    """N distinct trees per sentence from a parser checkpoint, seeded by (seed, the sentence's words)."""

    def __init__(self, checkpoint: str | Path, n: int, seed: int = 0):
        from experiments.evaluate.proposals import load_parser

        self.model, self.payload = load_parser(checkpoint)
        self.n, self.seed = n, seed
        self.name = f"parser:{checkpoint} (sample, seed {seed})"

    def sentence_seed(self, words: Sequence[str]) -> int:
        digest = hashlib.sha256(f"{self.seed}\t{' '.join(words)}".encode()).hexdigest()
        return int(digest[:8], 16)  # 32 bits: propose multiplies the seed by ~1e6 into a 64-bit seed

    def __call__(self, sentences: Sequence[Sequence[str]]) -> list[list[Tree]]:
        from experiments.evaluate.proposals import propose

        return [propose(self.model, self.payload, [words], self.n, "sample", self.sentence_seed(words))[0].trees
                for words in sentences]
