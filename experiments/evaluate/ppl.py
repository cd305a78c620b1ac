"""Word perplexity of a corpus split (TG §3.1): ``PPL = exp(-Σ_x log p(x) / N_w)``, sentence-level.

``N_w`` counts the words of the evaluated sentences (the end of a sentence is not a word), while ``log p(x)``
includes the end of the sentence: ``log p(</s> | x)`` for string models, the closing of the constituents still
open after the last word for joint models — the probability of the whole string, as TG §3.1 defines it. For
string models the value is exact; for joint models ``log p(x) >= log Σ_{y ∈ Y'} p(x, y)`` (proposals, beam,
or the gold tree alone), so the perplexity is an upper bound. Two other conventions are reported beside:
without the end-of-sentence term (``word_ppl_without_end``), and with the end of every scored string counted
as a token as well as summed (``ppl_end_counted`` = exp(-Σ log p(x) / (N_w + end_tokens)), one end token per
item: Kim et al. (2019)'s convention, whose RNNLM/RNNG/URNNG perplexities papers such as SOM's Table 3 quote).

Items are sentences (``items.jsonl``: log p(x) or its bound, the end term, words, unknown words), cached by
the task identity (``cache.py``).

**Document-level checkpoints** (``data.level=document``; TG §3.1) are evaluated document by document: items
are the corpus's documents (a PTB ``.mrg`` file, a treebank file; with ``--limit`` the last document is cut
after the limit's last sentence and scored as a shorter document), ``log p(x)`` is the sum of its sentences'
log p(x_i | previous sentences) from the family's document scorer (``score_documents``) — exact for string
models (``</s>`` once, at the end of the document: the only end term), a lower bound for joint models (TG
§3.1's greedy single-path prefix; the closing of the document counted with the last sentence; each
sentence's end term is the closing after its last word). ``N_w`` still counts words.
"""

from __future__ import annotations

import argparse
import hashlib
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from experiments.evaluate.cache import ItemCache, Record, default_out_dir
from experiments.evaluate.infinite import is_json_value, to_json
from experiments.evaluate.results import write_results
from experiments.evaluate.scorer import OFFICIAL
from experiments.evaluate.scorer_choice import ChosenScorer, add_arguments, choose
from experiments.evaluate.subcommands import add_limit_argument, print_result
from lightning_modules.data.dependency import DepTree
from lightning_modules.data.tree import Tree


@dataclass(frozen=True)
class Sentences:
    """The evaluated sentences of a corpus split (cleaned: no ``-NONE-``), with their gold trees."""

    name: str  # "CORPUS/SPLIT"
    words: list[list[str]]
    trees: list[Tree] | list[DepTree]  # gold trees: constituency, or dependency for a dependency corpus
    locations: list[str]
    documents: list[int]  # document index of each sentence (documents of the split, in order)
    tags: list[list[str]] | None = None  # POS tags (constituency: preterminals; dependency: XPOS, else UPOS)

    def checksum(self) -> str:
        text = "\n".join(" ".join(w) for w in self.words)
        return hashlib.sha256(text.encode("utf-8")).hexdigest()

    def gold_source(self):
        """``--method gold``: each sentence's tree from the corpus (matched by words), constituency or dependency
        as the corpus has them (a family that reads the other kind says so)."""
        by_words: dict[tuple[str, ...], Tree | DepTree] = {}
        for words, tree in zip(self.words, self.trees):
            by_words.setdefault(tuple(words), tree)
        return lambda sentences: [[by_words[tuple(s)]] for s in sentences]


def read_sentences(corpus: str, split: str, limit: int | None = None, data_dir: str | None = None,
                   trees: bool = False, tree_kind: str | None = "constituency") -> Sentences:
    """The first ``limit`` (default all) sentences of a corpus split with their gold trees (a treebank's
    constituency trees, a dependency corpus's dependency trees) and POS tags; ``trees`` requires trees of
    ``tree_kind`` (None: whichever the corpus has)."""
    from lightning_modules.data.corpora import read_split

    loaded, read = read_split(corpus, split, limit, data_dir, tree_kind if trees else None)
    return Sentences(f"{loaded.name}/{split}", [s.words for s in read], [s.tree for s in read],  # type: ignore[misc]
                     [s.location for s in read], [s.document for s in read], [s.tags for s in read])


def words_sha256(words: Sequence[Sequence[str]]) -> str:
    """The evaluated words' fingerprint: two corpora of the same sentences (a treebank and its dependency
    conversions) are the same items for the statistics (``analysis.aggregate``)."""
    return hashlib.sha256("\n".join(" ".join(w) for w in words).encode("utf-8")).hexdigest()


