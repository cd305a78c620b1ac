"""DTG word-synchronous beam: the KV-cached search against the port of the official loop re-encoding every prefix.

``DTGBeamScorer`` (``experiments/families/dtg/beam.py``: per token step one batched ``TransformerXL.step`` over
the new tokens of every hypothesis of ``--batch`` sentences searched together, keys and values cached in one
pool) against ``OfficialBeamPort`` (``reference_beam.py``: a
step-by-step port of the official ``word_sync_beam_search`` whose slots re-encode their whole prefix with a full
forward pass whenever they need their next distribution, as a beam without a cache does). Both run the same
search at the same settings on the same sentences, batch by batch, alternating who goes first
(``tg_beam.compare_speed``); their totals are checked equal (1e-3). Printed: sentences per second of each and
the ratio.

Model: a randomly initialised arc-standard DTG of ``--preset`` (default ``cpu-small``; speed does not depend on
the weights) with the vocabulary of UD EWT train (min count 2). Sentences: the first UD EWT dev sentences of 5
to ``--max-words`` words. The official code's own loop (per-slot ``TGAgent`` objects deep-copied at every step,
top-k on the GPU) is not timed here. Then the same cached search with ``--batch`` sentences advancing together
against one sentence at a time (what it did before), interleaved the same way.

    PYTHONPATH=. python benchmarks/dtg_beam.py [--beam 10 --word-beam 3 --max-actions 15] [--sentences 6]

Measured 2026-11-25 (the official loop's search; 6 sentences, 87 words, 1 thread, on the shared 2-core CPU at
a load average of 14-16, so the absolute rates are low; the two alternate batch by batch, so the ratio is the
steadier number; the random model generates every word but completes no tree within the closing steps on 4 of
the 6 sentences, total -inf in both)::

    beam 10/3, <= 15 token steps:  cached 0.98 sentences/s, re-encoding 0.41:  2.4x
    beam 50/5, <= 15 token steps:  cached 0.63 sentences/s, re-encoding 0.11:  5.7x

(The previous search against its re-encoding twin: 4.1x at 10/3, 11.1x at 50/5, in the git history.)

Measured 2026-11-28 with sentences searched together (1 thread, the shared 2-core CPU at a load average of 2.5-5
from other work; the second table of each run compares the same cached search with ``--batch`` sentences
together against one at a time, interleaved)::

    beam 10/3, --batch 3:  cached 3.20 sentences/s, re-encoding 0.85:  3.8x;  3 together 2.81, alone 1.47:  1.9x
    beam 50/5, --batch 6:  cached 1.66 sentences/s, re-encoding 0.19:  8.8x;  6 together 1.22, alone 0.75:  1.6x
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import torch

from benchmarks.dtg_encoding import vocabularies
from benchmarks.tg_beam import compare_speed
from experiments.families import dtg as dtg_family
from experiments.families.dtg.beam import DTGBeamScorer
from experiments.families.dtg.reference_beam import OfficialBeamPort
from experiments.families.dtg.scorers import DTGModel
from experiments.presets import load_presets
from lightning_modules.data.corpora import load_corpus
from lightning_modules.families.dtg.model import build

PRESETS = Path(dtg_family.__file__).parent / "presets" / "dtg.yaml"


def random_dtg(system: str = "standard", preset: str = "cpu-small", data_dir: str | None = None, split: str = "train",
               overrides: dict[str, Any] | None = None) -> DTGModel:
    """A randomly initialised DTG of ``preset`` with the vocabulary of UD EWT ``split`` (seed 0)."""
    trees = [tree for _, tree in load_corpus("ud-ewt", data_dir).sentences(split)]
    vocab, words = vocabularies(trees, system)
    cfg = {**load_presets(PRESETS)[preset], "system": system, **(overrides or {})}
    torch.manual_seed(0)
    module = build({**cfg, "vocab_size": len(vocab)})
    meta = {"family": "dtg", "config": {"model": cfg}, "vocab": {"terminals": "words", "words": words.to_dict()}}
    return DTGModel(module, meta, vocab)


def dev_sentences(count: int, max_words: int, data_dir: str | None = None) -> list[list[str]]:
    """The first ``count`` UD EWT dev sentences of 5 to ``max_words`` words."""
    trees = [tree for _, tree in load_corpus("ud-ewt", data_dir).sentences("dev")]
    return [list(t.forms) for t in trees if 5 <= len(t) <= max_words][:count]


def main(argv: list[str] | None = None) -> dict[str, float]:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--preset", default="cpu-small")
    ap.add_argument("--sentences", type=int, default=6)
    ap.add_argument("--max-words", type=int, default=20)
    ap.add_argument("--beam", type=int, default=10)
    ap.add_argument("--word-beam", type=int, default=3)
    ap.add_argument("--max-actions", type=int, default=15, help="token steps per word (an arc is two)")
    ap.add_argument("--fast-track", type=int, default=0)
    ap.add_argument("--batch", type=int, default=3, help="sentences per interleaved batch")
    ap.add_argument("--threads", type=int, default=1,
                    help="torch threads (default 1: on a shared CPU more threads oversubscribe it)")
    ap.add_argument("--data-dir", help="where `synbench prepare` staged ud-ewt (default: $SYNBENCH_DATA, ...)")
    ap.add_argument("--vocab-split", default="train", help="the UD EWT split the vocabulary comes from")
    ap.add_argument("--tiny", action="store_true", help=argparse.SUPPRESS)  # tests: a 2-layer, 32-wide DTG
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    tiny = {"d_model": 32, "n_layers": 2, "n_heads": 2, "d_ff": 64} if args.tiny else None
    model = random_dtg("standard", args.preset, args.data_dir, args.vocab_split, tiny)
    sentences = dev_sentences(args.sentences, args.max_words, args.data_dir)
    words = sum(len(s) for s in sentences)
    print(f"model: random {args.preset} DTG (arc-standard, {len(model.vocab):,} tokens); {len(sentences)} "
          f"UD EWT dev sentences, {words} words; beam {args.beam}/{args.word_beam}, fast-track {args.fast_track}, "
          f"<= {args.max_actions} token steps per word; {torch.get_num_threads()} threads")
    settings = (args.beam, args.word_beam, args.max_actions, args.fast_track)
    cached = DTGBeamScorer(model, *settings, batch_size=args.batch)
    reference = OfficialBeamPort(model, *settings)
    rates = compare_speed(cached, reference, sentences, args.batch)
    print(f"\n{args.batch} sentences advancing together against one at a time (the same cached search):")
    alone = DTGBeamScorer(model, *settings, batch_size=1)
    together = compare_speed(cached, alone, sentences, args.batch, rounds=2,
                             labels=(f"{args.batch} together", "one at a time"))
    return {**rates, "together": together["cached"], "alone": together["reference"]}


if __name__ == "__main__":
    main()
