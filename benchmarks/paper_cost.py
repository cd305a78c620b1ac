"""What the full evaluation protocol costs per checkpoint, from a timed sample of each evaluation's own sentences.

``--eval`` times, on ``--device``, one TG checkpoint of ``--preset`` (random weights: the speed does not depend
on them) on a sample of each evaluation of the protocol and prints the minutes per checkpoint that the whole
evaluation takes at that rate (seconds per word of the sample x the evaluation's words):

- ``ppl N=300``: PTB test perplexity marginalised over N = 300 proposal trees per sentence (TG §3.1), the trie
  scorer (``TreeScorer``); the proposals are the gold tree plus random trees sharing its prefixes, as a
  parser's k-best list does (``marginalize.proposals``, ``k-best``); the sample: PTB-sample validation trees.
- ``ppl beam``: the same sentences by the word-synchronous beam 100/10 (<= 15 actions per word; TG's beam method).
- ``sg``: every sentence of all 34 SyntaxGym suites (each item's conditions) by the beam 100/10.
- ``blimp``: both sentences of every pair of BLiMP's 67 paradigms by the beam 100/10.

The PTB test set is not in the sample data: its size is the standard WSJ §23 (2,416 sentences, 56,684 words);
SG and BLiMP are counted from the prepared data. Words are the evaluators' tokens (``evaluate/tokenize.py``).
The sample of each evaluation is spread over it (every k-th sentence); ``--sample`` sentences each.

    PYTHONPATH=. python benchmarks/paper_cost.py --eval [--preset ptb] [--device cuda] [--sample 8]

A GPU run belongs to ``benchmarks/gpu_session.sh``; on the CPU the numbers are CPU-minutes of this machine.
Measured 2026-11-28 on the 2-core CPU (1 thread, beside a CI run; ``--preset ptb --sample 2``, the paper's
settings; random weights)::

      evaluation                         method  sentences     words   s/word    minutes
       ppl N=300            300 proposals, trie      2,416    56,684   1.2201     1152.7
        ppl beam     beam 100/10, <= 15 actions      2,416    56,684   2.1972     2075.7
              sg     beam 100/10, <= 15 actions      3,304    42,413   6.5126     4603.6
           blimp     beam 100/10, <= 15 actions    134,000 1,183,893   5.1883   102374.2
    full protocol (ppl N=300, sg, blimp): 108130.5 minutes per checkpoint

(Not yet measured on a GPU.)
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import torch

from benchmarks.marginalize import cpu_small_model, proposals
from experiments.evaluate.blimp import load_paradigms
from experiments.evaluate.blimp_eval import default_data_dir as blimp_dir
from experiments.evaluate.scorers.tree_marginal import TreeScorer
from experiments.evaluate.sg import condition_text, default_suites_dir, load_suites
from experiments.evaluate.tokenize import tokenize
from experiments.families.tg.beam import BeamScorer
from experiments.families.tg.methods import BEAM, N
from lightning_modules.families.tg.cc_constraints import ActionMasks

PTB_TEST = (2416, 56684)  # WSJ section 23: sentences, words (the TG paper's test set)


@dataclass
class Row:
    """One evaluation: its name, how it is scored, its whole size and the timed sample's rate."""

    name: str
    method: str
    sentences: int
    words: int
    sample_words: int
    seconds: float

    @property
    def minutes(self) -> float:
        """The whole evaluation at the sample's seconds per word."""
        return self.seconds / self.sample_words * self.words / 60


