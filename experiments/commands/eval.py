"""``synbench eval TASK ...``: the evaluation protocol, one sub-command per registered task.

``ppl``, ``sg``, ``blimp`` and ``rerank`` score a model (a checkpoint of any family, an n-gram JSON or
``hf:DIR``) through the Scorer protocol and write ``results.json`` + ``items.jsonl`` into ``--out`` (default
``RUN_DIR/eval/TASK-HASH``); a re-run computes only the items missing there. ``parse`` scores the model's
own parses against the gold trees as its family shapes them. ``terminals`` writes the per-terminal
log-probabilities on gold trees that TG §4.2's regressions compare, ``dyck`` the closing-bracket accuracy of a
Dyck run (Pushdown Layers §4.1); the model's family evaluates both. ``sg --surprisals FILE`` scores SyntaxGym
from a file of region surprisals; ``uas`` compares two CoNLL-U files. The tasks and what each needs of a
model: ``experiments.evaluate.tasks``.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from experiments.commands.arguments import add_device_argument, natural, positive_int


def register(subparsers: argparse._SubParsersAction) -> None:
    from experiments.evaluate.tasks import tasks as registered_tasks

    p = subparsers.add_parser("eval", help="evaluate: perplexity, SyntaxGym, BLiMP, reranking, parsing, UAS, Dyck",
                              description=__doc__)
    subparsers = p.add_subparsers(dest="task", required=True, metavar="TASK")
    for task in registered_tasks():
        task.add_command(subparsers)


def _limit(p: argparse.ArgumentParser) -> None:
    p.add_argument("--limit", type=positive_int, metavar="K", help="evaluate the first K sentences only")


def add_ppl(tasks: argparse._SubParsersAction) -> None:
    from experiments.evaluate.scorer_choice import add_arguments

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
    _limit(p)
    p.set_defaults(func=run_ppl)


def run_ppl(args: argparse.Namespace) -> int:
    from experiments.evaluate import ppl
    from experiments.evaluate.scorer_choice import choose

    sentences = ppl.read_sentences(args.corpus, args.split, args.limit, args.data_dir)
    chosen = choose(args, gold=sentences.gold_source(), documents=True)
    result, computed = ppl.evaluate(chosen, args.checkpoint, sentences, args.limit, args.out)
    items = len(set(sentences.documents)) if chosen.level == "document" else result["metrics"]["sentences"]
    return _print(args, result, computed, items, ppl.format_report)  # items: sentences, or documents


def add_sg(tasks: argparse._SubParsersAction) -> None:
    from experiments.evaluate.scorer_choice import add_arguments

    p = tasks.add_parser(
        "sg",
        help="SyntaxGym accuracy per suite, per circuit and overall (from a model or region surprisals)",
        description=(
            "Score the SyntaxGym suites of Hu et al. (2020), from a model (CHECKPOINT) or from region "
            "surprisals (--surprisals FILE: one JSON object per line, "
            '{"suite", "item", "condition", "region", "surprisal"} with region surprisals in bits, sums over '
            "the region's words; empty regions may be omitted). From a model, each condition's regions are "
            "joined with spaces (no period appended), tokenized PTB-style, and word surprisals are summed "
            "into regions by character offsets. An item passes when the suite's first prediction holds; "
            "the overall score is the mean over the paper's 31 suites."
        ),
    )
    add_arguments(p, model_optional=True)
    p.add_argument("--surprisals", metavar="FILE", help="region surprisals, JSON lines (instead of a model)")
    p.add_argument("--suites-dir", metavar="DIR", help="suite JSON files (default: staged in $SYNBENCH_DATA)")
    p.add_argument("--suites", help="comma-separated suite names (default: all)")
    p.add_argument("--items-per-suite", type=positive_int, metavar="K", help="the first K items of each suite")
    p.set_defaults(func=run_sg)


def run_sg(args: argparse.Namespace) -> int:
    from experiments.evaluate.sg import default_suites_dir, load_suites, read_surprisals, score
    from lightning_modules.errors import InputError

    if (args.checkpoint is None) == (args.surprisals is None):
        raise InputError("give either a CHECKPOINT or --surprisals FILE", "eval sg")
    suites_dir = Path(args.suites_dir) if args.suites_dir else default_suites_dir(args.data_dir)
    suites = load_suites(suites_dir)
    if args.surprisals is not None:
        result = score(suites, read_surprisals(args.surprisals, suites))
        if args.json:
            json.dump(result, sys.stdout)
            sys.stdout.write("\n")
        else:
            sys.stdout.write(_sg_report(result))
        return 0
    from experiments.evaluate import sg_eval
    from experiments.evaluate.scorer_choice import choose

    names = [s.strip() for s in args.suites.split(",") if s.strip()] if args.suites else None
    selected = sg_eval.select(suites, names, args.items_per_suite)
    chosen = choose(args)
    result, computed = sg_eval.evaluate(chosen, args.checkpoint, selected, suites_dir, args.items_per_suite, args.out)
    return _print(args, result, computed, result["settings"]["items"],
                  lambda r: _sg_report(r) + f"OOV rate {r['oov_rate']:.4f}\n{r['headline']}\n")


def _sg_report(result: dict) -> str:
    lines = [f"{'suite':28} {'accuracy':>8} {'all preds':>9}"]
    for name, r in result["suites"].items():
        lines.append(f"{name:28} {r['accuracy']:8.4f} {r['accuracy_all_predictions']:9.4f}")
    lines.append("")
    for name, acc in result["circuits"].items():
        lines.append(f"{name:28} {'-' if acc is None else format(acc, '8.4f'):>8}")
    overall = result["score"]
    lines.append(f"{'SyntaxGym score (31 suites)':28} {'-' if overall is None else format(overall, '8.4f'):>8}")
    return "\n".join(lines) + "\n"


def add_blimp(tasks: argparse._SubParsersAction) -> None:
    from experiments.evaluate.scorer_choice import add_arguments

    p = tasks.add_parser(
        "blimp", help="BLiMP accuracy per paradigm, per phenomenon and overall",
        description="BLiMP (Warstadt et al. 2020): a pair is correct when log p(good) > log p(bad) (sentences "
                    "tokenized PTB-style; joint models compare marginal lower bounds). Accuracy per paradigm, "
                    "per phenomenon and overall (mean over paradigms).")
    add_arguments(p)
    p.add_argument("--blimp-dir", metavar="DIR", help="BLiMP data folder (default: staged in $SYNBENCH_DATA)")
    p.add_argument("--paradigms", help="comma-separated paradigm UIDs (default: all 67)")
    p.add_argument("--pairs-per-paradigm", type=positive_int, metavar="K", help="the first K pairs of each paradigm")
    p.set_defaults(func=run_blimp)


def run_blimp(args: argparse.Namespace) -> int:
    from experiments.evaluate import blimp_eval
    from experiments.evaluate.blimp import load_paradigms
    from experiments.evaluate.scorer_choice import choose

    blimp_dir = Path(args.blimp_dir) if args.blimp_dir else blimp_eval.default_data_dir(args.data_dir)
    paradigms = load_paradigms(blimp_dir, args.pairs_per_paradigm)
    names = [s.strip() for s in args.paradigms.split(",") if s.strip()] if args.paradigms else None
    selected = blimp_eval.select(paradigms, names)
    chosen = choose(args)
    result, computed = blimp_eval.evaluate(chosen, args.checkpoint, selected, blimp_dir, args.pairs_per_paradigm,
                                           args.out)

    def report(r: dict) -> str:
        m = r["metrics"]
        rows = [f"{uid:48} {acc:.4f}" for uid, acc in m["paradigms"].items()]
        rows += [""] + [f"{name:48} {acc:.4f}" for name, acc in m["phenomena"].items()]
        return "\n".join(rows + ["", f"{'overall':48} {m['accuracy']:.4f}", r["headline"]]) + "\n"

    return _print(args, result, computed, result["settings"]["pairs"], report)


def add_rerank(tasks: argparse._SubParsersAction) -> None:
    from experiments.evaluate.scorer_choice import add_arguments

    p = tasks.add_parser(
        "rerank", help="parse reranking of proposal trees by the joint model (EVALB F1)",
        description="Parse reranking (TG §3.2): for each gold sentence, the proposal with the highest "
                    "log p(x, y) under the joint model, scored with EVALB (COLLINS.prm) against the gold trees; "
                    "also the oracle F1 of the proposals and, with --logq, the proposal parser's own 1-best.")
    add_arguments(p, methods=("proposals",), proposals_required=True)
    p.add_argument("--gold", required=True, help="gold treebank file or CORPUS/SPLIT (e.g. ptb-sample/test)")
    p.add_argument("--logq", type=Path, metavar="FILE", help="log q(y|x) of the proposals (synbench propose --logq)")
    _limit(p)
    p.set_defaults(func=run_rerank)


def run_rerank(args: argparse.Namespace) -> int:
    from experiments.evaluate import rerank
    from experiments.evaluate.scorer_choice import choose

    args.method = "proposals"
    gold = rerank.read_gold(args.gold, args.limit, args.data_dir)
    chosen = choose(args)
    if not chosen.joint:
        from lightning_modules.errors import InputError

        raise InputError(f"{chosen.family} is a string model: reranking needs a joint model p(x, y)", args.checkpoint)
    result, computed = rerank.evaluate(chosen, args.checkpoint, gold, args.proposals, args.n, args.logq, args.limit,
                                       args.out)

    return _print(args, result, computed, result["settings"]["sentences"],
                  lambda r: _bracket_report(r, ("reranked", "oracle", "parser_1best")))


def _bracket_report(result: dict, names: tuple[str, ...]) -> str:
    """One EVALB line per scored parse set of ``names`` (those present), then the headline."""
    rows = []
    for name in names:
        m = result["metrics"][name]
        if m is not None:
            a = m["all"]
            rows.append(f"{name:15} F1 {a['bracket_f1']}  recall {a['bracket_recall']}  "
                        f"precision {a['bracket_precision']}  (len<=40 F1 {m['len40']['bracket_f1']})")
    return "\n".join(rows + [result["headline"]]) + "\n"


def add_parse(tasks: argparse._SubParsersAction) -> None:
    from experiments.evaluate.scorer_choice import add_arguments

    p = tasks.add_parser(
        "parse", help="the model's own parses scored with EVALB against the gold trees (F1)",
        description="Each sentence's parse is the model's best tree (for a Pushdown-LM, Pushdown Layers §5 / Table "
                    "4: the best tree of the final beam over attachment decisions, subword pieces merged), scored "
                    "with EVALB against the gold trees shaped as the model's family parses (a Pushdown-LM: "
                    "binarized as in training, unlabeled), with the family's trivial baseline (right-branching) "
                    "scored beside. Sentences with unknown words are left out as in "
                    "the paper (by default for SentencePiece vocabularies; --unknown exclude|keep).")
    add_arguments(p, methods=("beam",))
    p.add_argument("--gold", required=True, help="gold treebank file or CORPUS/SPLIT (e.g. ptb-sample/test)")
    p.add_argument("--unknown", choices=["default", "exclude", "keep"], default="default",
                   help="sentences with unknown words: exclude (the paper), keep, or default (exclude for "
                        "SentencePiece vocabularies, keep for word vocabularies with unknown-word classes)")
    _limit(p)
    p.set_defaults(func=run_parse)


def run_parse(args: argparse.Namespace) -> int:
    from experiments.evaluate import parse, rerank
    from experiments.evaluate.scorer_choice import choose

    chosen = choose(args)
    kind = chosen.adapter.parse_view().gold_kind if "parse" in chosen.capabilities else "constituency"
    gold = rerank.read_gold(args.gold, args.limit, args.data_dir, kind)
    result, computed = parse.evaluate(chosen, args.checkpoint, gold, args.unknown, args.limit, args.out)

    return _print(args, result, computed, result["settings"]["sentences"],
                  lambda r: _bracket_report(r, ("parsed", "right_branching")))


def add_unsupervised_f1(tasks: argparse._SubParsersAction) -> None:
    from experiments.evaluate.scorer_choice import add_arguments

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
    _limit(p)
    p.set_defaults(func=run_unsupervised_f1)


def run_unsupervised_f1(args: argparse.Namespace) -> int:
    from experiments.evaluate import rerank, unsupervised_parse
    from experiments.evaluate.scorer_choice import choose

    gold = rerank.read_gold(args.gold, args.limit, args.data_dir)
    chosen = choose(args)
    result, computed = unsupervised_parse.evaluate(chosen, args.checkpoint, gold, args.max_length or None,
                                                   args.limit, args.out)

    def report(r: dict) -> str:
        rows = []
        for name in ("parsed", "right_branching", "left_branching"):
            m = r["metrics"][name]
            rows.append(f"{name:15} sentence F1 {m['sentence_f1']:.2f}  corpus F1 {m['corpus_f1']:.2f}")
        return "\n".join(rows + [r["headline"]]) + "\n"

    return _print(args, result, computed, result["settings"]["sentences"], report)


def add_uas(tasks: argparse._SubParsersAction) -> None:
    p = tasks.add_parser(
        "uas", help="unlabeled/labeled attachment scores of CoNLL-U dependency trees",
        description="UAS and LAS of TEST against GOLD (CoNLL-U, sentences paired in order). Punctuation "
                    "(gold UPOS PUNCT) is excluded unless --punct; LAS compares the universal part of DEPREL. "
                    "A sentence or word mismatch is an error at TEST:LINE.")
    p.add_argument("gold", help="gold CoNLL-U file")
    p.add_argument("test", help="predicted CoNLL-U file")
    p.add_argument("--punct", action="store_true", help="score punctuation too")
    p.add_argument("--out", type=Path, metavar="DIR", help="also write results.json here")
    p.add_argument("--json", action="store_true", help="print the scores as JSON")
    p.set_defaults(func=run_uas)


def run_uas(args: argparse.Namespace) -> int:
    from experiments.evaluate.results import write_results
    from experiments.evaluate.uas import attachment_scores

    scores = attachment_scores(args.gold, args.test, args.punct)
    if args.out is not None:
        write_results(args.out, "uas", scores, scores["convention"], {"punct": args.punct},
                      config={"task": "uas", "punct": args.punct}, data={"gold": args.gold, "test": args.test})
    if args.json:
        json.dump(scores, sys.stdout, sort_keys=True)
        sys.stdout.write("\n")
    else:
        uas, las = (f"{x:.2f}" if x is not None else "-" for x in (scores["uas"], scores["las"]))
        print(f"UAS {uas}  LAS {las}  ({scores['words']} words, {scores['sentences']} sentences; "
              f"punctuation {scores['punctuation']})")
    return 0


def add_dyck(tasks: argparse._SubParsersAction) -> None:
    from lightning_modules.families.pushdown.dyck import TEST_SETS  # not dyck_data: the CLI must not import torch

    p = tasks.add_parser(
        "dyck", help="closing-bracket accuracy of a Dyck run on the long-range and deeper test sets (§4.1)",
        description="Pushdown Layers §4.1 / Table 1: for each prefix of the test sets (built deterministically "
                    "from the checkpoint's data config and --seed: long-L = prefixes closing a dependency of "
                    "length >= L in Dyck_{k,40} strings, 50 each; depth = nests of depth 15-49 around a string "
                    "of the training language, 105), the argmax of the next-token distribution over the closing "
                    "brackets must be the bracket that closes the prefix. base-lm: exact distribution; "
                    "pushdown: marginal over the final beam of attachment histories of the prefix.")
    p.add_argument("checkpoint", help="pushdown or base-lm checkpoint of a Dyck run (RUN/checkpoints/best.ckpt)")
    p.add_argument("--set", dest="sets", action="append", metavar="SET",
                   help=f"a test set ({'|'.join(TEST_SETS)}); repeat for several (default: all)")
    p.add_argument("--size", type=positive_int, metavar="N",
                   help="prefixes per set (default: the paper's, 50 per long-range set and 100 for depth; the "
                        "long-range sets stop after the string that reaches N, the depth set after a round of 35)")
    p.add_argument("--beam", type=positive_int, default=50,
                   help="beam over attachment histories for pushdown checkpoints (default 50, as official)")
    p.add_argument("--seed", type=natural, default=0, help="seed of the test sets (default 0)")
    add_device_argument(p)
    p.add_argument("--tape", default="beam", choices=("beam", "silver"),
                   help="pushdown: infer the attachments with the beam (default, the protocol) or read each "
                        "prefix's silver tape (an oracle that isolates the next-token predictor)")
    p.add_argument("--out", type=Path, metavar="DIR", help="results folder (default: RUN_DIR/eval/dyck-HASH)")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.set_defaults(func=run_dyck)


def run_dyck(args: argparse.Namespace) -> int:
    result, computed, total = _family_evaluation("dyck", args)

    def report(r: dict) -> str:
        m = r["metrics"]
        rows = [f"{name:10} {acc:.4f}  ({m['prefixes'][name]} prefixes, mean length "
                f"{m['mean_prefix_length'][name]:.1f})" for name, acc in m["accuracy"].items()]
        for name, a in (m.get("attachments") or {}).items():
            beyond = a["accuracy_beyond_training_length"]
            rows.append(f"{name:10} attachments (teacher-forced) {a['accuracy']:.4f}, beyond the training length "
                        f"{'-' if beyond is None else f'{beyond:.4f}'}, prefixes without error "
                        f"{a['prefixes_without_error']:.4f}")
        return "\n".join([*rows, r["headline"]]) + "\n"

    return _print(args, result, computed, total, report)


def add_terminals(tasks: argparse._SubParsersAction) -> None:
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
    _limit(p)
    p.add_argument("--out", type=Path, metavar="DIR",
                   help="results folder (default: RUN_DIR/eval/terminals-HASH)")
    p.add_argument("--data-dir", help="data directory (default: $SYNBENCH_DATA or ~/.cache/synbench/data)")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.set_defaults(func=run_terminals)


def run_terminals(args: argparse.Namespace) -> int:
    result, computed, total = _family_evaluation("terminals", args)
    return _print(args, result, computed, total, lambda r: r["headline"] + "\n")


def add_uas_rerank(tasks: argparse._SubParsersAction) -> None:
    p = tasks.add_parser(
        "uas-rerank", help="UAS of reranking N dependency proposals with a joint model (DTG Table 3)",
        description="For each sentence of a dependency corpus split, draw N distinct projective trees without "
                    "replacement from a dependency parser, score each with the joint model, log p(x, y), and "
                    "take its best: UAS against the gold trees (gold PUNCT words not scored), beside the parser's "
                    "greedy UAS and the oracle UAS of the proposals. Writes results.json and reranked.conllu.")
    p.add_argument("checkpoint", help="a joint dependency model's checkpoint (a family with dependency_parse)")
    source = p.add_mutually_exclusive_group(required=True)
    source.add_argument("--parser", type=Path, metavar="CKPT", help="dependency parser checkpoint drawing the "
                        "proposals (the parser's UAS: its greedy parse)")
    source.add_argument("--proposals", type=Path, metavar="FILE", help="proposals file of a dependency parser "
                        "(synbench propose; the parser's UAS: each sentence's first tree)")
    p.add_argument("--corpus", default="ud-ewt", help="dependency corpus (default ud-ewt; NAME-dep converts)")
    p.add_argument("--split", default="test", help="split (default test)")
    _limit(p)
    p.add_argument("-n", type=positive_int, default=300, help="proposal trees per sentence (default 300)")
    p.add_argument("--parser-seed", type=natural, default=0, help="seed of the sampling without replacement")
    p.add_argument("--batch-size", type=positive_int, default=32, help="trees per forward pass (same results)")
    p.add_argument("--device", default="cpu", help="torch device of the model (default cpu)")
    p.add_argument("--out", type=Path, metavar="DIR", help="results folder (default RUN_DIR/eval/uas-rerank-HASH)")
    p.add_argument("--data-dir", help="data directory (default: $SYNBENCH_DATA or ~/.cache/synbench/data)")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.set_defaults(func=run_uas_rerank)


def run_uas_rerank(args: argparse.Namespace) -> int:
    result, computed, total = _family_evaluation("dependency_parse", args)
    return _print(args, result, computed, total, lambda r: r["headline"] + "\n")


def _family_evaluation(task: str, args: argparse.Namespace) -> tuple[dict, int, int]:
    """A task the model's family evaluates itself (``terminals``, ``dyck``), after checking it applies."""
    from experiments.commands.arguments import checked_device
    from experiments.families import checkpoint_family
    from lightning_modules.errors import InputError

    checked_device(args.device)
    if not Path(args.checkpoint).is_file():
        raise InputError("model file not found", str(args.checkpoint))
    adapter, meta = checkpoint_family(args.checkpoint)
    if task not in adapter.capabilities(meta["config"]):
        raise InputError(f"a {adapter.name} checkpoint of this config has no {task} evaluation", args.checkpoint)
    return adapter.evaluate(task, args)


def _print(args: argparse.Namespace, result: dict, computed: int, total: int, report) -> int:
    """The result on stdout (JSON or text); what was computed now versus cached on stderr."""
    if args.json:
        json.dump(result, sys.stdout, sort_keys=True)
        sys.stdout.write("\n")
    else:
        sys.stdout.write(report(result))
    print(f"synbench: computed {computed} of {total} items ({total - computed} cached) -> {result['out']}",
          file=sys.stderr)
    return 0
