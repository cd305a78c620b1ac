"""Label log-probs of encoded examples from a Transformer-XL core network's chunk logits: what a solo
``TXLModel`` (``txl_model``) and a seed stack (``stacked``) both compute from their forward's logits, so a stacked
result differs from the solo one only in the forward itself."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch


def picked_logprobs(logits: Sequence[torch.Tensor], chunks: Sequence[Any]) -> np.ndarray:
    """[B, N] float32 log-prob of each chunk position's label (N the chunks' total length; 0 where the label
    is 0), from the chunks' logits (float32 log-softmax of them)."""
    per_chunk = []
    for chunk_logits, chunk in zip(logits, chunks, strict=True):
        scores = chunk_logits.float()
        picked = scores.gather(-1, chunk.labels[..., None]).squeeze(-1)
        per_chunk.append((picked - torch.logsumexp(scores, -1)).masked_fill(chunk.labels == 0, 0.0))
    return torch.cat(per_chunk, dim=1).cpu().numpy()  # chunks before the last have full length


def per_example(logprobs: np.ndarray, examples: Sequence[Any]) -> list[np.ndarray]:
    """Each example's row of ``picked_logprobs``, cut to its length, as float64."""
    lp = logprobs.astype(np.float64)
    return [lp[b, : len(e)] for b, e in enumerate(examples)]
