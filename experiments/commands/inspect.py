"""``synbench inspect ENCODING``: print what a model sees for a tree (or sentence), as JSON.

Each family's adapter names the encodings it prints (``synbench inspect --help`` lists them), reads its inputs
(``--tree`` or ``--trees-file``: PTB-style trees unless the family reads another format) and declares its
options; an option of another family is refused. One JSON object per input: with ``--tree`` (or
``--jsonl``) one per line, otherwise a JSON list, except for families whose contract reads one input per file
without ``--jsonl`` (the file holds one sentence, printed as one object). The records are the contracts
of DESIGN.md.
"""

from __future__ import annotations

import argparse
import json
import sys


def register(subparsers: argparse._SubParsersAction) -> None:
    from experiments.families import inspect_encodings

    encodings = inspect_encodings()
    p = subparsers.add_parser(
        "inspect",
        help="print an input's encoding (tokens, labels, structure, attention per chunk) as JSON",
        description="Print the encoding of a tree as the model consumes it: " + "; ".join(
            f"{name} ({type(adapter).__doc__.strip().splitlines()[0].rstrip('.')})"
            for name, adapter in encodings.items()) + ".",
    )
    p.add_argument("family", choices=list(encodings), metavar="ENCODING", help=" | ".join(encodings))
    source = p.add_mutually_exclusive_group(required=True)
    source.add_argument("--tree", help="one input, e.g. '(S (NP (DT a) (NN cat)) (VP (VBZ meows)))'")
    source.add_argument("--trees-file", metavar="FILE",
                        help="a file of inputs (bracketed trees: .mrg or one per line; or what the encoding "
                             "reads, e.g. CoNLL-U)")
    p.add_argument("--jsonl", action="store_true", help="one JSON object per line (per input)")
    seen: set[str] = set()
    for adapter in encodings.values():
        for option in adapter.inspection().options:
            if option.flag not in seen:
                seen.add(option.flag)
                p.add_argument(option.flag, **option.kwargs)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from experiments.families import inspect_encodings
    from lightning_modules.errors import InputError

    encodings = {name: adapter.inspection() for name, adapter in inspect_encodings().items()}
    inspection = encodings[args.family]
    own = {o.flag for o in inspection.options}
    for other in encodings.values():
        for option in other.options:
            if option.flag not in own and getattr(args, option.dest, None) is not None:
                owners = "/".join(n for n, i in encodings.items() if option in i.options)
                raise InputError(f"is a {owners} option; {args.family} does not read it", option.flag)
    options = {o.dest: getattr(args, o.dest, None) for o in inspection.options}
    sources = inspection.sources(args.tree, args.trees_file)
    one_object = args.tree is not None or (inspection.one_input_per_file and not args.jsonl)
    if one_object and len(sources) != 1:
        raise InputError(f"holds {len(sources)} inputs; without --jsonl it must hold one (--jsonl prints one "
                         "object per line)", args.trees_file)
    records = []
    for location, item in sources:
        try:
            records.append(inspection.record(args.family, item, options))
        except InputError as e:
            raise InputError(e.message, e.location or location) from None
    if args.jsonl or one_object:
        text = "".join(json.dumps(r, separators=(",", ":")) + "\n" for r in records)
    else:
        text = json.dumps(records, separators=(",", ":")) + "\n"
    sys.stdout.write(text)
    return 0
