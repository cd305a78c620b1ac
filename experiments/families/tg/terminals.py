"""Per-terminal log-probabilities on gold trees: the inputs of TG §4.2's regressions.

For every terminal a_i of a corpus split, log p(a_i | a_<i) under the model, teacher-forced on the gold
action sequence (joint models: the Choe–Charniak actions of the gold tree, so a_<i includes the gold
nonterminals; TXL (terminals): the words). This is the quantity of TG §4.2: Δ_i = log p_TG(a_i | a_<i) −
log p_TXL(trees)(a_i | a_<i). It is *not* a word probability p(w_i | w_<i) (the nonterminals before a word
are not marginalised): it compares how well two joint models predict a terminal in the same gold context.

One item per sequence the model reads: a sentence, or a document (all sentences of one corpus document,
``data.level=document``, wrapped as in training). Each item lists its terminal tokens in order with
``word`` (the corpus word the token belongs to), ``token`` (the vocabulary token: the word, its unknown-word
class, or a SentencePiece piece), ``sentence`` (index of the sentence within the item) and ``logprob``
(nats). ``unit`` is what the regressions count as "the terminal": the word for word-level vocabularies (the
unknown-word classes would pool every rare word into a frequent class), the piece for SentencePiece ones;
``train_count`` is the unit's count in the model's training split (``results.json`` has the total), from
which §4.2.1's unigram frequency buckets are drawn.
"""

from __future__ import annotations

import argparse
import math
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from experiments.cli_options import add_device_argument
from experiments.evaluate.cache import ItemCache, Record, default_out_dir
from experiments.evaluate.ppl import Sentences
from experiments.evaluate.results import write_results
from experiments.evaluate.subcommands import add_limit_argument, family_evaluation, print_result
from experiments.evaluate.tasks import COMMON_OPTIONS, CORPUS_OPTIONS, Task, corpus_split, register
from lightning_modules.data.checksums import file_sha256
from lightning_modules.data.encodings.choe_charniak import TokenType
from lightning_modules.data.tree import Tree, drop_pos_tags
from lightning_modules.errors import InputError
from lightning_modules.numeric import is_number

CONVENTION = ("log p(a_i | a_<i) in nats of every terminal token, teacher-forced on the gold action sequence "
              "(joint models: gold nonterminals in the context, not marginalised; TXL (terminals): the words); "
              "end-of-sequence tokens excluded")
BATCH = 16  # sequences per forward pass


def groups_of(sentences: Sentences, level: str) -> list[list[int]]:
    """Sentence indices of each item: one sentence, or the sentences of one corpus document."""
    if level == "sentence":
        return [[k] for k in range(len(sentences.words))]
    return [[k for k, d in enumerate(sentences.documents) if d == doc] for doc in dict.fromkeys(sentences.documents)]


def item_terminals(model: Any, trees: Sequence[Tree], level: str) -> tuple[list[dict[str, Any]], Any]:
    """(one dict per terminal token without its log-prob, the encoded example) of one item."""
    from lightning_modules.data.encodings.choe_charniak import transform_tree
    from lightning_modules.families.tg.data import actions_function

    pos_free = [transform_tree(drop_pos_tags(t), model.tree_transform) for t in trees]
    actions = actions_function(model.family, level, model.terminals)(pos_free)
    example = model.encode(actions)
    words = [w for t in trees for w in t.leaves()]
    sentence_of = [s for s, t in enumerate(trees) for _ in t.leaves()]
    # positions in the *encoded* sequence (TG duplicates closing nonterminals, so they differ from the actions')
    rows = []
    for j in range(1, len(example.tokens)):
        w = int(example.word_index[j])
        if example.types[j] != TokenType.T or w < 0:  # not a terminal, or </s>
            continue
        if w >= len(words) or example.labels[j - 1] != example.tokens[j]:
            raise InputError(f"terminal at position {j} is not predicted by position {j - 1}", "model encoding")
        rows.append({"position": j, "word": words[w], "token": model.vocab.tokens[int(example.tokens[j])],
                     "sentence": sentence_of[w]})
    if model.vocab_kind == "words" and len(rows) != len(words):
        raise InputError("the terminal sequence does not match the words", "model encoding")
    return rows, example


