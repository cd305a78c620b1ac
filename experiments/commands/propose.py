"""``synbench propose CHECKPOINT (--corpus C --split S | --sentences FILE) -n N --out FILE``: proposal trees."""

from __future__ import annotations

import argparse
from pathlib import Path

from experiments.cli_options import natural, positive_int
from experiments.families import declared_defaults


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "propose", help="draw N distinct proposal trees per sentence from a parser checkpoint",
        description="Draw N distinct trees per sentence from a trained proposal parser q(y|x): stochastic beam "
                    "search (--method sample: Gumbel-top-k, sampling without replacement; TG §3.1 uses N = 300) "
                    "or deterministic beam search (--method beam). Writes JSON lines, one per sentence: "
                    '{"sentence": k (0-based), "trees": [bracketed trees, most probable first]}, with the '
                    "treebank's POS tags over the words (XX for --sentences input); --logq FILE also writes "
                    '{"sentence": k, "logq": [log q(y|x) in nats]}.',
    )
    p.add_argument("checkpoint", help="a checkpoint of a family that proposes trees (RUN_DIR/checkpoints/best.ckpt)")
    source = p.add_mutually_exclusive_group(required=True)
    source.add_argument("--corpus", help="corpus name or treebank file; its trees' words are parsed")
    source.add_argument("--sentences", type=Path, help="file with one tokenized sentence per line")
    p.add_argument("--split", help="corpus split (required with --corpus)")
    p.add_argument("-n", type=positive_int,
                   help="trees per sentence (default: the parser family's paper's: "
                        f"{declared_defaults('n', 'propose')})")
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
                "against the corpus trees): how tight a bound these proposals can give. A dependency parser "
                "writes its trees as CoNLL-U strings and records UAS instead of F1.")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from experiments.families import checkpoint_family
    from lightning_modules.errors import InputError

    for flag, value in (("-n", args.n), ("--max-rows", args.max_rows)):
        if value is not None and value < 1:
            raise InputError("must be at least 1", flag)
    if args.corpus is not None and args.split is None:
        raise InputError("--corpus needs --split", "--split")
    from experiments.families.adapter import ProposeRequest

    adapter, meta = checkpoint_family(args.checkpoint)
    proposing = adapter.proposing(meta["config"])
    if proposing is None:
        raise InputError(f"a {adapter.name} checkpoint does not propose trees", str(args.checkpoint))
    n = proposing.n if args.n is None else args.n
    print(proposing.write(ProposeRequest(args.checkpoint, args.out, n, args.method, args.seed, args.max_rows,
                                         args.corpus, args.split, args.sentences, args.data_dir, args.logq)))
    return 0