def evaluate(chosen: ChosenScorer, model_path: str | Path, sentences: Sentences, limit: int | None,
             out: str | Path | None = None) -> tuple[dict[str, Any], int]:
    """Score the sentences (only those missing from the cache) and write the results.

    Returns ``(result, computed)``: the printed result object and the number of sentences scored now.
    """
    settings = {**chosen.settings, "corpus": sentences.name, "sentences": len(sentences.words),
                "limit": limit, "level": chosen.level, "words_sha256": words_sha256(sentences.words)}
    identity = {"task": "ppl", **chosen.identity, "corpus": sentences.name, "limit": limit,
                "data_sha256": sentences.checksum()}
    out_dir = Path(out) if out is not None else default_out_dir(model_path, "ppl", identity)
    # items: sentences, or documents (lists of sentence indices) for a document-level checkpoint
    groups = ([[k] for k in range(len(sentences.words))] if chosen.level == "sentence" else
              [[k for k, d in enumerate(sentences.documents) if d == doc]
               for doc in dict.fromkeys(sentences.documents)])
    ids = [str(k) for k in range(len(groups))]
    lengths = {str(k): sum(len(sentences.words[s]) for s in g) for k, g in enumerate(groups)}

    # a scorer of one given tree per sentence splits log p(x, y); records cached before the split are redone
    splits = getattr(chosen.scorer, "splits_structure", False)

    def valid(r: Record) -> bool:
        return (r["words"] == lengths.get(r["id"]) and is_json_value(r["logprob"])
                and is_json_value(r["end_logprob"]) and isinstance(r["unknown_words"], int)
                and (not splits or ("structure_logprob" in r and is_json_value(r["structure_logprob"]))))

    def compute(wanted: list[str]) -> list[Record]:
        if chosen.level == "sentence":
            scores = [[s] for s in chosen.scorer.score([sentences.words[int(i)] for i in wanted])]
        else:
            scores = chosen.scorer.score_documents(  # type: ignore[attr-defined]
                [[sentences.words[s] for s in groups[int(i)]] for i in wanted])
        records = []
        for i, item in zip(wanted, scores):
            record = {"id": i, "location": sentences.locations[groups[int(i)][0]],
                      "words": sum(len(s.words) for s in item),
                      "logprob": to_json(math.fsum(s.total for s in item), -math.inf),
                      "end_logprob": to_json(math.fsum(s.end_logprob for s in item), -math.inf),
                      "unknown_words": sum(s.unknown_words for s in item)}
            structure = [s.extra.get("structure_logprob") for s in item]
            if all(v is not None for v in structure):  # one given tree per sentence: its structure's share
                record["structure_logprob"] = to_json(math.fsum(structure), -math.inf)
            official = [s.extra.get(OFFICIAL) for s in item]
            if all(v is not None for v in official):  # the family's official convention, beside the common one
                record[OFFICIAL] = to_json(math.fsum(official), -math.inf)
            if chosen.level == "document":
                record["sentences"] = len(item)
            records.append(record)
        return records

    cache = ItemCache(out_dir, valid, identity)
    cache.fill(ids, compute, chosen.chunk)
    items = cache.ordered(ids)
    metrics = perplexity(items)
    convention = describe(chosen, metrics["words"])
    bound = "<= " if chosen.joint else ""
    documents = f" in {len(items)} documents" if chosen.level == "document" else ""
    zero = metrics["zero_probability_sentences"]
    value = "inf" if metrics["word_ppl"] is None else f"{metrics['word_ppl']:.2f}"
    headline = (f"PPL {bound}{value}{f' ({zero} of probability 0 under the search)' if zero else ''} on "
                f"{metrics['sentences']} sentences{documents} of "
                f"{sentences.name} ({metrics['words']} words{', first ' + str(limit) if limit else ''}), "
                f"{chosen.description}, {chosen.level}-level, end of sentence in log p(x) but not in the word "
                "count")
    write_results(out_dir, "ppl", {**metrics, "headline": headline}, convention, settings, items,
                  config=identity, data=chosen.data)
    result = {"metrics": metrics, "settings": settings, "convention": convention, "headline": headline,
              "out": str(out_dir)}
    return result, cache.computed


