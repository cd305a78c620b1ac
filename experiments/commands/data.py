"""``synbench data stats``: sentence, word and label counts of a corpus or treebank file, per split;
``synbench data convert``: constituency trees to CoNLL-U dependency trees (Collins, SD or UD)."""

from __future__ import annotations

import argparse
import json

STATS_DESCRIPTION = """\
Per split and in total: documents, sentences and words. Words are overt tokens (-NONE- empty elements
excluded) for bracketed trees and syntactic words (integer CoNLL-U IDs; multiword-token lines and empty nodes
excluded) for UD. For constituency corpora also, computed on the cleaned trees (-NONE- removed, function tags
and co-indices stripped, the root wrapper unwrapped): the label inventory as raw node counts of phrase labels
and POS tags, and max_depth, the largest tree height as nltk defines it (a preterminal has height 2).

CORPUS is a built-in corpus (ptb-sample, ud-ewt, ud-gum, ud-partut, ud-lines, ud-pud, ud-pronouns; staged by
`synbench prepare`), a treebank registered with `synbench prepare --treebank`, NAME-dep / NAME-sd / NAME-ud
for a constituency corpus NAME converted to dependencies (Collins head table / Stanford basic / Universal
Dependencies, as `synbench data convert` does), or a path to a bracketed or CoNLL-U file (split "file") or
to a directory of train/valid|dev/test files. JSON shape: {split: {"documents", "sentences", "words"[,
"max_depth", "phrase_labels", "pos_tags"]}, ..., "total": {...}}."""


SCHEMES = ("collins", "sd", "ud")
CONVERT_DESCRIPTION = """\
Print the trees of TREES as CoNLL-U on stdout, one sentence per tree in file order. FORM holds the overt
leaves exactly as written (-NONE- elements left out), XPOS their POS tags, HEAD and DEPREL the scheme's tree,
UPOS the universal tag (sd, ud: CoreNLP's mapping from the PTB tag; collins: PUNCT for unscored punctuation,
else _). Schemes: collins (the Collins head table of the NAME-dep corpora, relations root/dep), sd (Stanford
basic dependencies as CoreNLP's EnglishGrammaticalStructure -basic), ud (Universal Dependencies as CoreNLP's
UniversalEnglishGrammaticalStructure -basic). A malformed tree stops with its FILE:LINE (exit status 2)."""


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("data", help="inspect corpora (statistics)", description="Inspect corpora.")
    sub = p.add_subparsers(dest="data_command", required=True, metavar="COMMAND")
    stats = sub.add_parser(
        "stats",
        help="sentences, words, label inventory and max depth per split",
        description=STATS_DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    stats.add_argument("corpus", metavar="CORPUS|FILE", help="corpus name, or a treebank file or directory")
    stats.add_argument("--json", action="store_true", help="print JSON instead of a table")
    stats.add_argument(
        "--data-dir", metavar="DIR", help="data directory (default: $SYNBENCH_DATA or ~/.cache/synbench/data)"
    )
    stats.set_defaults(func=run_stats)
    convert = sub.add_parser(
        "convert",
        help="constituency trees to CoNLL-U dependency trees (collins, sd, ud)",
        description=CONVERT_DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    convert.add_argument("trees", metavar="TREES", help="a file of bracketed trees (.mrg, one or more per line)")
    convert.add_argument("--scheme", required=True, choices=SCHEMES, help="the dependency scheme")
    convert.set_defaults(func=run_convert)


def run_stats(args: argparse.Namespace) -> int:
    from lightning_modules.data.corpora import corpus_stats, load_corpus

    corpus = load_corpus(args.corpus, args.data_dir)
    stats = corpus_stats(corpus)
    if args.json:
        print(json.dumps(stats, indent=1))
    else:
        _print_table(corpus.name, corpus.kind, stats)
    return 0


def _print_table(name: str, kind: str, stats: dict[str, dict]) -> None:
    from rich.console import Console
    from rich.table import Table

    constituency = kind == "constituency"
    table = Table(title=f"{name} ({kind})")
    columns = ["split", "documents", "sentences", "words"]
    if constituency:
        columns += ["phrase labels", "POS tags", "max depth"]
    for column in columns:
        table.add_column(column, justify="left" if column == "split" else "right")
    for split, counts in stats.items():
        row = [split, f"{counts['documents']:,}", f"{counts['sentences']:,}", f"{counts['words']:,}"]
        if constituency:
            row += [str(len(counts["phrase_labels"])), str(len(counts["pos_tags"])), str(counts["max_depth"])]
        table.add_row(*row, end_section=split == list(stats)[-2])
    console = Console()
    console.print(table)
    if constituency:
        for key, title in (("phrase_labels", "phrase labels"), ("pos_tags", "POS tags")):
            ranked = sorted(stats["total"][key].items(), key=lambda item: (-item[1], item[0]))
            console.print(f"{title} (total): " + ", ".join(f"{label} {n:,}" for label, n in ranked))


def run_convert(args: argparse.Namespace) -> int:
    import sys

    from lightning_modules.data.corpora import to_scheme
    from lightning_modules.data.dependency import to_conllu
    from lightning_modules.data.tree import read_bracketed
    from lightning_modules.errors import InputError

    out = []
    for line, tree in read_bracketed(args.trees):
        try:
            out.append(to_conllu(to_scheme(tree, args.scheme)))
        except InputError as e:
            raise InputError(e.message, e.location or f"{args.trees}:{line}") from None
    sys.stdout.write("".join(out))
    return 0
