"""TG word-synchronous beam: the KV-cached search against re-encoding every prefix, and the bound vs the beam.

- **Speed.** ``BeamScorer`` (``experiments/families/tg/beam.py``: one batched ``TransformerXL.step`` per
  action step over the hypotheses of ``--batch`` sentences, keys and values cached, the hypotheses rows of
  tensors with their selection on the device — since 2026-11-28; before, Python objects per hypothesis, the
  "cached" rows of the older tables below) against the reference
  ``ReencodingBeamScorer`` (``reference_beam.py``: the same search as the TG beam ran before the cache, and as
  a beam without a cache must: every action step re-encodes every frontier hypothesis's whole prefix). Both
  run in the same process, interleaved sentence batch by sentence batch, at the same settings; their totals
  are checked equal (1e-3). Printed: sentences per second of each and the ratio.
- **Bound vs beam.** The cached beam's corpus bound on the same sentences as the action beam grows
  (``--curve``, word beam = action beam / 10, at least 3): word perplexity exp(-Σ log p̂(x) / words) (an upper
  bound) and the mean log p̂(x) per sentence, with the time per sentence — the curve to choose a beam by —
  beside the gold trees' value exp(-Σ log p(x, y_gold) / words) (also an upper bound on the perplexity).

Model: ``--checkpoint`` (a trained TG / TXL (trees) checkpoint) or a randomly initialised ``cpu-small`` TG
with the PTB-sample vocabulary (speed does not depend on the weights; the bound of random weights is not
meaningful). Sentences: the PTB sample's validation sentences of ``--min-words`` (5) to ``--max-words`` (20)
words.

    PYTHONPATH=. python benchmarks/tg_beam.py [--checkpoint CKPT] [--sentences 6] [--batch 6] [--rounds 2]

Measured 2026-11-24 on this machine's CPU (2 cores shared with four other agents' jobs, load 4-13; one torch
thread each; PTB-sample validation sentences of 5-20 words, <= 8 actions per word; interleaved, same run).
Before (first cached version, load 8-13):

    beam / word beam   sentences (batch)   model           cached s/sent   re-encoding s/sent   speed-up
    10 / 3             6 (6)               random          0.67            4.72                  7.0x
    10 / 3             6 (6)               250-step TG     0.84            6.74                  8.0x
    50 / 5             4 (4)               random          2.27            30.81                13.6x
    50 / 5             4 (4)               250-step TG     2.07            20.67                10.0x
    100 / 10           2 (2)               250-step TG     8.61            98.92                11.5x

After (one gather per layer from a pool holding key and value side by side, the last allocation written as
a slice, a frontier's distributions read as a view of its feed, the cyclic GC paused during a search; load
6-8, which slows both sides):

    beam / word beam   sentences (batch)   model           cached s/sent   re-encoding s/sent   speed-up
    10 / 3             6 (6)               random          0.55            7.27                 13.3x
    10 / 3             6 (6)               250-step TG     2.13            26.88                12.6x
    50 / 5             4 (4)               random          2.64            26.23                 9.9x
    50 / 5             4 (4)               250-step TG     7.10            84.92                12.0x

The target of 20x is not reached. Where the cached search's time goes (cProfile, 250-step TG, 10/3, 6
sentences, batch 6): the network's ``step`` 70% (its 4 layers 57%, embedding and the 5,390-way output
projection 13%; all ``nn.Linear`` calls together 23%, SDPA 8%, the key/value gather 3%: the rest of the
layers' share is the fixed cost of ~60 small tensor operations per step on batches of ~60 tokens), the
log-softmax over the vocabulary 7%, building the attention index tensors 6%, the search's own Python
(constraints, selection, hypotheses) 17%. Closing every completed hypothesis at the end of the sentence (all
of them count in the bound; two tokens per closing nonterminal) is 27% of the total.

Then (2026-11-24, this session): a closing nonterminal's two tokens (COMPOSE, STACK) fed in the *same* step
as two rows of the batch (every layer writes both rows' keys and values before any query reads, so the STACK
token sees its COMPOSE copy: exact, tested at 1e-5; closing feeds 85 -> 45 and all steps 256 -> 216 in the
random model's 10/3 search of 6 sentences), the output layer only on rows whose distribution is read (not
the COMPOSE copies), index tensors built in numpy; the comparison now runs each batch ABBA (``--rounds 2``).
Before (commit 4bbfb9f's beam, measured with this script) and after, each in its own same-run comparison,
random ``cpu-small`` TG, load 1.1-2.7 (other agents' jobs on the 2 cores), two repetitions each (rep 1 /
rep 2):

    beam / word beam   sentences (batch)   version   cached s/sent   re-encoding s/sent   speed-up
    10 / 3             6 (6)               before    0.362 / 0.257   2.318 / 2.047         6.4x / 8.0x
    10 / 3             6 (6)               after     0.249 / 0.314   2.071 / 2.174         8.3x / 6.9x
    10 / 3             12 (12)             before    0.234 / 0.216   1.883 / 1.927         8.0x / 8.9x
    10 / 3             12 (12)             after     0.208 / 0.212   1.851 / 1.912         8.9x / 9.0x
    50 / 5             4 (4)               before    0.872 / 0.907   9.131 / 9.012        10.5x / 9.9x
    50 / 5             4 (4)               after     0.888 / 0.893   9.100 / 9.381        10.3x / 10.5x

Alone on the machine (the same 6 sentences, 10/3, batch 6, best of runs) the cached search went from 1.55 s
to 1.38 s (-11%); in the comparisons the gain is within their run-to-run spread (the table above: the same
code's ratio moves by 1.5x between repetitions). Batching more sentences helps little (10/3, 24 sentences:
0.21 / 0.19 / 0.17 s per sentence at batch 6 / 12 / 24): the search is bound by arithmetic, not by calls.
Where the time goes now (``torch.profiler``, self CPU time by operator, 50/5, 4 sentences, batch 4: 41,014
tokens fed, 16,020 of them closing the completed hypotheses): matrix products (``addmm``/``mm``/``bmm``: the
projections, the feed-forward layers and the 5,390-way output layer on 33,814 predicted rows) 32%, SDPA 16%,
``index_select`` (the key/value gather) 10%, log-softmax over the vocabulary 8%, copies 7%, GELU 7%; the
rest (small tensor operations, the search's Python) ~20%. At 10/3 (6 sentences, batch 6): matrix products
32%, SDPA 12%, ``index_select`` 8%, log-softmax 6%, GELU 5%, copies 6% (~69%). The floating-point work is
what the bound needs (every completed hypothesis's closing, every frontier's full distribution: the
log-softmax needs every logit; 17.5 G multiply-adds at 10/3, 6 sentences, in the linear layers alone, run at
~42 GMAC/s on these ~60-row matrices), so even with every per-operation overhead gone the speed-up would be
about 8.5 / 0.69 and 10.4 / 0.8, ~12-13x, not 20x; 20x needs fewer floating-point operations per token (a
smaller output layer, lower precision: both change the numbers) or faster small-matrix kernels.

By sentence length (2026-11-24, random ``cpu-small`` TG, 10/3, 3 sentences, batch 3, ``--rounds 2``, the
same shared CPU, one run after the other): 21-40 words (``--min-words 21 --max-words 40``, 78 words) 0.706 vs
4.895 s per sentence, 6.9x; 5-20 words (48 words) 0.501 vs 3.294, 6.6x. Longer sentences do not buy the
ratio at these lengths: per sentence both sides took 1.4x and 1.5x as long for 1.6x the words.

2026-11-28: the hypotheses became rows of tensors (``hypotheses.Hypotheses``,
``decoding.AttentionRule``: attend lists, stack, memory, constraint masks, scores and pool rows indexed by
hypothesis; each sentence's top-k by one stable sort on the device). Same hypotheses, trees and numbers as the
re-encoding beam (tests). Measured with this script, random ``cpu-small`` TG, PTB-sample validation sentences
(5-20 words; 100/10: 5-12), <= 8 actions per word, one torch thread, this machine's 2 CPU cores shared with
other agents' jobs (load 7.8-9.3 throughout), interleaved:

    beam / word beam   sentences (batch)   rounds   words   tensor rows s/sent   re-encoding s/sent   speed-up
    10 / 3             6 (6)               2        97      1.448                11.709                8.1x
    50 / 5             4 (4)               2        62      6.247                63.854               10.2x
    100 / 10           2 (2)               1        17      5.666                33.568                5.9x

Against the beam it replaces (its code run from commit 60e60d7 in the same process, interleaved ABBA, same
load; ``--rounds 2``, a script of this session's): 10/3, 6 sentences: 1.852 vs 2.196 s per sentence, 1.2x
(an earlier run, load 9: 1.061 vs 1.079, 1.0x); 50/5, 4 sentences: 5.944 vs 6.942, 1.2x. So on a CPU the
change gains little: as the profile above predicted, the search was already bound by the network's
arithmetic (now, cProfile at 10/3, 6 sentences, load ~9: ``TransformerXL.step`` ~66% of the search, the
attention rule's tensor operations ~8%, selection ~8%, completions ~5%); the 20x target is not reached on
CPU. Removing the per-hypothesis Python is for the accelerator, where the old
search's time was launches and host round trips: a word step now reads back only the number of closing
children of each action step (TG feeds a closing nonterminal as two tokens) and, while a frontier is smaller
than ``beam`` / (opening labels), the count of its allowed actions (and with ``fast_track``, its kept
counts); between words the widths and the pool's live rows. Not yet measured on a GPU (no GPU in this
session): ``gpu_session.sh`` step 5 runs this script there.

2026-11-29, toward 20x on CPU: no gain. Today's ratio (this script; the 2 cores shared with another agent,
load 1.4-2.7; random ``cpu-small`` TG, 5-20 words, <= 8 actions per word, one thread, ``--rounds 2``; the
two tries below, each measured and then dropped):

    beam / word beam   sentences (batch)   code                   cached s/sent   re-encoding s/sent   speed-up
    10 / 3             6 (3, default)      as committed           0.597           3.250                 5.4x
    10 / 3             6 (3, default)      op fusion + union      0.706 / 0.545   3.950 / 3.501         5.6x / 6.4x
    10 / 3             6 (3, default)      op fusion              0.611           3.382                 5.5x
    50 / 5             4 (4)               as committed           1.302           13.391               10.3x
    50 / 5             4 (4)               op fusion              1.387           14.154               10.2x

Profile of the cached search (cProfile, 10/3, 6 sentences, batch 3; 369 network steps, 3.3 s):
``Decoder.feed`` 80%, of which ``TransformerXL.step`` 65% of the total (all linear layers 22%, the output
projection 8% of it; attention 21%: SDPA 6%, the position logits 6%, the masks and bias 4%; the key/value
gather 5%; GELU 2.5%, LayerNorm 2%) and ``AttentionRule.advance`` 8% (~50 small tensor operations per feed);
log-softmax 2-4%; the selection 8%, the completions 5%; closing the completed hypotheses at the sentence end
20%. torch.profiler: ``addmm`` 21% (4,797 calls, ~105 us each), SDPA 8%, ``index_select`` 6.5%, copies
4.5%; the 30 busiest ATen operators alone take ~490,000 calls (132,000 ``as_strided``, 52,000 ``view``):
the fixed cost per operation is spread over everything, not one hot spot. Tried:

- *Op fusion in ``TransformerXL.step``* (commit c361574, reverted in c152658): q, k, v as one product with a
  cached stacked weight, the masks and the expanded position index built once per step instead of per layer,
  the position table's zero row stored instead of a pad per layer, no dropout calls in eval (same totals to
  4 decimals; the TG and DTG beam, layer and TXL LM tests passed). 50/5 search alone, best-of-2 process
  time, old and new code alternating: 5.78 / 5.17 s old (4.58 / 4.14 in an earlier pair) vs 4.49 / 4.06 s
  new: within the load's spread; the table shows no change of the ratio.
- *Plus one attention over the union of the step's keys* (``torch.unique`` of the key rows, each row's keys
  the only finite entries of its bias row; one [B, U] product per head instead of B one-query products):
  the same totals; at 10/3 best-of-3 wall times alternating 2.78 / 2.62 / 2.54 s vs 2.67 / 2.85 / 3.23 s old
  (process time 2.37 / 2.69 vs 2.51 / 2.46), but at 50/5 6.72 / 7.24 s vs 4.58 / 4.14 s: the B x U scores
  grow with the frontier (and across sentences, whose keys never overlap), so it loses where the beam is
  wide.

So, as the 2026-11-24 analysis above concluded, the cached search on this CPU is bound by the arithmetic
the bound needs and by a fixed per-operation cost spread over ~60 operations per layer step; 20x needs fewer
floating-point operations per token or far fewer, larger operations (e.g. a compiled step), not a local
fusion.

On one H100 (2026-11-24, ``--device cuda --preset ptb``: a random 16-layer TG, 2 sentences, 10/3, <= 15
actions per word; the beam as before this session's closing-in-one-step change): cached 0.224 vs re-encoding
0.069 sentences/s, 3.3x; at the papers' widths 100/10 6.6 and 300/30 11.2 s per sentence. Both sides are
bound by kernel launches there (``benchmarks/results/h100-2026-11-24/3-tg_beam.txt``).

Bound vs beam (the 250-step ``cpu-small`` TG, 6 sentences, 97 words; gold trees: word ppl <= 344.01;
re-measured after the changes above, same numbers):

    beam / word beam   word ppl <=   mean log p(x) >=   s/sentence (load 6-8)
    10 / 3             279.42        -91.062             2.76
    50 / 5             267.74        -90.372             7.56
    100 / 10           262.68        -90.064            11.53
    300 / 30           251.40        -89.354            29.46
"""

