"""The inference dtype of a scorer's network: ``float32`` (the default, the papers') or ``bfloat16``.

``--inference-dtype bfloat16`` (``eval ppl|sg|blimp|rerank|pairs``, ``surprisals``; ``inference_dtype:`` in an
experiment spec's ``evaluations:`` entry) runs every call of the scorer under ``torch.autocast(DEVICE,
torch.bfloat16)``: the matmuls (linear layers, attention products, the output projection: what autocast's
list for the device holds) run in bf16 with float32 weights, whatever the family, because the wrapper
(``scorers/autocast.py``) sits around the scorer every family builds (beams, proposal marginals, ``hf:`` models
alike; an eval group scores bf16 members solo, ``eval_group.member_stacks``); no family code changes. The
numerically sensitive parts stay float32: the wrapper casts the bf16 input of every
log-softmax, softmax, logsumexp, cumulative sum, sum and loss to float32 before it runs (autocast's CPU lists leave
those in bf16), so the log-probabilities of the vocabulary, their sums over a sentence and the logsumexp over
proposals and beam hypotheses are float32 arithmetic on (bf16-rounded) logits.

**What it does not promise.** The target was results within 1e-3 nats per sentence of float32. bf16
matmuls do not meet it. Measured on trained cpu-small checkpoints of every family, PTB-sample sentences
(docs/cli.md, "Inference dtype"; tests/experiments/evaluate/test_inference_dtype.py), the largest gap of a
sentence's log-probability is 0.01-0.05 nats for exact and proposal scoring, 0.23 for SOM and 0.15-0.7 for the
beams (Pushdown, DTG), whose surviving hypotheses change. Keeping the output projection in float32 as well
(tried by hand) still left 0.009-0.06 nats: the bf16 rounding of the hidden states alone (8 bits of mantissa)
exceeds 1e-3 nats per sentence. Without the float32 log-softmaxes and softmaxes SOM's gap was 0.95 nats. So
the setting states its measured bound instead (``MEASURED_NATS_PER_WORD``): a speed setting whose results are
recorded as bf16 (``settings.inference_dtype`` and the task identity, so a bf16 result is never taken for or
cached with a float32 one), not a drop-in for float32 numbers.

A scorer that runs no network (the n-gram baselines) refuses ``bfloat16`` (``InputError`` at the flag).
"""

from __future__ import annotations

import argparse
from typing import Any

from lightning_modules.errors import InputError

INFERENCE_DTYPES = ("float32", "bfloat16")  # the first is the default: the papers score in float32
# the stated bound: |log p_bf16 - log p_fp32| of a sentence over its words. Measured on trained cpu-small
# checkpoints of every family at most 0.005 for scorers of given inputs (exact, gold, proposals); SOM 0.019 (not
# analysed further); the beams more, as bf16 scores change which hypotheses survive:
# Pushdown 0.010, DTG 0.05. tests/experiments/evaluate/test_inference_dtype.py asserts it for every family
MEASURED_NATS_PER_WORD = 0.1


def add_argument(p: argparse.ArgumentParser) -> None:
    """``--inference-dtype`` (default float32)."""
    p.add_argument("--inference-dtype", choices=INFERENCE_DTYPES, default=INFERENCE_DTYPES[0],
                   help="the scorer network's matmuls: float32 (the default, the papers') or bfloat16 (autocast; "
                        "log-softmax and sums in float32; NOT within 1e-3 nats of float32: measured up to "
                        f"{MEASURED_NATS_PER_WORD} nats per word, docs/evaluation.md)")


def add_plan_argument(p: argparse.ArgumentParser) -> None:
    """``--inference-dtype`` of ``synbench evaluate`` and ``reproduce``: that of every entry naming none."""
    p.add_argument("--inference-dtype", choices=INFERENCE_DTYPES, default=None,
                   help="the scorers' inference dtype where an evaluations: entry names none (default: float32, "
                        "the papers'); bfloat16 is bf16 autocast, not within 1e-3 nats of float32 (docs/cli.md)")


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

    return AutocastScorer(scorer, device)