def perplexity(items: Sequence[Record]) -> dict[str, Any]:
    """Word perplexity with and without the end-of-sentence term, OOV rate (``math.fsum``: order-free). An item
    of probability 0 under the search (log p(x) -inf, ``null``: ``infinite.py``) makes every perplexity (and the
    log-prob) infinite, ``null``; ``zero_probability_sentences`` counts such items."""
    words = sum(r["words"] for r in items)
    unknown = sum(r["unknown_words"] for r in items)
    sentences = sum(r.get("sentences", 1) for r in items)  # document items say how many sentences they hold
    ends = len(items)  # one end of sentence (of document, for document items) per scored string
    zero = sum(r["logprob"] is None for r in items)
    counts = {"end_tokens": ends, "sentences": sentences, "words": words, "unknown_words": unknown,
              "oov_rate": unknown / words, "zero_probability_sentences": zero}
    if zero:
        return {"word_ppl": None, "word_ppl_without_end": None, "ppl_end_counted": None, "nll_per_word": None,
                "logprob": None, **counts}
    logprob = math.fsum(r["logprob"] for r in items)
    without_end = logprob - math.fsum(r["end_logprob"] for r in items)
    out = {"word_ppl": math.exp(-logprob / words), "word_ppl_without_end": math.exp(-without_end / words),
           "ppl_end_counted": math.exp(-logprob / (words + ends)), "nll_per_word": -logprob / words,
           "logprob": logprob, **counts}
    structure = [r.get("structure_logprob") for r in items]
    if all(isinstance(v, float) for v in structure):  # scored on one given tree each: log p(x, y) split in two
        total = math.fsum(structure)
        out["structure_nll_per_word"] = -total / words
        out["word_ppl_given_tree"] = math.exp(-(logprob - total) / words)
    official = [r.get(OFFICIAL) for r in items]
    if all(isinstance(v, float) for v in official):  # a scorer that also gives its official code's log p(x)
        out["word_ppl_official"] = math.exp(-math.fsum(official) / words)
    return out


def describe(chosen: ChosenScorer, words: int) -> str:
    """The one-sentence convention recorded in results.json."""
    end = ("the closing of the constituents open after the last word" if chosen.joint
           else "log p(</s> | x)")
    included = (f"log p(x) includes the end of the sentence ({end})" if chosen.scorer.convention.end_of_sentence
                else "log p(x) has no end-of-sentence term (the model's convention)")
    level = "sentence-level" if chosen.level == "sentence" else (
        "document-level, greedy single-path prefix: log p(x_i | previous sentences) with the previous "
        "sentences' chosen trees (DOC) counted with the last sentence)" if chosen.joint else
        "document-level: log p(x_i | previous sentences), exact, </s> once at the end of the document")
    kind = ("an upper bound: log p(x) >= log Σ_{y in Y'} p(x, y), Y' = " + chosen.description if chosen.joint
            else "exact" if chosen.scorer.convention.method == "exact" else chosen.description)
    return (f"word perplexity exp(-Σ_x log p(x) / N_w), N_w = {words} words (the end of sentence is not "
            f"counted; ppl_end_counted counts one end token per scored string as well, Kim et al. 2019); "
            f"{included}; {kind}; {level}")


def format_report(result: dict[str, Any]) -> str:
    m = result["metrics"]
    def value(x: float | None) -> str:
        return "inf" if x is None else f"{x:.4f}"

    lines = [f"{'word perplexity':28} {value(m['word_ppl'])}",
             f"{'without end of sentence':28} {value(m['word_ppl_without_end'])}",
             f"{'end of sentence counted':28} {value(m['ppl_end_counted'])}",
             f"{'sentences / words':28} {m['sentences']} / {m['words']}",
             f"{'of probability 0':28} {m['zero_probability_sentences']}",
             f"{'OOV rate':28} {m['oov_rate']:.4f}",
             f"convention: {result['convention']}",
             result["headline"]]
    return "\n".join(lines) + "\n"


# -- synbench eval ppl ---------------------------------------------------------------------------------------
def add_command(tasks: argparse._SubParsersAction) -> None:
    p = tasks.add_parser(
        "ppl", help="word perplexity of a treebank split (exact or a bound)",
        description="Word perplexity exp(-Σ log p(x) / words) of a corpus split, sentence-level (TG §3.1). "
                    "log p(x) includes the end of the sentence; the denominator counts words only. Exact for "
                    "string models (TXL (terminals), n-gram JSON models), an upper bound for joint models "
                    "(--method gold|proposals|beam; beam by default). Document-level checkpoints (data.level=document) "
                    "are scored document by document: exact for TXL (terminals); --method gold|proposals with TG "
                    "§3.1's greedy single-path prefix for joint models.")
    add_arguments(p)
    p.add_argument("--corpus", default="ptb-sample", help="corpus name or treebank file (default ptb-sample)")
    p.add_argument("--split", default="valid", help="split (default valid; 'file' for a treebank file)")
    add_limit_argument(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    sentences = read_sentences(args.corpus, args.split, args.limit, args.data_dir)
    chosen = choose(args, gold=sentences.gold_source(), documents=True)
    result, computed = evaluate(chosen, args.checkpoint, sentences, args.limit, args.out)
    items = len(set(sentences.documents)) if chosen.level == "document" else result["metrics"]["sentences"]
    return print_result(args.json, result, computed, items, format_report)  # items: sentences, or documents
