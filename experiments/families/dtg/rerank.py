"""UAS by reranking dependency proposals with a joint model (DTG §4.2, Table 3).

For every sentence of a dependency corpus split, the dependency parser draws N distinct projective trees
without replacement (``proposals.py``: ``--parser CKPT``, seeded per sentence as the proposals of ``eval ppl``,
or ``--proposals FILE`` written by ``synbench propose``, as an experiment plans it); the joint model
(DTG or TXL (trans)) scores each, log p(x, y), and the tree it ranks first is the parse. Reported beside it,
on the same words: the parser's greedy parse (with ``--parser``; with a file, its first, most probable
tree) and the oracle (the best
proposal by UAS: how good a rerank can get). Gold trees are the corpus's (a UD treebank, or a constituency
corpus converted: ``NAME-sd``, Stanford basic dependencies as Table 3's, or ``NAME-dep``, ``NAME-ud``); words
whose gold XPOS is a PTB punctuation tag (`` '' . , :) are not scored (Chen & Manning 2014's rule for PTB
dependency UAS; ``experiments.evaluate.uas``). Trees the model cannot give a probability (an arc-swift
reach it never saw in training) are left out of its ranking.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from experiments.evaluate.cache import default_out_dir
from experiments.evaluate.results import write_results
from experiments.evaluate.scorers.tree_marginal import TreeScorer
from experiments.evaluate.uas import attachment_counts, convention
from lightning_modules.data.checksums import file_sha256
from lightning_modules.data.dependency import DepTree, parse_conllu, to_conllu
from lightning_modules.errors import InputError

TASK = "dependency_parse"


def evaluate(model: Any, options: Mapping[str, Any]) -> tuple[dict[str, Any], int, int]:
    """(result, sentences computed, sentences): UAS of the reranked, greedy and oracle trees; writes
    ``reranked.conllu`` (the model's choice per sentence) beside ``results.json``.

    ``options``: ``checkpoint``, ``corpus``, ``split``, ``limit``, ``data_dir``, ``n``,
    ``proposals`` (a file) or ``parser`` (a checkpoint of a family that proposes dependency trees, found
    through the registry) with ``parser_seed``, ``batch_size``, ``out``."""
    from types import SimpleNamespace

    from experiments.evaluate.ppl import read_sentences
    from experiments.evaluate.scorer_choice import SentenceSeededProposals
    from experiments.families import checkpoint_family

    args = SimpleNamespace(**{"batch_size": 32, "limit": None, "data_dir": None, "proposals": None,
                              "parser": None, "parser_seed": 0, "out": None, **options})

    for flag, value in (("-n", args.n), ("--batch-size", args.batch_size)):
        if value < 1:
            raise InputError("must be at least 1", flag)
    sentences = read_sentences(args.corpus, args.split, args.limit, args.data_dir, trees=True, tree_kind="dependency")
    gold: list[DepTree] = list(sentences.trees)  # type: ignore[arg-type]
    if args.proposals is not None:
        from experiments.evaluate.scorers.tree_files import ProposalFile

        source: Any = ProposalFile(args.proposals)
        drawn = [trees[: args.n] for trees in source(sentences.words)]
        greedy = [trees[0].heads for trees in drawn]  # the file's first tree: the parser's most probable
        parser_name, data = f"the first of the {args.n} proposals of {args.proposals}", {"proposals": args.proposals}
    else:
        source = SentenceSeededProposals(args.parser, args.n, args.parser_seed)
        drawn = source(sentences.words)
        parser, _ = checkpoint_family(args.parser)
        proposing = parser.proposing()
        if proposing is None:
            raise InputError(f"a {parser.name} checkpoint does not propose trees", str(args.parser))
        greedy = [trees[0].heads for trees in proposing.proposer(args.parser, "beam")(sentences.words, 1, 0)]
        parser_name, data = "the parser's greedy parse", {"parser": args.parser}
    proposals = [[t for t in trees if model.transitions_known(t)] for trees in drawn]
    scorer = TreeScorer(model, None, method="proposals", n=args.n, batch_size=args.batch_size)
    scored = scorer.score_trees(sentences.words, proposals)
    reranked = [parse_conllu(s.best_tree, "reranked")[0][1].heads for s in scored]
    oracle = [max(trees, key=lambda t, g=g: attachment_counts([g], [t.heads])[1]).heads
              for trees, g in zip(proposals, gold)]
    metrics: dict[str, Any] = {}
    for name, heads in (("uas", reranked), ("uas_parser", greedy), ("uas_oracle", oracle)):
        words, correct = attachment_counts(gold, heads)
        metrics[name] = 100.0 * correct / words if words else None
    metrics.update(sentences=len(gold), words=words, proposals_mean=sum(len(t) for t in proposals) / len(gold))
    settings = {"corpus": sentences.name, "limit": args.limit, "n_proposals": args.n,
                "model_sha256": file_sha256(args.checkpoint), "family": model.family,
                **({"proposals_sha256": file_sha256(args.proposals)} if args.proposals is not None else
                   {"parser_sha256": file_sha256(args.parser), "parser_seed": args.parser_seed})}
    out = Path(args.out) if args.out else default_out_dir(args.checkpoint, "uas-rerank", settings)
    items = [{"sentence": k, "reranked": list(r), "parser": list(p), "trees": len(t)}
             for k, (r, p, t) in enumerate(zip(reranked, greedy, proposals))]
    write_results(out, "uas-rerank", metrics, convention() + "; the model's best of N proposals (uas), "
                  f"{parser_name} (uas_parser), the best proposal by UAS (uas_oracle)", settings, items, data=data)
    (out / "reranked.conllu").write_text(
        "".join(to_conllu(DepTree(g.forms, tuple(h), ("dep",) * len(h))) + "\n" for g, h in zip(gold, reranked)),
        encoding="utf-8")
    headline = (f"UAS {metrics['uas']:.2f} reranking N = {args.n} proposals with {model.family} (parser "
                f"{metrics['uas_parser']:.2f}, oracle {metrics['uas_oracle']:.2f}) on {sentences.name}, "
                f"{len(gold)} sentences")
    return {"metrics": metrics, "settings": settings, "headline": headline, "out": str(out)}, len(gold), len(gold)
