"""Parse reranking (TG §3.2): the proposal with the highest p(x, y) under the joint model, scored with EVALB.

For each gold sentence, the first N distinct proposals of its words (``--proposals``, matched by words, POS
tags as in the file) are scored by the model in one pass; the one with the highest log p(x, y) is the
model's parse. The parses are scored with EVALB (COLLINS.prm) against the cleaned gold trees (no ``-NONE-``,
no function tags, no root wrapper; the proposals are cleaned the same way). Trees whose tags are all the
placeholder ``XX`` (``synbench propose`` on raw sentences) get the gold tags, as EVALB needs them to delete
punctuation. Also reported:

- the **oracle**: per sentence, the proposal (of the same N) with the highest sentence-level bracket F1
  (first one on ties), scored the same way — the ceiling of any reranker of these proposals;
- the proposal parser's own **1-best** (the tree with the highest log q(y | x)) when the ``--logq`` file of
  ``synbench propose`` is given (it needs the JSON-lines proposals format, aligned by ``sentence``).

Items are sentences (the chosen tree and its log p(x, y)), cached in ``items.jsonl``; the chosen trees are
also written one per line to ``reranked.txt``, ready for ``synbench evalb``.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from experiments.evaluate.cache import ItemCache, Record, default_out_dir
from experiments.evaluate.evalb import COLLINS, evaluate_lines, parse_line, score_sentence
from experiments.evaluate.ppl import Sentences
from experiments.evaluate.proposal_files import PLACEHOLDER_TAG, with_tags
from experiments.evaluate.results import write_results
from experiments.evaluate.scorer_choice import ChosenScorer, add_arguments, choose
from experiments.evaluate.scorers.tree_files import ProposalFile
from experiments.evaluate.subcommands import add_limit_argument, bracket_report, print_result
from lightning_modules.data.atomic import atomic_write_text
from lightning_modules.data.checksums import file_sha256
from lightning_modules.data.tree import Tree, clean, drop_pos_tags, parse_tree, to_bracketed
from lightning_modules.errors import InputError
from lightning_modules.numeric import is_number

CONVENTION = ("model parse = the proposal with the highest log p(x, y) among the first N distinct proposals; "
              "EVALB COLLINS.prm (labeled, punctuation and TOP deleted, ADVP = PRT) against cleaned gold trees; "
              "oracle = per-sentence best bracket F1 among the same proposals")


def read_gold(spec: str, limit: int | None, data_dir: str | None = None, kind: str | None = "constituency"
              ) -> Sentences:
    """``--gold``: a treebank file, or ``CORPUS/SPLIT`` of the corpus registry, with trees of ``kind``."""
    from experiments.evaluate.ppl import read_sentences

    if Path(spec).is_file():
        return read_sentences(spec, "file", limit, data_dir, trees=True, tree_kind=kind)
    corpus, slash, split = spec.rpartition("/")
    if not slash or not corpus:
        raise InputError("expected a treebank file or CORPUS/SPLIT (e.g. ptb-sample/test)", "--gold")
    return read_sentences(corpus, split, limit, data_dir, trees=True, tree_kind=kind)


def distinct(trees: Sequence[Tree], n: int) -> list[Tree]:
    """The first ``n`` trees that differ once cleaned and without POS tags (the set the scorer reranks)."""
    seen: set[Tree] = set()
    out = []
    for tree in trees:
        key = drop_pos_tags(clean(tree))
        if key not in seen:
            seen.add(key)
            out.append(tree)
            if len(out) == n:
                break
    return out


def line(tree: Tree | str, tags: Sequence[str] | None = None) -> str:
    """A tree as EVALB reads it: cleaned, one line; placeholder tags (``XX``) replaced by ``tags``."""
    tree = clean(parse_tree(tree) if isinstance(tree, str) else tree)
    if tags is not None and all(t == PLACEHOLDER_TAG for _, t in tree.pos()):
        tree = with_tags(drop_pos_tags(tree), tags)
    return to_bracketed(tree)


def oracle(gold: Tree, proposals: Sequence[Tree]) -> str:
    """The proposal with the highest sentence-level bracket F1 against ``gold`` (EVALB counts)."""
    tags = [t for _, t in gold.pos()]
    g = parse_line(line(gold), COLLINS, "<gold>")
    best, best_f1 = "", -1.0
    for tree in proposals:
        test = line(tree, tags)
        row = score_sentence(1, g, parse_line(test, COLLINS, "<proposal>"), COLLINS)
        f1 = 2.0 * row.matched / (row.gold + row.test) if row.gold + row.test else 0.0
        if f1 > best_f1:
            best, best_f1 = test, f1
    return best


def proposal_quality(gold: Sequence[Tree], tree_sets: Sequence[Sequence[Tree]], ns: Sequence[int]
                     ) -> dict[str, Any]:
    """How good a proposal set is: the parser's 1-best bracket F1 (each set's first tree, the most probable
    under q) and the oracle F1 of each set's first N trees for every N in ``ns`` — EVALB (COLLINS.prm) over
    all sentences against the cleaned ``gold`` trees, in percent. Trees carry POS tags (the gold ones where
    they are the placeholder ``XX``), as in a proposals file. A joint model's bound over the proposals
    can be no better than the trees the oracle finds."""
    gold_lines = [line(t) for t in gold]

    def f1(test: list[str]) -> float:
        return evaluate_lines(gold_lines, test, COLLINS, "<gold>", "<proposals>").as_dict()["all"]["bracket_f1"]

    tags = [[t for _, t in g.pos()] for g in gold]
    return {"one_best_f1": f1([line(trees[0], t) for trees, t in zip(tree_sets, tags)]),
            "oracle_f1": {str(n): f1([oracle(g, trees[:n]) for g, trees in zip(gold, tree_sets)]) for n in ns}}


def parser_one_best(proposals: Path, logq: Path) -> dict[tuple[str, ...], Tree]:
    """Words -> the tree with the highest log q, from a JSON-lines proposals file and its ``--logq`` file."""
    def rows(path: Path, key: str) -> dict[int, tuple[int, list]]:
        out: dict[int, tuple[int, list]] = {}
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as e:
            raise InputError(f"cannot read: {e}", str(path)) from None
        for number, raw in enumerate(text.splitlines(), start=1):
            if not raw.strip():
                continue
            try:
                row = json.loads(raw)
                k, values = row["sentence"], row[key]
            except (ValueError, TypeError, KeyError):
                raise InputError(f'expected {{"sentence": K, "{key}": [...]}}', f"{path}:{number}") from None
            if not isinstance(values, list) or not values:
                raise InputError(f'"{key}" must be a non-empty list', f"{path}:{number}")
            out[k] = (number, values)
        return out

    if proposals.suffix != ".jsonl":
        raise InputError("--logq needs the JSON-lines proposals format (synbench propose output)", str(proposals))
    trees, logqs = rows(proposals, "trees"), rows(logq, "logq")
    best: dict[tuple[str, ...], Tree] = {}
    for k, (number, values) in trees.items():
        if k not in logqs or len(logqs[k][1]) != len(values):
            raise InputError(f"sentence {k} has {len(values)} trees but the log q file does not match",
                             f"{logq}:{logqs[k][0] if k in logqs else 1}")
        scores = logqs[k][1]
        if not all(is_number(x) for x in scores):
            raise InputError("log q values must be numbers", f"{logq}:{logqs[k][0]}")
        top = parse_tree(values[max(range(len(values)), key=lambda j: scores[j])], f"{proposals}:{number}")
        best.setdefault(tuple(clean(top).leaves()), top)
    return best


def evaluate(chosen: ChosenScorer, model_path: str | Path, gold: Sentences, proposals_path: Path, n: int,
             logq: Path | None, limit: int | None, out: str | Path | None = None) -> tuple[dict[str, Any], int]:
    proposals = ProposalFile(proposals_path)
    sets = [distinct(trees, n) for trees in proposals(gold.words)]
    settings = {**chosen.settings, "gold": gold.name, "sentences": len(gold.words), "limit": limit,
                "evalb": "COLLINS.prm"}
    identity = {"task": "rerank", **chosen.identity, "gold": gold.name, "limit": limit,
                "data_sha256": gold.checksum()}
    out_dir = Path(out) if out is not None else default_out_dir(model_path, "rerank", identity)
    ids = [str(k) for k in range(len(gold.words))]

    def valid(r: Record) -> bool:
        return isinstance(r["tree"], str) and is_number(r["logprob"]) and isinstance(r["trees"], int)

    tags = [[t for _, t in tree.pos()] for tree in gold.trees]

    def compute(wanted: list[str]) -> list[Record]:
        scores = chosen.scorer.score([gold.words[int(i)] for i in wanted])
        return [{"id": i, "tree": line(s.best_tree, tags[int(i)]), "logprob": s.extra["best_logprob"],
                 "trees": s.extra["trees"], "marginal": s.total} for i, s in zip(wanted, scores)]

    cache = ItemCache(out_dir, valid, identity)
    cache.fill(ids, compute, chosen.chunk)
    items = cache.ordered(ids)
    gold_lines = [line(t) for t in gold.trees]
    reranked = [r["tree"] for r in items]

    def evalb(test: list[str]) -> dict:
        result = evaluate_lines(gold_lines, test, COLLINS, gold.name, "<reranked>").as_dict()
        return {"all": result["all"], "len40": result["len40"]}

    metrics: dict[str, Any] = {"reranked": evalb(reranked),
                               "oracle": evalb([oracle(t, s) for t, s in zip(gold.trees, sets)]),
                               "parser_1best": None, "proposals_per_sentence": sum(map(len, sets)) / len(sets)}
    data = {**chosen.data}
    if logq is not None:
        best = parser_one_best(proposals_path, logq)
        missing = [k for k, w in enumerate(gold.words) if tuple(w) not in best]
        if missing:
            raise InputError(f"no log q proposals for gold sentence {missing[0]}", str(logq))
        metrics["parser_1best"] = evalb([line(best[tuple(w)], t) for w, t in zip(gold.words, tags)])
        data["logq"] = logq
        settings["logq_sha256"] = file_sha256(logq)
    f1 = metrics["reranked"]["all"]["bracket_f1"]
    one_best = metrics["parser_1best"]["all"]["bracket_f1"] if metrics["parser_1best"] else None
    headline = (f"rerank F1 {f1} (oracle {metrics['oracle']['all']['bracket_f1']}"
                f"{'' if one_best is None else f', parser 1-best {one_best}'}) on {len(items)} sentences of "
                f"{gold.name}, {chosen.description}, EVALB COLLINS.prm")
    metrics["headline"] = headline
    write_results(out_dir, "rerank", metrics, CONVENTION, settings, items, config=identity, data=data)
    atomic_write_text(out_dir / "reranked.txt", "".join(t + "\n" for t in reranked))
    result = {"metrics": metrics, "settings": settings, "convention": CONVENTION, "headline": headline,
              "out": str(out_dir)}
    return result, cache.computed


# -- synbench eval rerank ------------------------------------------------------------------------------------
def add_command(tasks: argparse._SubParsersAction) -> None:
    p = tasks.add_parser(
        "rerank", help="parse reranking of proposal trees by the joint model (EVALB F1)",
        description="Parse reranking (TG §3.2): for each gold sentence, the proposal with the highest "
                    "log p(x, y) under the joint model, scored with EVALB (COLLINS.prm) against the gold trees; "
                    "also the oracle F1 of the proposals and, with --logq, the proposal parser's own 1-best.")
    add_arguments(p, methods=("proposals",), proposals_required=True)
    p.add_argument("--gold", required=True, help="gold treebank file or CORPUS/SPLIT (e.g. ptb-sample/test)")
    p.add_argument("--logq", type=Path, metavar="FILE", help="log q(y|x) of the proposals (synbench propose --logq)")
    add_limit_argument(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    args.method = "proposals"
    gold = read_gold(args.gold, args.limit, args.data_dir)
    chosen = choose(args)
    if not chosen.joint:
        raise InputError(f"{chosen.family} is a string model: reranking needs a joint model p(x, y)", args.checkpoint)
    result, computed = evaluate(chosen, args.checkpoint, gold, args.proposals, chosen.options["n"], args.logq,
                                args.limit, args.out)
    return print_result(args.json, result, computed, result["settings"]["sentences"],
                        lambda r: bracket_report(r, ("reranked", "oracle", "parser_1best")))
