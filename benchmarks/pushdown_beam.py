"""Pushdown-LM beam search: the cached incremental step against re-reading the prefix, measured in the same run.

``BeamScorer`` (word-synchronous beam over attachment decisions) drives the model through ``start``/``step``:
each position's keys and values are computed once into buffers preallocated per hypothesis
(``lightning_modules.families.pushdown.decoding``), so a step costs O(t), and the ``--sentences`` sentences of
a length advance together (one ``step`` per token over all their hypotheses). The references: the same cached
search one sentence at a time (what it did before), and what a beam search without a cache does, one sentence
at a time: every step runs the training forward over the whole prefix of every hypothesis with its tape rows
(O(t^2) per step). All give the same log-probabilities (checked on every sentence); the printed table has the
time per sentence and the ratios.

Model: the ``cpu-small`` Pushdown preset with random weights over a 2,000-token vocabulary (the timing does not
depend on the weights), one torch thread. Sentences: random token sequences of each ``--lengths``.

    PYTHONPATH=. python benchmarks/pushdown_beam.py [--lengths 10 20 40] [--beams 8 32] [--sentences 3]
    PYTHONPATH=. python benchmarks/pushdown_beam.py --device cuda --preset ptb --lengths 20 40 --beams 32 300

Measured 2026-11-28 (4 sentences per length, 1 thread, the 2-core CPU at a load average of about 2 from a CI run;
seconds per sentence)::

    length  beam  together  alone  recompute  vs recompute  vs alone
        10     8     0.019  0.039      0.052          2.7x      2.1x
        10    32     0.027  0.051      0.088          3.2x      1.8x
        20     8     0.029  0.102      0.127          4.4x      3.6x
        20    32     0.079  0.165      0.455          5.8x      2.1x
        40     8     0.077  0.211      0.434          5.6x      2.7x
        40    32     0.204  0.270      0.904          4.4x      1.3x

The ratio fell from length 20 to 40 at beam 32 although the cached step is O(t) and re-encoding O(t^2). The
profile (torch.profiler and cProfile, length 40, beam 32, the 4 sentences together, 1 thread; 2026-11-29) said
why: about 60 % of a step was O(t) copying into freshly allocated tensors of several MB. ``aten::index`` 22 %
(``DecodingState.select`` indexing every block's keys and values, the final states and the attachment head's
key features into new tensors; the head's depth-feature gather), ``add`` 12 % and ``clamp_min`` 11 % (the
head's [N, t, 2d + p] hidden layer, key + depth features and ReLU, two more new tensors), ``cat`` 10 %
(every cache grown by concatenation), ``copy_`` 7 % (the relative-position term's matmul broadcast the [H, t,
d] table to N copies); the linear layers (constant per step) 18 %. On this CPU a fresh multi-MB tensor costs
its page faults: appending to and reordering one block's 0.65 MB key cache took 1.3 ms by cat + index and 0.27
ms by ``index_select`` into a preallocated buffer; the head's hidden layer 7.4 ms as before and 2.0 ms as one
``embedding_bag`` (gather and sum in one pass) + in-place ReLU + one batched matmul. Now (``decoding``): keys
and values in preallocated per-hypothesis buffers, written in place, a reorder copying the survivors'
prefixes once into a second buffer set; the head's key features and the states written once per position and
addressed by slot (a reorder moves no feature), the states gathered only when asked; the relative term one
matmul per head. The same profile (load 1.0-1.2 both times): 0.65 s instead of 1.12 s, the linear layers now
the largest part (30 %), then the reorder's ``index_select`` (20 %) and the attention's batched matmuls (16 %).

Measured 2026-11-29 after that change (same command, 4 sentences per length, 1 thread; the 2-core CPU shared
with another agent's runs, load average 1.9 before and after; seconds per sentence)::

    length  beam  together  alone  recompute  vs recompute  vs alone
        10     8     0.028  0.049      0.084          3.0x      1.7x
        10    32     0.034  0.062      0.102          3.0x      1.8x
        20     8     0.038  0.081      0.153          4.1x      2.2x
        20    32     0.060  0.098      0.314          5.2x      1.6x
        40     8     0.065  0.180      0.388          6.0x      2.8x
        40    32     0.161  0.301      1.160          7.2x      1.9x

Two runs just before it (load 1.6-2.0) gave 6.3x and 6.1x at 40/32 and 5.6x and 4.4x at 20/32, one after the
scorer's host transfers were batched per step (load 1.9-2.0) 6.2x and 5.1x: one timing per cell, so a cell moves
by a quarter or more with the load. The ratio now grows with the length at beam 32. At length
10-20 the constant part of a step bounds it: the linear layers (the attachment head's MLPs and the word
logits over N hypotheses), which re-encoding pays as well.

The search state and the pruning then moved to the model's device (``scorers._Beams``: the stack states and
scores of every sentence's hypotheses as tensors, top-k per sentence by a stable sort; nothing read back to
the host inside a word step, the results once per batch), to spare a GPU its per-step syncs. On this CPU the
search's own part was already small beside ``step``: measured 2026-11-29, this command at 20/40 x beam 32, 3
sentences, 1 thread, interleaved with the previous host-numpy scorer swapped into this script, three rounds
each, twice (load average 1.8-1.9, then 1.1-1.2; seconds per sentence, mean of each run's three rounds)::

    length  beam   together        alone         recompute
                   host  device    host  device  host  device
        20    32  0.069  0.065    0.106  0.103   0.298  0.299   (load 1.8-1.9)
        40    32  0.169  0.169    0.225  0.242   0.970  0.971
        20    32  0.065  0.066    0.092  0.102   0.276  0.275   (load 1.1-1.2)
        40    32  0.160  0.148    0.220  0.219   0.922  0.906

Equal within the rounds' spread (a cell moves by up to a fifth between rounds); a focused run at length 40 (5
interleaved rounds, load 1.2) gave 0.227 s host and 0.218 s device alone, 0.154 s and 0.143 s together. The
gain the change is for, on a GPU, was not measured here (no GPU in that session).
"""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass

import numpy as np
import torch

from experiments.config import resolve_train_config
from experiments.families.pushdown.scorers import BeamScorer, PushdownModel
from lightning_modules.families.pushdown.model import build

VOCAB = 2000


@dataclass
class Prefix:
    """The reference's state: the tokens and tape rows read so far, per hypothesis."""

    tokens: torch.Tensor  # [N, t]
    rows: list[torch.Tensor]  # row j: [N, j + 1]

    def select(self, origins: torch.Tensor) -> Prefix:
        return Prefix(self.tokens[origins], [r[origins] for r in self.rows])


class Recompute:
    """``start``/``step`` as ``PushdownLM``'s, by the training forward over the whole prefix at every step."""

    def __init__(self, module: torch.nn.Module):
        self.module = module

    def start(self, max_length: int) -> Prefix:
        return Prefix(torch.zeros(1, 0, dtype=torch.long, device=next(self.module.parameters()).device), [])

    @torch.no_grad()
    def step(self, state: Prefix, tokens: torch.Tensor, tape_row: torch.Tensor, next_words: torch.Tensor):
        count = tokens.shape[0]
        state = Prefix(torch.cat([state.tokens.expand(count, -1), tokens[:, None]], dim=1),
                       [r.expand(count, -1) for r in state.rows] + [tape_row])
        length = state.tokens.shape[1]
        device = tokens.device
        tape = torch.zeros(count, length, length, dtype=torch.long, device=device)
        for j, row in enumerate(state.rows):
            tape[:, j, : j + 1] = row
        lengths = torch.full((count,), length, device=device)
        module = self.module
        h = module.hidden_states(state.tokens, tape, lengths)
        words = module.word_logits(h[:, -1]).float().log_softmax(-1)
        attach = module.attachment_head(h, module.embedding(next_words)[:, None], tape[:, -1:], lengths,
                                        query_positions=torch.tensor([length - 1], device=device))
        return words, attach[:, 0].float().log_softmax(-1), state


def main(argv: list[str] | None = None) -> dict[tuple[int, int], dict[str, float]]:
    """Run the comparison; returns seconds per sentence of each contestant by (length, beam)."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lengths", type=int, nargs="+", default=[10, 20, 40])
    ap.add_argument("--beams", type=int, nargs="+", default=[8, 32])
    ap.add_argument("--sentences", type=int, default=3, help="sentences per length (time = their mean)")
    ap.add_argument("--preset", default="cpu-small", help="Pushdown model preset (cpu-small | ptb | ...)")
    ap.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    torch.manual_seed(0)
    config = resolve_train_config("pushdown", args.preset, [])["model"]
    module = build({**config, "vocab_size": VOCAB}, "pushdown").eval()
    tokens = ["<pad>", "<s>", "<eos>", *(f"w{i}" for i in range(VOCAB - 3))]
    meta = {"family": "pushdown", "vocab": {"terminals": "dyck", "tokens": tokens}}
    cached = PushdownModel(module, meta, args.device)
    reference = PushdownModel(module, meta, args.device)
    reference.module = Recompute(module)
    rng = np.random.default_rng(0)
    out = {}
    print(f"{'length':>6} {'beam':>5} {'together s/sent':>16} {'alone s/sent':>13} {'recompute s/sent':>17} "
          f"{'vs recompute':>13} {'vs alone':>9}")
    for length in args.lengths:
        sentences = [[f"w{i}" for i in rng.integers(0, VOCAB - 3, length)] for _ in range(args.sentences)]
        for beam in args.beams:
            times = {}
            results = {}
            contestants = (("together", cached, len(sentences)), ("alone", cached, 1), ("recompute", reference, 1))
            for name, model, batch in contestants:
                scorer = BeamScorer(model, beam, batch_size=batch)
                start = time.perf_counter()
                results[name] = scorer.score(sentences)  # returns host floats: synchronised
                times[name] = (time.perf_counter() - start) / len(sentences)
            for name in ("alone", "recompute"):
                for a, b in zip(results["together"], results[name]):
                    assert abs(a.total - b.total) < 1e-3 and a.extra["attachment"] == b.extra["attachment"]
            print(f"{length:6d} {beam:5d} {times['together']:16.3f} {times['alone']:13.3f} "
                  f"{times['recompute']:17.3f} {times['recompute'] / times['together']:12.1f}x "
                  f"{times['alone'] / times['together']:8.1f}x")
            out[length, beam] = times
    return out


if __name__ == "__main__":
    main()
