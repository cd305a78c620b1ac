"""Unlabeled and labeled attachment scores of dependency trees (CoNLL-U), as dependency parsers report them.

UAS = the fraction of scored words whose predicted head is the gold head; LAS = head and relation both
correct, the relation compared on its universal part (``nsubj:pass`` -> ``nsubj``, as the CoNLL 2018 shared
task scorer does). Scored words: every syntactic word except the punctuation of the named rule
``punctuation`` (PUNCTUATION_RULES, recorded with every score): by default ``ptb-tags``, the words whose
**gold** XPOS is a PTB punctuation tag (`` '' . , :), Chen & Manning (2014)'s rule that PTB dependency
parsing reports UAS under (DTG's Table 3: Biaffine parsers on PTB-SD). It reads the PTB tag, not the
scheme's UPOS, so a sentence's scored words are the same in every scheme (CoreNLP's UPOS also makes
-LRB- -RRB- PUNCT; a tree without XPOS has no word skipped); ``upos`` skips gold UPOS ``PUNCT`` (the UD
convention), ``none`` (``--punct``) scores every word. Micro-averaged over words; the per-sentence mean UAS
is reported too. Sentences are paired in file order; a different number of sentences or a different word
(form) in a pair is an error at the test file's ``FILE:LINE``.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from experiments.families import declared_defaults
from lightning_modules.data.dependency import DepTree, read_conllu
from lightning_modules.data.head_rules import UNSCORED_TAGS
from lightning_modules.errors import InputError

# The punctuation attachment scores skip, by name: what each rule scores.
PUNCTUATION_RULES = {
    "ptb-tags": "words whose gold XPOS is not a PTB punctuation tag (`` '' . , :)",
    "upos": "words whose gold UPOS is not PUNCT",
    "none": "every word",
}
DEFAULT_PUNCTUATION = "ptb-tags"


def convention(punctuation: str = DEFAULT_PUNCTUATION) -> str:
    return (f"UAS/LAS over {PUNCTUATION_RULES[punctuation]} (punctuation rule {punctuation}), micro-averaged "
            "over words; LAS compares the universal part of DEPREL (before ':')")


def _word_line(lines: list[str], sentence_line: int, word: int) -> int:
    """The line number of word ``word`` (1-based id) of the sentence starting at ``sentence_line``."""
    for number in range(sentence_line, len(lines) + 1):
        if lines[number - 1].split("\t", 1)[0] == str(word):
            return number
    return sentence_line


def attachment_scores(gold_path: str | Path, test_path: str | Path, punctuation: str = DEFAULT_PUNCTUATION
                      ) -> dict[str, Any]:
    """``{"uas", "las", "words", "sentences", ...}`` (percentages), checked sentence by sentence."""
    gold, test = read_conllu(gold_path), read_conllu(test_path)
    if len(gold) != len(test):
        raise InputError(f"{len(test)} sentences but the gold file {gold_path} has {len(gold)}",
                         f"{test_path}:{test[min(len(gold), len(test)) - 1][0]}")
    test_lines = Path(test_path).read_text(encoding="utf-8").splitlines() if len(gold) else []
    words = heads = labels = 0
    per_sentence = []
    for (_, g), (line, t) in zip(gold, test):
        _check_pair(g, t, test_lines, line, test_path)
        scored = scored_words(g, punctuation)
        head = [g.heads[i] == t.heads[i] for i in scored]
        words += len(scored)
        heads += sum(head)
        labels += sum(h and g.deprels[i].split(":")[0] == t.deprels[i].split(":")[0] for h, i in zip(head, scored))
        if scored:
            per_sentence.append(sum(head) / len(scored))
    return {
        "uas": 100.0 * heads / words if words else None,
        "las": 100.0 * labels / words if words else None,
        "uas_sentence_mean": 100.0 * sum(per_sentence) / len(per_sentence) if per_sentence else None,
        "sentences": len(gold),
        "words": words,
        "correct_heads": heads,
        "correct_labeled": labels,
        "punctuation": punctuation,
        "convention": convention(punctuation),
    }


def scored_words(gold: DepTree, punctuation: str = DEFAULT_PUNCTUATION) -> list[int]:
    """0-based indices of the words of a gold tree that the punctuation rule scores."""
    if punctuation == "ptb-tags":
        return [i for i in range(len(gold)) if (gold.xpos[i] if gold.xpos else "_") not in UNSCORED_TAGS]
    if punctuation == "upos":
        return [i for i in range(len(gold)) if (gold.upos[i] if gold.upos else "_") != "PUNCT"]
    return list(range(len(gold)))


def attachment_counts(gold: Sequence[DepTree], heads: Sequence[Sequence[int]],
                      punctuation: str = DEFAULT_PUNCTUATION) -> tuple[int, int]:
    """(scored words, words with the gold head) of predicted ``heads`` (1-based, 0 = root) per gold tree."""
    words = correct = 0
    for g, h in zip(gold, heads, strict=True):
        scored = scored_words(g, punctuation)
        words += len(scored)
        correct += sum(g.heads[i] == h[i] for i in scored)
    return words, correct


def _check_pair(gold: DepTree, test: DepTree, test_lines: list[str], line: int, test_path: str | Path) -> None:
    if len(gold) != len(test):
        raise InputError(f"{len(test)} words but the gold sentence has {len(gold)}", f"{test_path}:{line}")
    for i, (a, b) in enumerate(zip(gold.forms, test.forms), start=1):
        if a != b:
            raise InputError(f"word {i} is {b!r} but the gold word is {a!r}",
                             f"{test_path}:{_word_line(test_lines, line, i)}")


# -- synbench eval uas, synbench eval uas-rerank ----------------------------------------------------------------
def add_command(tasks: argparse._SubParsersAction) -> None:
    p = tasks.add_parser(
        "uas", help="unlabeled/labeled attachment scores of CoNLL-U dependency trees",
        description="UAS and LAS of TEST against GOLD (CoNLL-U, sentences paired in order). Punctuation "
                    "is excluded by the rule of --punctuation; LAS compares the universal part of DEPREL. "
                    "A sentence or word mismatch is an error at TEST:LINE.")
    p.add_argument("gold", help="gold CoNLL-U file")
    p.add_argument("test", help="predicted CoNLL-U file")
    p.add_argument("--punctuation", choices=tuple(PUNCTUATION_RULES), default=DEFAULT_PUNCTUATION,
                   help="which punctuation is not scored: ptb-tags (default), gold XPOS `` '' . , : (Chen & "
                        "Manning 2014, PTB dependency UAS); upos, gold UPOS PUNCT; none, every word scored")
    p.add_argument("--punct", dest="punctuation", action="store_const", const="none",
                   help="score punctuation too (--punctuation none)")
    p.add_argument("--out", type=Path, metavar="DIR", help="also write results.json here")
    p.add_argument("--json", action="store_true", help="print the scores as JSON")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from experiments.evaluate.results import write_results

    scores = attachment_scores(args.gold, args.test, args.punctuation)
    if args.out is not None:
        write_results(args.out, "uas", scores, scores["convention"], {"punctuation": args.punctuation},
                      config={"task": "uas", "punctuation": args.punctuation},
                      data={"gold": args.gold, "test": args.test})
    if args.json:
        json.dump(scores, sys.stdout, sort_keys=True)
        sys.stdout.write("\n")
    else:
        uas, las = (f"{x:.2f}" if x is not None else "-" for x in (scores["uas"], scores["las"]))
        print(f"UAS {uas}  LAS {las}  ({scores['words']} words, {scores['sentences']} sentences; "
              f"punctuation {scores['punctuation']})")
    return 0


def add_rerank_command(tasks: argparse._SubParsersAction) -> None:
    from experiments.cli_options import natural, positive_int
    from experiments.evaluate.subcommands import add_limit_argument

    p = tasks.add_parser(
        "uas-rerank", help="UAS of reranking N dependency proposals with a joint model (DTG Table 3)",
        description="For each sentence of a dependency corpus split, draw N distinct projective trees without "
                    "replacement from a dependency parser, score each with the joint model, log p(x, y), and "
                    "take its best: UAS against the gold trees (gold XPOS `` '' . , : not scored), beside the parser's "
                    "greedy UAS and the oracle UAS of the proposals. Writes results.json and reranked.conllu.")
    p.add_argument("checkpoint", help="a joint dependency model's checkpoint (a family with dependency_parse)")
    source = p.add_mutually_exclusive_group(required=True)
    source.add_argument("--parser", type=Path, metavar="CKPT", help="dependency parser checkpoint drawing the "
                        "proposals (the parser's UAS: its greedy parse)")
    source.add_argument("--proposals", type=Path, metavar="FILE", help="proposals file of a dependency parser "
                        "(synbench propose; the parser's UAS: each sentence's first tree)")
    p.add_argument("--corpus", default="ud-ewt", help="dependency corpus (default ud-ewt; NAME-sd, NAME-ud and "
                   "NAME-dep convert a constituency corpus to Stanford basic, Universal or Collins head-rule "
                   "dependencies: DTG's Table 3 reads ptb-sd)")
    p.add_argument("--split", default="test", help="split (default test)")
    add_limit_argument(p)
    p.add_argument("-n", type=positive_int, help="proposal trees per sentence (default: the family's paper's: "
                   f"{declared_defaults('n', 'proposals')})")
    p.add_argument("--parser-seed", type=natural, default=0, help="seed of the sampling without replacement")
    p.add_argument("--batch-size", type=positive_int, default=32, help="trees per forward pass (same results)")
    p.add_argument("--device", default="cpu", help="torch device of the model (default cpu)")
    p.add_argument("--out", type=Path, metavar="DIR", help="results folder (default RUN_DIR/eval/uas-rerank-HASH)")
    p.add_argument("--data-dir", help="data directory (default: $SYNBENCH_DATA or ~/.cache/synbench/data)")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.set_defaults(func=run_rerank)


def run_rerank(args: argparse.Namespace) -> int:
    """The model's family evaluates it (its ``dependency_parse`` evaluation)."""
    from experiments.evaluate.subcommands import family_evaluation, print_result

    result, computed, total = family_evaluation("dependency_parse", vars(args))
    return print_result(args.json, result, computed, total, lambda r: r["headline"] + "\n")
