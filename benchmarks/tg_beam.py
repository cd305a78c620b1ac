"""TG word-synchronous beam: the KV-cached search against re-encoding every prefix, and the bound vs the beam.

- **Speed.** ``BeamScorer`` (``experiments/families/tg/beam.py``: one batched ``TransformerXL.step`` per
  action step over the hypotheses of ``--batch`` sentences, keys and values cached, the hypotheses rows of
  tensors with their selection on the device — since 2026-11-28; before, Python objects per hypothesis)
  against the reference
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

History, condensed (2026-11-24 to 11-29, this machine's 2 CPU cores shared with other agents' jobs, so
the same code's ratio moved by up to 1.5x with the load): the first cached search (Python objects per
hypothesis) ran 7-8x at 10/3 and 10-14x at 50/5 (load 4-13); feeding a closing nonterminal's COMPOSE and
STACK tokens in the same step, the output layer only on rows that predict, and the hypotheses as rows of
tensors (2026-11-28: 8.1x and 10.2x at load 8-9) changed little, and two tries of 2026-11-29 were dropped
(q, k, v as one product with the masks built once per step, no change; one attention over the union of a
step's keys, a loss at 50/5, whose B x U scores grow with the frontier). Longer sentences do not buy the
ratio (21-40 words: 6.9x vs 6.6x at 5-20). Every profile since has said the same: the search is bound by
the matrix products the bound needs plus a fixed cost per tensor operation spread over everything.

Fewer operators per step (2026-11-29). Counted with a ``TorchDispatchMode`` keyed by the calling source
line (10/3, 6 sentences, batch 3: 369 network steps; 50/5, 4 sentences, batch 4: 189), ATen operators per
network step, before (commit edcf243) -> after:

    where                                            10 / 3         50 / 5
    network step (layers, attention, pool)           362 -> 182      363 -> 185
    attention rule (``AttentionRule.advance``)       126 ->  79      131 ->  82
    hypotheses (``Hypotheses``, ``Decoder.feed``)    117 ->  87      115 ->  87
    search (``beam.py``: selection, completions)      75 ->  73       73 ->  71
    all                                              680 -> 423      682 -> 425

What changed: ``TransformerXL.step`` reads ``step_parameters()`` (built once per search: every attention
function's q, k, v weights stacked, the output weights side by side, u and v stacked, the position table
projected, scaled and given its zero row) and per layer issues one q/k/v product, one slice write of the
new rows, one gather of each query's own attention function's keys and values (COMPOSE rows: the second),
the position logits of all heads as one batched product read through one flat index built once per step
(with the mask), one SDPA call on the gathered rows' strided views and one output product (before: per
attention function three projections, a write, a gather, the position logits padded, gathered and masked
per layer, and both functions' attention computed and selected). ``AttentionRule.advance``,
``Decoder.feed`` and ``Hypotheses.append`` take ``index=None`` for every row (the fields replaced, not
indexed and written back); ``first_chunk`` (the decoder's host-side position bound below the segment
length) skips the chunk and memory bookkeeping; a one-piece word's completions share the frontier's fields
instead of copying every row. Same trees and numbers (the TG and DTG beam tests; the 10/3 totals equal to
1e-8 relative).

Speed, before and after (this script, each run with its own re-encoding reference; old and new code run
alternately as separate processes, ``--rounds 2``; random ``cpu-small`` TG, 5-20 words, <= 8 actions per
word, one thread; load average 2.1-3.1 (another agent's jobs on the 2 cores)):

    beam / word beam   sentences (batch)   code     cached s/sent    re-encoding s/sent   speed-up
    10 / 3             6 (3)               before   0.413 / 0.420    2.596 / 2.521        6.3x / 6.0x
    10 / 3             6 (3)               after    0.383 / 0.358    2.620 / 2.501        6.8x / 7.0x
    50 / 5             4 (4)               before   1.001 / 1.029    9.933 / 10.273        9.9x / 10.0x
    50 / 5             4 (4)               after    1.010 / 0.969   10.254 / 9.901        10.2x / 10.2x

So 38% fewer operators bought ~12% at 10/3 and nothing measurable at 50/5: past this point the operator
count is not what bounds the time. What bounds the rest (``torch.profiler``, after; ATen self time): at 10/3
(2.42 s search under the profiler, 1.79 s of it inside operators) the matrix products 0.84 s (``addmm``,
``mm``, ``bmm``: the 4 layers on 12,857 fed tokens, the 5,390-way output layer on 10,697 predicting rows;
the output layer runs at ~17 G multiply-adds/s inside the search against ~36 alone: likely its 2.7 MB weight
leaves the 1 MB L2 between steps), SDPA 0.14 s, the key/value gather 0.13 s, log-softmax 0.06 s, GELU
0.05 s: ~1.2 s, 0.2 s per sentence, against the reference's ~2.55 s per sentence, so with every other cost
gone the ratio would be ~13x; at 50/5 (3.3 s in operators) the same kernels take 2.7 s (products 1.5 s, SDPA
0.53 s, gather 0.34 s), ~15x at best. The rest is ~425 small operators per step (~0.6 s at 10/3) and the
Python around them (~0.6 s). 20x needs fewer floating-point operations per token or lower precision (both
change the numbers), not fewer operators.

At the paper's beam (2026-11-29, after the change above; ``--beam 100 --word-beam 10 --max-actions 15
--min-words 15 --max-words 25 --rounds 1``, one thread, beside a CI run on the other core): random
``cpu-small``, 2 sentences (41 words), batch 2: 8.208 vs 102.256 s per sentence, 12.5x; random ``ptb`` TG
(``--preset ptb``: 16 layers, d_model 192), 1 sentence (24 words): 77.580 vs 1141.443 s, 14.7x. Wider beams,
longer sentences and the deeper model raise the ratio toward the ~15x bound, not past it.

``torch.compile(TransformerXL.step, dynamic=True)`` (inductor, CPU; tried on this session's step before
its SDPA change): the first 10/3 search of the 6 sentences took 112 s (compiling), later ones 7.9 s
against 1.95 s eager (804 calls captured, 2 unique graphs), so it loses end to end and was not kept.

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