from __future__ import annotations

import argparse
import math
import time

import torch

from benchmarks.marginalize import cpu_small_model
from experiments.evaluate.scorers.tree_marginal import TreeScorer
from experiments.families.tg.beam import BeamScorer
from experiments.families.tg.reference_beam import ReencodingBeamScorer
from experiments.families.tg.scorers import TGModel
from lightning_modules.data.corpora import load_corpus
from lightning_modules.data.tree import Tree, clean


def gold_trees(count: int, max_words: int, min_words: int = 5) -> list[Tree]:
    """The first ``count`` cleaned validation trees of the PTB sample with ``min_words`` to ``max_words``
    words."""
    corpus = load_corpus("ptb-sample")
    trees = [clean(t) for doc in corpus.splits["valid"] for _, t in doc.sentences]
    return [t for t in trees if min_words <= len(t.leaves()) <= max_words][:count]


def timed(scorer, batch: list[list[str]]) -> tuple[float, list]:
    start = time.perf_counter()
    scores = scorer.score(batch)
    return time.perf_counter() - start, scores


def compare_speed(cached, reference, sentences: list[list[str]], batch: int, rounds: int = 1,
                  labels: tuple[str, str] | None = None) -> dict[str, float]:
    """Sentences per second of the cached and the reference scorer on the same batches, interleaved (each
    batch by both, alternating who goes first; over ``rounds`` passes, so a single batch runs ABBA); their
    totals are checked equal (1e-3). Prints the table, the two rows named by ``labels`` (default: the cached
    scorer's class, and re-encoding)."""
    times = {"cached": 0.0, "reference": 0.0}
    order = [("cached", cached), ("reference", reference)]
    for round_ in range(rounds):
        for lo in range(0, len(sentences), batch):
            results = {}
            for name, scorer in order if (round_ + lo // batch) % 2 == 0 else order[::-1]:
                elapsed, results[name] = timed(scorer, sentences[lo : lo + batch])
                times[name] += elapsed
            for a, b in zip(results["cached"], results["reference"], strict=True):
                assert a.total == b.total or abs(a.total - b.total) < 1e-3, (a.total, b.total)  # -inf: both lost it
    rate = {name: rounds * len(sentences) / t for name, t in times.items()}
    print(f"{'':>26} {'sentences/s':>12} {'s/sentence':>11}")
    for name, label in zip(("cached", "reference"),
                           labels or (f"cached ({type(cached).__name__})", "re-encoding (reference)")):
        print(f"{label:>26} {rate[name]:12.3f} {1 / rate[name]:11.3f}")
    print(f"{'speed-up':>26} {rate['cached'] / rate['reference']:11.1f}x")
    return rate


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--checkpoint", help="a trained tg / txl-trees checkpoint (default: random cpu-small TG)")
    ap.add_argument("--sentences", type=int, default=6)
    ap.add_argument("--min-words", type=int, default=5)
    ap.add_argument("--max-words", type=int, default=20)
    ap.add_argument("--beam", type=int, default=10, help="action beam of the speed comparison")
    ap.add_argument("--word-beam", type=int, default=3)
    ap.add_argument("--max-actions", type=int, default=8)
    ap.add_argument("--batch", type=int, default=3, help="sentences per batch (the reference: one at a time)")
    ap.add_argument("--rounds", type=int, default=2,
                    help="passes over the sentences (order alternates, so one batch runs ABBA)")
    ap.add_argument("--curve", type=int, nargs="*", default=[10, 50, 100, 300])
    ap.add_argument("--curve-sentences", type=int, default=None, help="default: --sentences")
    ap.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    ap.add_argument("--preset", default="cpu-small", help="the random model's TG preset (cpu-small | ptb | bllip)")
    ap.add_argument("--threads", type=int, default=1,
                    help="torch threads (default 1: on a shared CPU more threads oversubscribe it)")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    trees = gold_trees(max(args.sentences, args.curve_sentences or 0), args.max_words, args.min_words)
    if not trees:
        ap.error(f"no validation sentence has {args.min_words} to {args.max_words} words")
    model = TGModel.load(args.checkpoint, args.device) if args.checkpoint else \
        cpu_small_model(args.preset, args.device)[0]
    data = [t.leaves() for t in trees]
    speed = data[: args.sentences]
    words = sum(len(s) for s in speed)
    print(f"model: {args.checkpoint or f'random {args.preset} TG'} ({model.family}), device {args.device}; "
          f"{len(speed)} sentences, "
          f"{words} words; beam {args.beam}/{args.word_beam}, <= {args.max_actions} actions per word; "
          f"{torch.get_num_threads()} threads")
    cached = BeamScorer(model, args.beam, args.word_beam, args.max_actions, batch_size=args.batch)
    reference = ReencodingBeamScorer(model, args.beam, args.word_beam, args.max_actions)
    compare_speed(cached, reference, speed, args.batch, args.rounds)

    curve = data[: args.curve_sentences or args.sentences]
    words = sum(len(s) for s in curve)
    print(f"\nbound vs beam on {len(curve)} sentences ({words} words), <= {args.max_actions} actions per word")
    print(f"{'beam':>6} {'word beam':>10} {'word ppl <=':>12} {'mean log p(x) >=':>17} {'s/sentence':>11}")
    gold = TreeScorer(model, None, method="gold", pos_tags=True).score_trees(
        curve, [[t] for t in trees[: len(curve)]])
    total = sum(s.total for s in gold)
    print(f"{'gold':>6} {'tree':>10} {math.exp(-total / words):12.2f} {total / len(curve):17.3f} {'':>11}")
    for beam in args.curve:
        word_beam = max(3, beam // 10)
        scorer = BeamScorer(model, beam, word_beam, args.max_actions, batch_size=args.batch)
        elapsed, scores = timed(scorer, curve)
        total = sum(s.total for s in scores)
        print(f"{beam:6d} {word_beam:10d} {math.exp(-total / words):12.2f} {total / len(curve):17.3f} "
              f"{elapsed / len(curve):11.2f}")


if __name__ == "__main__":
    main()
