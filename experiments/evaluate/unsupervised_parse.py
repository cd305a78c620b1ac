"""Unsupervised-parsing F1 (``eval unsupervised-f1``) as the grammar-induction literature computes it (PRPN,
ON-LSTM, PaLM Table 3, URNNG), with the branching statistics of PaLM Table 4. For any model whose family has
the ``parse`` capability (its scorer's ``best_tree``).

Protocol (the ON-LSTM / PaLM evaluation scripts):
- punctuation is removed from the gold trees (preterminals tagged ``, . : `` '' -LRB- -RRB-``, with the
  constituents left empty) and the model parses the remaining words; sentences longer than ``max_length``
  words after that are left out (WSJ-40: 40; WSJ-10: 10; None keeps all);
- a tree's brackets are its constituents over more than one word except the whole sentence (trivial spans
  dropped), as a set (unary chains count once);
- per sentence, precision = |pred ∩ gold| / |pred| and recall = |pred ∩ gold| / |gold|, with recall 1 when
  the gold tree has no bracket and precision 1 when neither has one; F1 = 2PR / (P + R). **Sentence F1** is the
  mean over sentences (the headline, as those papers report); **corpus F1** pools the brackets of all sentences;
- **splits** (Table 4): every node of the model's binary tree over three or more words is a left-branching
  split ([i, j] into [i, j−1] and j), a right-branching one (i and [i+1, j]) or neither; percentages of all
  such nodes (trivial splits of two-word spans excluded). A node with more children (a family whose parses
  are not binary) is a left split when only its last child is a single word, a right split when only its
  first is. The gold row uses the gold trees binarized as
  nltk's right-factored ``chomsky_normal_form`` (PaLM's official preprocessing); beside it the unbinarized
  gold trees (``gold_splits_nary``: an n-ary node is a left split when only its last child is a single word,
  a right split when only its first is), since the convention moves the row a lot (PTB sample test, <= 40
  words: CNF 2.3 / 69.7, unbinarized 3.8 / 55.4; the paper's Table 4 gold row: 6.5 / 52.7).
Baselines scored beside: right- and left-branching trees.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from experiments.evaluate.cache import ItemCache, Record, default_out_dir
from experiments.evaluate.ppl import Sentences
from experiments.evaluate.results import write_results
from experiments.evaluate.scorer_choice import ChosenScorer, add_arguments, choose
from experiments.evaluate.subcommands import add_limit_argument, print_result
from lightning_modules.data.mikolov import strip_punctuation
from lightning_modules.data.transforms import binarize
from lightning_modules.data.tree import Tree, nontrivial_spans, parse_tree
from lightning_modules.errors import InputError
from lightning_modules.numeric import is_number

CONVENTION = ("unsupervised-parsing F1 (ON-LSTM/PaLM scripts): punctuation removed from the gold trees by POS, "
              "trivial spans (single words, the whole sentence) dropped, bracket sets; sentence-level F1 "
              "averaged over sentences (recall 1 for a gold tree without brackets, precision 1 too when the "
              "parse has none), corpus F1 from pooled brackets; splits of the model's binary trees over 3+ words")

Spans = set[tuple[int, int]]


def sentence_scores(predicted: Spans, gold: Spans) -> tuple[float, float, float]:
    """(precision, recall, F1) of one sentence, with the conventions of the module docstring."""
    overlap = len(predicted & gold)
    precision = overlap / len(predicted) if predicted else 0.0
    recall = overlap / len(gold) if gold else 1.0
    if not gold and not predicted:
        precision = 1.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return precision, recall, f1


def splits(tree: Tree) -> tuple[int, int, int]:
    """(left-branching, right-branching, all) splits of the nodes over three or more words with two or more
    children. A node is a left split when only its last child is a single word, a right split when only its
    first is (for a binary node: [i, j−1] + j and i + [i+1, j])."""
    left = right = total = 0
    for node in tree.subtrees():
        if len(node.children) < 2 or len(node.leaves()) < 3:
            continue
        total += 1
        first, last = (isinstance(c, str) or len(c.leaves()) == 1 for c in (node.children[0], node.children[-1]))
        left += last and not first
        right += first and not last
    return left, right, total


def branching(words: Sequence[str], right: bool) -> Tree:
    """The right- (or left-) branching binary tree over ``words``."""
    if len(words) == 1:
        return Tree("X", (words[0],))
    node: Tree | str = words[-1] if right else words[0]
    for word in (reversed(words[:-1]) if right else words[1:]):
        node = Tree("X", (word, node) if right else (node, word))
    assert isinstance(node, Tree)
    return node


def summarize(predicted: Sequence[Spans], gold: Sequence[Spans], trees: Sequence[Tree] | None = None
              ) -> dict[str, Any]:
    """Sentence and corpus F1 (in %) of bracket sets, and the split percentages of ``trees`` when given."""
    rows = [sentence_scores(p, g) for p, g in zip(predicted, gold)]
    matched = sum(len(p & g) for p, g in zip(predicted, gold))
    n_pred, n_gold = sum(len(p) for p in predicted), sum(len(g) for g in gold)
    cp = matched / n_pred if n_pred else 0.0
    cr = matched / n_gold if n_gold else 0.0
    out: dict[str, Any] = {
        "sentences": len(rows),
        "sentence_f1": 100 * sum(r[2] for r in rows) / len(rows) if rows else None,
        "sentence_precision": 100 * sum(r[0] for r in rows) / len(rows) if rows else None,
        "sentence_recall": 100 * sum(r[1] for r in rows) / len(rows) if rows else None,
        "corpus_f1": 100 * 2 * cp * cr / (cp + cr) if cp + cr else 0.0,
        "corpus_precision": 100 * cp, "corpus_recall": 100 * cr,
    }
    if trees is not None:
        out.update(split_percentages(trees))
    return out


def split_percentages(trees: Sequence[Tree]) -> dict[str, float | None]:
    counts = [splits(t) for t in trees]
    total = sum(c[2] for c in counts)
    return {"left_splits_pct": 100 * sum(c[0] for c in counts) / total if total else None,
            "right_splits_pct": 100 * sum(c[1] for c in counts) / total if total else None}


def gold_view(tree: Tree) -> Tree | None:
    """A cleaned gold tree without punctuation (None: nothing but punctuation)."""
    return strip_punctuation(tree)


def evaluate(chosen: ChosenScorer, model_path: str | Path, gold: Sentences, max_length: int | None,
             limit: int | None, out: str | Path | None = None) -> tuple[dict[str, Any], int]:
    """Score the model's parses of the punctuation-free gold sentences (module docstring)."""
    if "parse" not in chosen.capabilities:
        raise InputError(f"a {chosen.family} model does not parse (its family has no parse capability)",
                         str(model_path))
    if gold.trees is None:
        raise InputError(f"{gold.name} has no constituency trees", "--gold")
    if max_length is not None and max_length < 1:
        raise InputError("must be at least 1", "--max-length")
    kept: list[tuple[int, Tree]] = []
    for k, tree in enumerate(gold.trees):
        view = gold_view(tree)
        if view is not None and (max_length is None or len(view.leaves()) <= max_length):
            kept.append((k, view))
    if not kept:
        raise InputError(f"no sentence of {gold.name} has 1..{max_length} words without punctuation", "--gold")
    settings = {**chosen.settings, "gold": gold.name, "max_length": max_length, "limit": limit,
                "sentences": len(kept)}
    identity = {"task": "unsupervised-f1", **chosen.identity, "gold": gold.name, "limit": limit,
                "max_length": max_length, "data_sha256": gold.checksum()}
    out_dir = Path(out) if out is not None else default_out_dir(model_path, "unsupervised-f1", identity)
    words = {str(k): tree.leaves() for k, tree in kept}

    def valid(r: Record) -> bool:
        return isinstance(r["tree"], str) and is_number(r["logprob"])

    def compute(wanted: list[str]) -> list[Record]:
        scores = chosen.scorer.score([words[i] for i in wanted])
        out = []
        for i, s in zip(wanted, scores):
            if s.best_tree is None:
                raise InputError(f"the {chosen.family} scorer gave no tree", str(model_path))
            out.append({"id": i, "tree": s.best_tree, "logprob": s.total})
        return out

    ids = [str(k) for k, _ in kept]
    cache = ItemCache(out_dir, valid, identity)
    cache.fill(ids, compute, chosen.chunk)
    items = cache.ordered(ids)
    parsed = [_over_words(r["tree"], words[r["id"]]) for r in items]
    gold_spans = [nontrivial_spans(tree) for _, tree in kept]
    metrics: dict[str, Any] = {"parsed": summarize([nontrivial_spans(t) for t in parsed], gold_spans, parsed)}
    for name, right in (("right_branching", True), ("left_branching", False)):
        trees = [branching(tree.leaves(), right) for _, tree in kept]
        metrics[name] = summarize([nontrivial_spans(t) for t in trees], gold_spans)
    metrics["gold_splits"] = split_percentages([binarize(tree) for _, tree in kept])
    metrics["gold_splits_nary"] = split_percentages([tree for _, tree in kept])
    p = metrics["parsed"]
    metrics["headline"] = (f"sentence F1 {p['sentence_f1']:.1f} (corpus {p['corpus_f1']:.1f}; right-branching "
                           f"{metrics['right_branching']['sentence_f1']:.1f}) on {len(kept)} sentences of "
                           f"{gold.name} (<= {max_length or 'any'} words without punctuation), splits "
                           f"{p['left_splits_pct'] or 0:.1f}% left / {p['right_splits_pct'] or 0:.1f}% right, "
                           f"{chosen.description}")
    write_results(out_dir, "unsupervised-f1", metrics, CONVENTION, settings, items, config=identity,
                  data=dict(chosen.data))
    return {"metrics": metrics, "settings": settings, "convention": CONVENTION, "headline": metrics["headline"],
            "out": str(out_dir)}, cache.computed


