"""Dependency proposals: N distinct projective trees per sentence from the dependency parser q(y | x).

DTG §4 marginalises over 300 trees per sentence sampled without replacement from a biaffine parser. Ours is
the seq2seq proposal parser of the constituency families (``families/parser/model.py``, unchanged) writing the
canonical arc-standard actions of ``families/parser/dep_encoding.py``, searched by the same stochastic beam search
(``experiments.families.parser.proposals.search``: Gumbel-top-k, Kool et al. 2019). Why this design and not
a biaffine scorer with projective sampling: q is then a locally normalised sequence model, for which
Gumbel-top-k over sequences is *exact* sampling without replacement, and the canonical order makes sequences
and trees one-to-one, so the N samples are N distinct trees drawn without replacement from q(y | x) with
their exact log q. A biaffine (arc-factored, globally normalised) q needs a structured top-k Gumbel sampler
over Eisner's chart for the same guarantee; the transition parser reuses the search, the network and its
training loop, and is a projective parser by construction (as DTG needs).

``method="beam"`` with n = 1 is the greedy parse (its UAS is the parser's reported UAS).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from torch import Tensor

from experiments.families.adapter import ProposeRequest
from experiments.families.parser.proposals import ActionDecoder, search_sentences
from lightning_modules.data.dependency import DepTree, to_conllu
from lightning_modules.families.parser import dep_encoding as encoding

FAMILY = "dep-parser"


def dependency_decoder(model: Any, batch: dict[str, Tensor], k: int) -> ActionDecoder:
    """The parser network as a search decoder over canonical arc-standard actions (``DepParseState``)."""
    state = encoding.DepParseState(np.repeat(batch["n_words"].numpy(), k))
    return ActionDecoder(model, batch, k, state, lambda s: s.allowed())


@dataclass
class DepProposals:
    """Distinct trees (heads, 1-based) of one sentence with their log q, most probable first."""

    words: list[str]
    heads: list[tuple[int, ...]]
    logq: list[float]

    def trees(self) -> list[DepTree]:
        return [DepTree(tuple(self.words), h, ("dep",) * len(h)) for h in self.heads]


def propose(model: Any, payload: dict[str, Any], sentences: Sequence[Sequence[str]], n: int,
            method: str = "sample", seed: int = 0, max_rows: int = 2048) -> list[DepProposals]:
    """N distinct trees per sentence (``sample``: without replacement; ``beam``: top-N beam search), most
    probable first; sentence i's noise comes from a generator seeded with (seed, i)."""
    found = search_sentences(model, payload, sentences, n, method, seed, max_rows,
                             lambda batch, k: dependency_decoder(model, batch, k))
    return [DepProposals(list(words), [encoding.actions_to_heads(h.actions) for h in hyps], [h.logprob for h in hyps])
            for words, hyps in zip(sentences, found, strict=True)]


def load_parser(checkpoint: str | Path) -> tuple[Any, dict[str, Any]]:
    """The network (eval mode) and vocabulary payload of a ``dep-parser`` checkpoint."""
    from experiments.checkpoints import read_checkpoint
    from lightning_modules.families.parser.data import source_vocab_size
    from lightning_modules.families.parser.model import build

    ckpt = read_checkpoint(checkpoint, FAMILY)
    meta = ckpt["synbench"]
    payload = meta["vocab"]
    model = build({**meta["config"]["model"], "source_vocab_size": source_vocab_size(payload),
                   "action_vocab_size": encoding.VOCAB_SIZE})
    model.load_state_dict(ckpt["state_dict"])
    model.eval()
    return model, payload


def proposals_jsonl(proposals: Sequence[DepProposals]) -> str:
    """The proposals file (``tree_files.ProposalFile`` reads it): per sentence ``{"sentence": k, "trees":
    [CoNLL-U of each tree, most probable first]}``."""
    return "".join(json.dumps({"sentence": k, "trees": [to_conllu(t) for t in p.trees()]}, ensure_ascii=False)
                   + "\n" for k, p in enumerate(proposals))


def oracle_uas(gold: Sequence[DepTree], proposals: Sequence[DepProposals], n: int) -> float:
    """UAS of the best of the first ``n`` proposals of each sentence (``evaluate.uas``'s punctuation rule)."""
    from experiments.evaluate.uas import attachment_counts

    best = [max(p.heads[:n], key=lambda h, g=g: attachment_counts([g], [h])[1]) for p, g in zip(proposals, gold)]
    words, correct = attachment_counts(gold, best)
    return round(100.0 * correct / max(words, 1), 2)


def write(args: ProposeRequest) -> str:
    """``synbench propose`` with a dep-parser checkpoint: the proposals file, its log q file and meta file (with
    the first tree's and the oracle UAS for ``--corpus``); returns the line it prints."""
    from experiments.evaluate.ppl import read_sentences as read_split_sentences
    from experiments.evaluate.proposal_files import logq_jsonl, read_sentences
    from experiments.evaluate.uas import DEFAULT_PUNCTUATION, PUNCTUATION_RULES, attachment_counts
    from lightning_modules.data.atomic import atomic_write_text

    model, payload = load_parser(args.checkpoint)
    gold: list[DepTree] | None = None
    if args.corpus is not None:
        read = read_split_sentences(args.corpus, args.split, None, args.data_dir, trees=True, tree_kind="dependency")
        sentences, gold = read.words, list(read.trees)  # type: ignore[arg-type]
    else:
        sentences = read_sentences(args.sentences)
    proposals = propose(model, payload, sentences, args.n, args.method, args.seed, args.max_rows)
    atomic_write_text(Path(args.out), proposals_jsonl(proposals))
    if args.logq is not None:
        atomic_write_text(Path(args.logq), logq_jsonl(proposals))  # type: ignore[arg-type]
    trees = sum(len(p.heads) for p in proposals)
    meta: dict[str, Any] = {"checkpoint": str(args.checkpoint), "n": args.n, "method": args.method,
                            "seed": args.seed, "sentences": len(proposals), "trees": trees,
                            "source": {"corpus": args.corpus, "split": args.split} if gold is not None
                            else {"sentences": str(args.sentences)}}
    line = f"wrote {trees} trees for {len(proposals)} sentences to {args.out}"
    if gold is not None:
        words, correct = attachment_counts(gold, [p.heads[0] for p in proposals])
        meta["one_best_uas"] = round(100.0 * correct / max(words, 1), 2)
        meta["oracle_uas"] = {str(n): oracle_uas(gold, proposals, n)
                              for n in sorted({n for n in (1, 10, 100) if n < args.n} | {args.n})}
        meta["uas_convention"] = f"{PUNCTUATION_RULES[DEFAULT_PUNCTUATION]}; one_best: the most probable proposal"
        line += f": 1-best UAS {meta['one_best_uas']}, oracle UAS at N = {args.n}: {meta['oracle_uas'][str(args.n)]}"
    meta_path = Path(args.out).with_suffix(".meta.json")
    atomic_write_text(meta_path, json.dumps(meta, indent=1) + "\n")
    return line