def evaluate(model_path: str | Path, sentences: Sentences, out: str | Path | None = None,
             data_dir: str | None = None, device: str = "cpu") -> tuple[dict[str, Any], int]:
    """Score every terminal of the split (only the items missing from the cache) on ``device``; write the
    results."""
    from experiments.families.tg.scorers import TGModel

    model = TGModel.load(str(model_path), device)
    level = model.level
    train_counts = Counter(training_units(model, data_dir))
    unit_of = (lambda row: row["word"]) if model.vocab_kind == "words" else (lambda row: row["token"])
    groups = groups_of(sentences, level)
    identity = {"task": "terminals", "model_sha256": file_sha256(model_path), "corpus": sentences.name,
                "level": level, "data_sha256": sentences.checksum()}
    out_dir = Path(out) if out is not None else default_out_dir(model_path, "terminals", identity)
    ids = [str(k) for k in range(len(groups))]
    counts = {str(k): sum(len(sentences.words[s]) for s in g) for k, g in enumerate(groups)}

    def valid(r: Record) -> bool:
        n = len(r["logprob"])
        return (len(r["word"]) == len(r["token"]) == len(r["sentence"]) == len(r["train_count"]) == n
                and all(is_number(x) and x <= 0 for x in r["logprob"])
                and (model.vocab_kind != "words" or n == counts[r["id"]]))

    def compute(wanted: list[str]) -> list[Record]:
        prepared = [item_terminals(model, [sentences.trees[s] for s in groups[int(i)]], level) for i in wanted]
        logprobs = model.label_logprobs([example for _, example in prepared])
        records = []
        for i, (rows, _), lp in zip(wanted, prepared, logprobs, strict=True):
            # label_logprobs[j] = log p(token j+1 | tokens <= j): the terminal at position p is entry p - 1
            values = [float(lp[r["position"] - 1]) for r in rows]
            records.append({"id": i, "location": sentences.locations[groups[int(i)][0]],
                            "word": [r["word"] for r in rows], "token": [r["token"] for r in rows],
                            "sentence": [r["sentence"] for r in rows], "logprob": values,
                            "train_count": [train_counts[unit_of(r)] for r in rows]})
        return records

    cache = ItemCache(out_dir, valid, identity)
    cache.fill(ids, compute, BATCH)
    items = cache.ordered(ids)
    n_terminals = sum(len(r["logprob"]) for r in items)
    total = math.fsum(x for r in items for x in r["logprob"])
    metrics = {"terminals": n_terminals, "items": len(items), "nll_per_terminal": -total / max(n_terminals, 1),
               "unit": "word" if model.vocab_kind == "words" else "piece",
               "train_units": sum(train_counts.values())}
    settings = {"family": model.family, "level": level, "corpus": sentences.name, "sentences": len(sentences.words),
                "unit": metrics["unit"], "tree_transform": model.tree_transform}
    headline = (f"{n_terminals} terminals of {sentences.name} ({len(items)} {level}s), mean log p(a_i | a_<i) "
                f"{-metrics['nll_per_terminal']:.4f} nats, gold trees, {model.family}")
    write_results(out_dir, "terminals", {**metrics, "headline": headline}, CONVENTION, settings, items,
                  config=identity)
    return {"metrics": metrics, "settings": settings, "convention": CONVENTION, "headline": headline,
            "out": str(out_dir)}, cache.computed


def training_units(model: Any, data_dir: str | None = None) -> list[str]:
    """Every terminal unit of the model's training split, in order (words, or SentencePiece pieces)."""
    from lightning_modules.data.corpora import load_corpus
    from lightning_modules.data.tree import clean

    data = model.config["data"]
    corpus = load_corpus(data["corpus"], data_dir or model.config.get("runtime", {}).get("data_dir"))
    words = [w for doc in corpus.splits[data["train_split"]] for _, tree in doc.sentences for w in clean(tree).leaves()]
    if model.vocab_kind == "words":
        return words
    return [piece for w in words for piece in model.terminals(w)]



# -- synbench eval terminals: a task of the TG family, registered here ---------------------------------------
def add_command(tasks: argparse._SubParsersAction) -> None:
    p = tasks.add_parser(
        "terminals", help="log p(a_i | a_<i) of every terminal on gold trees (TG §4.2 regressions)",
        description="Teacher-forced log-probability of every terminal token of a corpus split under a TG-family "
                    "checkpoint (joint models: on the gold trees' action sequences; TXL (terminals): on the "
                    "words), with each terminal's word, sentence and training-split count. Document-level "
                    "checkpoints read whole documents. The inputs of TG §4.2's frequency and copying "
                    "regressions (synbench analyze).")
    p.add_argument("checkpoint", help="TG-family checkpoint (RUN/checkpoints/best.ckpt)")
    add_device_argument(p)
    p.add_argument("--corpus", default="ptb-sample", help="corpus name or treebank file (default ptb-sample)")
    p.add_argument("--split", default="valid", help="split (default valid)")
    add_limit_argument(p)
    p.add_argument("--out", type=Path, metavar="DIR",
                   help="results folder (default: RUN_DIR/eval/terminals-HASH)")
    p.add_argument("--data-dir", help="data directory (default: $SYNBENCH_DATA or ~/.cache/synbench/data)")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """The family's ``terminals`` evaluation (``evaluate``, through the adapter's ``evaluations`` part)."""
    result, computed, total = family_evaluation("terminals", vars(args))
    return print_result(args.json, result, computed, total, lambda r: r["headline"] + "\n")


TASK = register(Task("terminals", "terminals", f"{__name__}:add_command", None,
                     options=COMMON_OPTIONS + CORPUS_OPTIONS, default_split="valid", arguments=corpus_split,
                     scored=False, methods=()))