def _over_words(bracketed: str, words: Sequence[str]) -> Tree:
    """The model's tree (a bracketed tree over exactly ``words``, or a lone word)."""
    tree = parse_tree(bracketed, "<parse>") if bracketed.startswith("(") else Tree("X", (bracketed,))
    if tree.leaves() != list(words):
        raise InputError(f"the parse covers {tree.leaves()} instead of the sentence's words", "<parse>")
    return tree


# -- synbench eval unsupervised-f1 ---------------------------------------------------------------------------
def add_command(tasks: argparse._SubParsersAction) -> None:
    p = tasks.add_parser(
        "unsupervised-f1", help="unsupervised-parsing F1 of the model's own parses (sentence-level, WSJ-40 style)",
        description="The grammar-induction protocol (PRPN, ON-LSTM, PaLM Table 3): the model parses the gold "
                    "sentences without punctuation; brackets without trivial spans; F1 per sentence averaged "
                    "(corpus F1 beside); sentences longer than --max-length words (after punctuation removal) "
                    "left out; right- and left-branching baselines; % left/right splits of the model's and the "
                    "(binarized) gold trees (PaLM Table 4).")
    add_arguments(p, methods=("exact",))
    p.add_argument("--gold", required=True, help="gold treebank file or CORPUS/SPLIT (e.g. ptb-sample/test)")
    p.add_argument("--max-length", type=int, default=40,
                   help="longest sentence kept, in words without punctuation (default 40: WSJ-40; 0: all)")
    add_limit_argument(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from experiments.evaluate.rerank import read_gold

    gold = read_gold(args.gold, args.limit, args.data_dir)
    result, computed = evaluate(choose(args), args.checkpoint, gold, args.max_length or None, args.limit, args.out)
    return print_result(args.json, result, computed, result["settings"]["sentences"], format_report)


def format_report(result: dict) -> str:
    """Sentence and corpus F1 of the parses and of the two branching baselines, then the headline."""
    rows = []
    for name in ("parsed", "right_branching", "left_branching"):
        m = result["metrics"][name]
        rows.append(f"{name:15} sentence F1 {m['sentence_f1']:.2f}  corpus F1 {m['corpus_f1']:.2f}")
    return "\n".join(rows + [result["headline"]]) + "\n"
