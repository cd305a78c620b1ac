"""Parsing with a Pushdown-LM (Murty et al. 2023, §5 and Table 4): unlabeled F1 against binarized gold trees.

The model's parse of a sentence is the best tree of its final beam over attachment decisions (approximately
argmax_y p(x, y); beam 300 in the paper), binary and unlabelled, over words (subword pieces merged as in
Appendix C; ``scorers.pushdown``). The gold trees are binarized as the model's training trees are
(``encodings.pushdown.pushdown_tree``: unary chains collapsed, n-ary nodes right-factored) and unlabelled.
Both are scored with EVALB's unlabeled setting (``evalb.UNLABELED``: COLLINS.prm with LABELED 0, so
punctuation is deleted and the sentence span counts), the parse carrying the gold POS tags EVALB needs.

As in the paper, sentences with words the model cannot represent are left out (``unknown``): by default for
SentencePiece vocabularies (a piece outside the vocabulary, §5: "trained without any UNK tokens"); word-level
vocabularies model unknown words with their unknown-word classes, so their sentences are kept unless
``unknown=exclude``. The right-branching tree of each evaluated sentence, scored the same way, is reported
beside (the usual trivial baseline for unlabeled F1).

Items are sentences (the parse and its log p(x, y), and the beam's log p(x) bound), cached in ``items.jsonl``;
the parses and the binarized gold trees are also written one per line (``parsed.txt``, ``gold.txt``),
ready for ``synbench evalb --param unlabeled``.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from experiments.evaluate.cache import ItemCache, Record, default_out_dir, is_number
from experiments.evaluate.evalb import UNLABELED, evaluate_lines
from experiments.evaluate.ppl import Sentences
from experiments.evaluate.proposals import with_tags
from experiments.evaluate.results import write_results
from experiments.evaluate.scorer_choice import ChosenScorer
from lightning_modules.data.atomic import atomic_write_text
from lightning_modules.data.encodings.pushdown import UNLABELLED, Node, attachments_to_tree, pushdown_tree, unlabelled
from lightning_modules.data.tree import Tree, parse_tree, to_bracketed
from lightning_modules.errors import InputError

UNKNOWN = ("default", "exclude", "keep")
CONVENTION = ("model parse = the highest log p(x, y) tree of the final beam over attachment decisions, subword "
              "pieces merged (Appendix C); EVALB unlabeled (COLLINS.prm with LABELED 0: punctuation and TOP "
              "deleted) against gold trees binarized as in training (unaries collapsed, right-factored), both "
              "with the gold POS tags")


def binarized_gold(tree: Tree) -> str:
    """The EVALB line of a (cleaned) gold tree as the model is trained on it: binarized, unlabelled, tagged."""
    return tagged(unlabelled(pushdown_tree(tree)), [t for _, t in tree.pos()])


def right_branching(words: Sequence[str]) -> Node:
    """``(w1 (w2 (... wn)))``: every word shifts and the end of the sentence closes the stack."""
    return attachments_to_tree([0, *range(1, len(words) + 1), 0], words)


def tagged(tree: Node, tags: Sequence[str]) -> str:
    """An unlabelled tree over words as an EVALB line, each word under its tag (a lone word under ``X``)."""
    return to_bracketed(with_tags(tree if isinstance(tree, Tree) else Tree(UNLABELLED, (tree,)), tags))


def excluded(model: Any, sentences: Sentences, unknown: str) -> list[bool]:
    """Per sentence: whether it is left out for unknown words (module docstring)."""
    if unknown not in UNKNOWN:
        raise InputError(f"expected one of {', '.join(UNKNOWN)}, not {unknown!r}", "--unknown")
    drop = unknown == "exclude" or (unknown == "default" and model.vocab_kind == "sentencepiece")
    return [drop and any(model.is_unknown(w) for w in words) for words in sentences.words]


def evaluate(chosen: ChosenScorer, model_path: str | Path, gold: Sentences, unknown: str, limit: int | None,
             out: str | Path | None = None) -> tuple[dict[str, Any], int]:
    if chosen.family != "pushdown":
        raise InputError(f"a {chosen.family} checkpoint does not parse: parsing needs a pushdown checkpoint "
                         "(its beam over attachment decisions)", str(model_path))
    left_out = excluded(chosen.scorer.model, gold, unknown)
    kept = [k for k, drop in enumerate(left_out) if not drop]
    if not kept:
        raise InputError(f"every sentence of {gold.name} has unknown words (see --unknown)", "--unknown")
    settings = {**chosen.settings, "gold": gold.name, "sentences": len(kept), "excluded_unknown": len(gold.words)
                - len(kept), "unknown": unknown, "limit": limit, "evalb": "unlabeled (COLLINS.prm, LABELED 0)"}
    identity = {"task": "parse", **chosen.identity, "gold": gold.name, "limit": limit, "unknown": unknown,
                "data_sha256": gold.checksum()}
    out_dir = Path(out) if out is not None else default_out_dir(model_path, "parse", identity)
    tags = [[t for _, t in tree.pos()] for tree in gold.trees]

    def valid(r: Record) -> bool:
        return isinstance(r["tree"], str) and is_number(r["logprob"]) and is_number(r["marginal"])

    def compute(wanted: list[str]) -> list[Record]:
        scores = chosen.scorer.score([gold.words[int(i)] for i in wanted])
        return [{"id": i, "tree": tagged(_tree(s.best_tree), tags[int(i)]), "logprob": s.extra["best_logprob"],
                 "marginal": s.total} for i, s in zip(wanted, scores)]

    ids = [str(k) for k in kept]
    cache = ItemCache(out_dir, valid)
    cache.fill(ids, compute, chosen.chunk)
    items = cache.ordered(ids)
    gold_lines = [binarized_gold(gold.trees[k]) for k in kept]
    parsed = [r["tree"] for r in items]
    baseline = [tagged(right_branching(gold.words[k]), tags[k]) for k in kept]

    def evalb(test: list[str]) -> dict:
        result = evaluate_lines(gold_lines, test, UNLABELED, f"{gold.name} (binarized)", "<parsed>").as_dict()
        return {"all": result["all"], "len40": result["len40"]}

    metrics: dict[str, Any] = {"parsed": evalb(parsed), "right_branching": evalb(baseline)}
    f1 = metrics["parsed"]["all"]["bracket_f1"]
    headline = (f"unlabeled F1 {f1} (right-branching {metrics['right_branching']['all']['bracket_f1']}) on "
                f"{len(kept)} sentences of {gold.name} ({settings['excluded_unknown']} left out for unknown "
                f"words), {chosen.description}, EVALB unlabeled vs binarized gold")
    metrics["headline"] = headline
    write_results(out_dir, "parse", metrics, CONVENTION, settings, items, config=identity, data=dict(chosen.data))
    atomic_write_text(out_dir / "parsed.txt", "".join(t + "\n" for t in parsed))
    atomic_write_text(out_dir / "gold.txt", "".join(t + "\n" for t in gold_lines))
    result = {"metrics": metrics, "settings": settings, "convention": CONVENTION, "headline": headline,
              "out": str(out_dir)}
    return result, cache.computed


def _tree(bracketed: str) -> Node:
    """The scorer's best tree: a bracketed unlabelled tree, or a lone word."""
    return parse_tree(bracketed) if bracketed.startswith("(") else bracketed
