"""``synbench propose CHECKPOINT (--corpus C --split S | --sentences FILE) -n N --out FILE``: proposal trees."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from experiments.commands.arguments import natural, positive_int


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "propose", help="draw N distinct proposal trees per sentence from a proposal-parser checkpoint",
        description="Draw N distinct trees per sentence from a trained proposal parser q(y|x): stochastic beam "
                    "search (--method sample: Gumbel-top-k, sampling without replacement; TG §3.1 uses N = 300) "
                    "or deterministic beam search (--method beam). Writes JSON lines, one per sentence: "
                    '{"sentence": k (0-based), "trees": [bracketed trees, most probable first]}, with the '
                    "treebank's POS tags over the words (XX for --sentences input); --logq FILE also writes "
                    '{"sentence": k, "logq": [log q(y|x) in nats]}.',
    )
    p.add_argument("checkpoint", help="a proposal-parser checkpoint (RUN_DIR/checkpoints/best.ckpt)")
    source = p.add_mutually_exclusive_group(required=True)
    source.add_argument("--corpus", help="corpus name or treebank file; its trees' words are parsed")
    source.add_argument("--sentences", type=Path, help="file with one tokenized sentence per line")
    p.add_argument("--split", help="corpus split (required with --corpus)")
    p.add_argument("-n", type=positive_int, default=300, help="trees per sentence (default 300, as TG §3.1)")
    p.add_argument("--method", choices=["sample", "beam"], default="sample",
                   help="sample: without replacement (default); beam: top-N beam search")
    p.add_argument("--seed", type=natural, default=0, help="sampling seed (per sentence: seed and its index)")
    p.add_argument("--max-rows", type=positive_int, default=2048,
                   help="search rows (sentences × N) decoded at once; lower it to save memory")
    p.add_argument("--data-dir", help="data directory (default: $SYNBENCH_DATA or ~/.cache/synbench/data)")
    p.add_argument("--out", type=Path, required=True, help="proposals file to write (JSON lines)")
    p.add_argument("--logq", type=Path, help="also write log q(y|x) of every tree here (JSON lines)")
    p.epilog = ("OUT.meta.json (OUT without its suffix) records the settings and, for --corpus, the parser's "
                "1-best bracket F1 and the oracle F1 of the first 1, 10, 100 and N trees (EVALB COLLINS.prm "
                "against the corpus trees): how tight a bound these proposals can give.")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from experiments.families.parser.proposals import (
        load_parser,
        propose,
        read_corpus_sentences,
        read_sentences,
        with_tags,
        write_proposals,
    )
    from lightning_modules.data.atomic import atomic_write_text
    from lightning_modules.errors import InputError

    for flag, value in (("-n", args.n), ("--max-rows", args.max_rows)):
        if value < 1:
            raise InputError("must be at least 1", flag)
    if args.corpus is not None and args.split is None:
        raise InputError("--corpus needs --split", "--split")
    model, payload = load_parser(args.checkpoint)
    gold = None
    if args.corpus is not None:
        sentences, tags, gold = read_corpus_sentences(args.corpus, args.split, args.data_dir)
    else:
        sentences, tags = read_sentences(args.sentences), None
    proposals = propose(model, payload, sentences, args.n, args.method, args.seed, args.max_rows)
    write_proposals(args.out, proposals, tags, args.logq)
    trees = sum(len(p.trees) for p in proposals)
    meta = {"checkpoint": str(args.checkpoint), "n": args.n, "method": args.method, "seed": args.seed,
            "source": {"corpus": args.corpus, "split": args.split} if gold else {"sentences": str(args.sentences)},
            "sentences": len(proposals), "trees": trees}
    if gold is not None:
        from experiments.evaluate.rerank import proposal_quality

        ns = sorted({n for n in (1, 10, 100) if n < args.n} | {args.n})
        tagged = [[with_tags(t, tg) for t in p.trees] for p, tg in zip(proposals, tags)]  # as in OUT
        meta.update(proposal_quality(gold, tagged, ns))
        meta["f1_convention"] = "EVALB COLLINS.prm, labeled, against the cleaned corpus trees (percent)"
    meta_path = args.out.with_suffix(".meta.json")
    atomic_write_text(meta_path, json.dumps(meta, indent=1) + "\n")
    print(f"wrote {trees} trees for {len(proposals)} sentences to {args.out} ({meta_path.name}"
          + (f": 1-best F1 {meta['one_best_f1']}, oracle F1 at N = {args.n}: {meta['oracle_f1'][str(args.n)]})"
             if gold is not None else ")"))
    return 0