def spread(items: Sequence, count: int) -> list:
    """``count`` items spread evenly over ``items`` (every k-th)."""
    step = max(1, len(items) // max(count, 1))
    return list(items[::step][:count])


def sg_sentences(data_dir: str | None) -> list[list[str]]:
    """Every sentence of every prepared SyntaxGym suite (each item's conditions), as the evaluators' words."""
    suites = load_suites(default_suites_dir(data_dir))
    return [[t.text for t in tokenize(condition_text(contents)[0])]
            for suite in suites.values() for item in suite.items for contents in item.conditions.values()]


def blimp_sentences(data_dir: str | None) -> list[list[str]]:
    """Both sentences of every BLiMP pair, as the evaluators' words."""
    return [[t.text for t in tokenize(text)] for pairs in load_paradigms(blimp_dir(data_dir)).values()
            for pair in pairs for text in (pair.good, pair.bad)]


def timed(score: Callable[[], object]) -> float:
    start = time.perf_counter()
    score()
    if torch.cuda.is_available():
        torch.cuda.synchronize()
    return time.perf_counter() - start


def eval_cost(preset: str, device: str, sample: int, data_dir: str | None, n: int = N,
              beam: tuple[int, int, int] = (BEAM.options["beam"], BEAM.options["word_beam"],
                                            BEAM.options["max_actions"])) -> list[Row]:
    """Time each evaluation's sample and extrapolate (module docstring)."""
    model, valid = cpu_small_model(preset, device)
    masks = ActionMasks(model.vocab)
    rng = np.random.default_rng(0)
    gold = spread([t for t in valid if len(t.leaves()) <= 40], sample)
    words = [t.leaves() for t in gold]
    trees = [proposals(t, n, masks, rng, "k-best") for t in gold]
    beam_scorer = BeamScorer(model, *beam)
    beam_name = f"beam {beam[0]}/{beam[1]}, <= {beam[2]} actions"
    rows = [Row(f"ppl N={n}", f"{n} proposals, trie", *PTB_TEST, sum(map(len, words)),
                timed(lambda: TreeScorer(model, None, method="proposals", n=n).score_trees(words, trees))),
            Row("ppl beam", beam_name, *PTB_TEST, sum(map(len, words)), timed(lambda: beam_scorer.score(words)))]
    for name, sentences in (("sg", sg_sentences(data_dir)), ("blimp", blimp_sentences(data_dir))):
        chosen = spread(sentences, sample)
        rows.append(Row(name, beam_name, len(sentences), sum(map(len, sentences)), sum(map(len, chosen)),
                        timed(lambda chosen=chosen: beam_scorer.score(chosen))))
    return rows


def print_rows(rows: list[Row], preset: str, device: str) -> None:
    print(f"TG {preset} (random weights) on {device}; minutes per checkpoint at the sample's seconds per word")
    print(f"{'evaluation':>12} {'method':>30} {'sentences':>10} {'words':>9} {'s/word':>8} {'minutes':>9}")
    for r in rows:
        print(f"{r.name:>12} {r.method:>30} {r.sentences:10,} {r.words:9,} {r.seconds / r.sample_words:8.4f} "
              f"{r.minutes:9.1f}")
    protocol = sum(r.minutes for r in rows if r.name != "ppl beam")
    print(f"full protocol ({rows[0].name}, sg, blimp): {protocol:.1f} minutes per checkpoint")


def main(argv: list[str] | None = None) -> list[Row]:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--eval", action="store_true", required=True, help="the evaluation protocol's cost")
    ap.add_argument("--preset", default="ptb", help="the TG preset timed (default ptb, the paper's PTB model)")
    ap.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    ap.add_argument("--sample", type=int, default=8, help="sentences timed per evaluation")
    ap.add_argument("--proposals", type=int, default=N, help=f"N of the proposal perplexity (default {N})")
    ap.add_argument("--beam", type=int, nargs=3, default=None, metavar=("BEAM", "WORD_BEAM", "MAX_ACTIONS"),
                    help="the beam's settings (default TG's beam method's)")
    ap.add_argument("--data-dir", help="the prepared data (default $SYNBENCH_DATA)")
    ap.add_argument("--threads", type=int, default=None, help="torch threads on the CPU")
    args = ap.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    beam = tuple(args.beam) if args.beam else (BEAM.options["beam"], BEAM.options["word_beam"],
                                               BEAM.options["max_actions"])
    rows = eval_cost(args.preset, args.device, args.sample, args.data_dir, args.proposals, beam)
    print_rows(rows, args.preset, args.device)
    return rows


if __name__ == "__main__":
    main()
