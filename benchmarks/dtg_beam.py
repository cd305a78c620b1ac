"""DTG word-synchronous beam: the KV-cached search against re-encoding every prefix, same run, interleaved.

``DTGBeamScorer`` (``experiments/families/dtg/beam.py``: per action step one batched ``TransformerXL.step``
over the frontier's new tokens, keys and values cached in a pool) against ``ReencodingDTGBeamScorer``
(``reference_beam.py``: the same search inherited, but every hypothesis that needs its next distribution
re-encodes its whole prefix with a full forward pass, as a beam without a cache does). Both score the same
sentences at the same settings, batch by batch, alternating who goes first (``tg_beam.compare_speed``); their
totals are checked equal (1e-3). Printed: sentences per second of each and the ratio.

Model: a randomly initialised DTG of ``--preset`` (default ``cpu-small``; speed does not depend on the
weights) with the vocabulary of UD EWT train (min count 2) and ``--system``. Sentences: the first UD EWT dev
sentences of 5 to ``--max-words`` words. The official DTG beam (``beam_search_standard.py``) is a third
design, not timed here: per-hypothesis ``TGAgent`` objects deep-copied at every step, top-k on the GPU.

    PYTHONPATH=. python benchmarks/dtg_beam.py [--beam 10 --word-beam 3 --max-actions 8] [--sentences 6]

Measured 2026-11-24 14:59-15:11 UTC on this machine's CPU (2 cores shared with three other agents' jobs,
load average 1.2-3.0; one torch thread; random cpu-small DTG; UD EWT dev sentences of 5-20 words; <= 8
actions per word; interleaved, same run; totals equal):

    system     vocabulary       beam / word beam   sentences (batch)   cached s/sent   re-encoding s/sent   speed-up
    standard   9,944 (train)    10 / 3             6 (3)               0.84             3.44                 4.1x
    standard   9,944 (train)    50 / 5             4 (2)               1.83            20.31                11.1x
    swift      9,964 (train)    10 / 3             6 (3)               1.11             3.20                 2.9x
    eager      2,228 (dev)      10 / 3             6 (3)               0.79             3.11                 4.0x

arc-eager uses the dev vocabulary: with UD EWT train's, the word "pop" (4 occurrences) collides with arc-eager's
``pop`` transition token and ``ActionVocab`` refuses the vocabulary (``dtg_data.build`` builds it the same way).
The speed-up grows with the beam (the re-encoding cost is beam x prefix length per step; the cached step's is
per new token).
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
from experiments.families.dtg.reference_beam import ReencodingDTGBeamScorer
from experiments.families.dtg.scorers import DTGModel
from experiments.presets import load_presets
from lightning_modules.data.corpora import load_corpus
from lightning_modules.families.dtg import encoding as dtg
from lightning_modules.families.dtg.model import build

PRESETS = Path(dtg_family.__file__).parent / "presets" / "dtg.yaml"


def random_dtg(system: str, preset: str = "cpu-small", data_dir: str | None = None, split: str = "train",
               overrides: dict[str, Any] | None = None) -> DTGModel:
    """A randomly initialised DTG of ``preset`` with the vocabulary of UD EWT ``split`` (seed 0)."""
    trees = [tree for _, tree in load_corpus("ud-ewt", data_dir).sentences(split)]
    vocab, words = vocabularies(trees, system)
    cfg = {**load_presets(PRESETS)[preset], "system": system, **(overrides or {})}
    torch.manual_seed(0)
    module = build({**cfg, "vocab_size": len(vocab)})
    meta = {"family": "dtg", "config": {"model": cfg}, "vocab": {"words": words.to_dict()}}
    return DTGModel(module, meta, vocab)


def dev_sentences(count: int, max_words: int, data_dir: str | None = None) -> list[list[str]]:
    """The first ``count`` UD EWT dev sentences of 5 to ``max_words`` words."""
    trees = [tree for _, tree in load_corpus("ud-ewt", data_dir).sentences("dev")]
    return [list(t.forms) for t in trees if 5 <= len(t) <= max_words][:count]


def main(argv: list[str] | None = None) -> dict[str, float]:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--system", choices=dtg.SYSTEMS, default="standard")
    ap.add_argument("--preset", default="cpu-small")
    ap.add_argument("--sentences", type=int, default=6)
    ap.add_argument("--max-words", type=int, default=20)
    ap.add_argument("--beam", type=int, default=10)
    ap.add_argument("--word-beam", type=int, default=3)
    ap.add_argument("--max-actions", type=int, default=8)
    ap.add_argument("--batch", type=int, default=3, help="sentences per interleaved batch")
    ap.add_argument("--threads", type=int, default=1,
                    help="torch threads (default 1: on a shared CPU more threads oversubscribe it)")
    ap.add_argument("--data-dir", help="where `synbench prepare` staged ud-ewt (default: $SYNBENCH_DATA, ...)")
    ap.add_argument("--vocab-split", default="train", help="the UD EWT split the vocabulary comes from")
    ap.add_argument("--tiny", action="store_true", help=argparse.SUPPRESS)  # tests: a 2-layer, 32-wide DTG
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    tiny = {"d_model": 32, "n_layers": 2, "n_heads": 2, "d_ff": 64} if args.tiny else None
    model = random_dtg(args.system, args.preset, args.data_dir, args.vocab_split, tiny)
    sentences = dev_sentences(args.sentences, args.max_words, args.data_dir)
    words = sum(len(s) for s in sentences)
    print(f"model: random {args.preset} DTG (arc-{args.system}, {len(model.vocab):,} tokens); {len(sentences)} "
          f"UD EWT dev sentences, {words} words; beam {args.beam}/{args.word_beam}, <= {args.max_actions} "
          f"actions per word; {torch.get_num_threads()} threads")
    cached = DTGBeamScorer(model, args.beam, args.word_beam, args.max_actions)
    reference = ReencodingDTGBeamScorer(model, args.beam, args.word_beam, args.max_actions)
    return compare_speed(cached, reference, sentences, args.batch)


if __name__ == "__main__":
    main()
