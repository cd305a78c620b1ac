"""The inference dtype of a scorer's network: ``float32`` (the default, the papers') or ``bfloat16``.

``--inference-dtype bfloat16`` (``eval ppl|sg|blimp|rerank|pairs``, ``surprisals``; ``inference_dtype:`` in an
experiment spec's ``evaluations:`` entry) runs every call of the scorer under ``torch.autocast(DEVICE,
torch.bfloat16)``: the matmuls (linear layers, attention products, LSTM cells, the output projection) run in
bf16 with float32 weights, whatever the family, because the wrapper (``scorers/autocast.py``) sits around the
scorer every family builds (beams, proposal marginals, stacked seeds, ``hf:`` models alike); no family code
changes. The numerically sensitive parts stay float32: the wrapper casts the bf16 input of every
log-softmax, softmax, logsumexp, cross-entropy and sum to float32 before it runs (autocast's CPU lists leave
those in bf16), so the log-probabilities of the vocabulary, their sums over a sentence and the logsumexp over
proposals and beam hypotheses are float32 arithmetic on (bf16-rounded) logits.

**What it does not promise.** Issue 39 asked for results within 1e-3 nats per sentence of float32. Measured on
trained cpu-small checkpoints of every family on PTB-sample sentences (docs/evaluation.md, "Inference dtype";
tests/experiments/evaluate/test_inference_dtype.py), bf16 matmuls move sentence log-probabilities by 1e-2 to
1e-1 nats (up to about 1 nat for SOM, whose structure decisions flip), also with the output projection kept in
float32: the rounding of the hidden states alone (8 bits of mantissa) exceeds 1e-3 nats per sentence. So the
setting states its measured bound instead (``MEASURED_NATS_PER_WORD``): it is a speed setting whose results
are recorded as bf16 (``settings.inference_dtype`` and the task identity, so a bf16 result is never taken for
or cached with a float32 one), not a drop-in for float32 numbers.

A scorer that runs no network (the n-gram baselines) refuses ``bfloat16`` (``InputError`` at the flag).
"""

from __future__ import annotations

import argparse
from typing import Any

from lightning_modules.errors import InputError

INFERENCE_DTYPES = ("float32", "bfloat16")  # the first is the default: the papers score in float32
ASKED_NATS_PER_SENTENCE = 1e-3  # issue 39's bound, NOT met by bf16 matmuls (module docstring)
# the largest |log p_bf16 - log p_fp32| per word of a sentence measured on trained cpu-small checkpoints of
# every family (tests/experiments/evaluate/test_inference_dtype.py asserts it; SOM, whose tree decisions flip
# under bf16 rounding, is the largest)
MEASURED_NATS_PER_WORD = 0.1

def add_argument(p: argparse.ArgumentParser) -> None:
    """``--inference-dtype`` (default float32)."""
    p.add_argument("--inference-dtype", choices=INFERENCE_DTYPES, default=INFERENCE_DTYPES[0],
                   help="the scorer network's matmuls: float32 (the default, the papers') or bfloat16 (autocast; "
                        "log-softmax and sums in float32; NOT within 1e-3 nats of float32: measured up to "
                        f"{MEASURED_NATS_PER_WORD} nats per word, docs/evaluation.md)")


def check(value: Any, where: str) -> str:
    """``value`` if it is an inference dtype, else an ``InputError`` at ``where``."""
    if value not in INFERENCE_DTYPES:
        raise InputError(f"expected {' or '.join(INFERENCE_DTYPES)}, got {value!r}", where)
    return str(value)


def describe(dtype: str) -> str:
    """The description suffix of a scorer's headline (empty for the default)."""
    return "" if dtype == INFERENCE_DTYPES[0] else ", bf16 autocast (log-softmax and sums in float32)"


def applied(scorer: Any, dtype: str, device: str, runs_network: bool, where: str) -> Any:
    """``scorer`` as it runs at ``dtype`` on ``device``: itself for float32, wrapped for bfloat16; a scorer that
    runs no network (``runs_network`` False) refuses bfloat16 with an ``InputError`` at ``where``."""
    dtype = check(dtype, "--inference-dtype")
    if dtype == INFERENCE_DTYPES[0]:
        return scorer
    if not runs_network:
        raise InputError(f"{where} runs no network: --inference-dtype {dtype} does not apply", "--inference-dtype")
    from experiments.evaluate.scorers.autocast import AutocastScorer  # torch: imported when a scorer runs

    return AutocastScorer(scorer, dtype, device)
