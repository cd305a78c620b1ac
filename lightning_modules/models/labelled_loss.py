"""Cross-entropy at labelled positions only, in chunks of rows, so a batch's full logits never exist.

The Transformer-XL core's loss is the NLL summed over positions whose label is not 0 (and their count). The
[B, L, V] logits of every position (and their float32 copy) were the largest tensors of a step; here the final
hidden states are gathered at the labelled positions first (``labelled_rows``), then projected and scored
``chunk_rows(V)`` rows at a time (``chunked_nll``), so at most one chunk's logits exist at once, forward and
backward. Each chunk's gradients (for its hidden rows and the head's parameters) are computed in the forward,
with ``torch.func.vjp`` on detached inputs, and handed to autograd through a surrogate whose value is 0 and whose
gradient is them; no chunk's logits are kept for the backward. This is exact: the loss of a chunk is a sum over
its rows, and what the surrogate passes on is that sum's gradient, scaled by whatever multiplies the loss.

Dropout: the output dropout still acts on every position's hidden state before the gather (its masks are
those of the full-logits loss); a head with dropout of its own (DTG's split head, whose presets set dropout to
0) now draws it over the labelled rows of each chunk, other masks than before at the same seed.

Precision is the solo run's: the head runs in the ambient autocast dtype (bf16 logits under ``bf16-mixed``) and
the log-softmax and NLL in float32 (``.float()``), as before.

Under ``torch.func.vmap`` (a seed group) the labelled positions differ per seed and a boolean gather has a
data-dependent shape: the group's packer computes, on the host, each seed's flat indices of its labelled
positions padded to the most any seed has, with -1 (``padded_label_index``, the chunk field ``label_index``);
a padded row is scored with label 0, which the loss ignores.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor

IGNORE = 0  # the label of a position that predicts nothing
CHUNK_FLOATS = 2**22  # rows per chunk: as many as keep one chunk's logits within this many values per seed
# (16 MiB in float32; a group of 64 seeds computes 64 such chunks at once, under vmap)

# (hidden rows [N, D], *head parameters) -> logits (or log-probabilities) [N, V]
Head = Callable[..., Tensor]


def chunk_rows(vocab_size: int) -> int:
    """Rows per chunk for a vocabulary of ``vocab_size``: chunk x V <= ``CHUNK_FLOATS`` (at least one row)."""
    return max(1, CHUNK_FLOATS // max(vocab_size, 1))


def label_index(labels: Tensor) -> Tensor:
    """Flat indices (into ``labels.flatten()``) of the labelled positions, in order; a host-sized result (not
    under ``vmap``)."""
    return torch.nonzero(labels.flatten() != IGNORE).squeeze(1)


def padded_label_index(labels: Tensor, full: bool = False) -> Tensor:
    """[S, ...] labels of S seeds -> [S, K] each seed's ``label_index`` padded with -1 to the most any seed has
    (K; ``full``: to every position, so that a static layout's shape does not depend on the count): what
    ``labelled_rows`` gathers under ``vmap``."""
    flat = labels.flatten(1) != IGNORE
    counts = flat.sum(1)
    most = flat.shape[1] if full else int(counts.max()) if counts.numel() else 0
    # stable sort puts each seed's labelled positions first, in order
    order = torch.sort((~flat).to(torch.uint8), dim=1, stable=True).indices[:, :most]
    keep = torch.arange(most, device=labels.device)[None, :] < counts[:, None]
    return torch.where(keep, order, torch.full_like(order, -1))


def labelled_rows(hidden: Tensor, labels: Tensor, index: Tensor | None = None) -> tuple[Tensor, Tensor]:
    """Hidden states [B, L, D] and labels [B, L] -> (rows [K, D], targets [K]) at the labelled positions:
    ``index`` (``padded_label_index``'s row of this sequence batch; -1 = padding, target ``IGNORE``), or all
    labelled positions when None."""
    flat_hidden, flat_labels = hidden.flatten(0, -2), labels.flatten()
    if index is None:
        index = label_index(labels)
        return flat_hidden[index], flat_labels[index]
    safe = index.clamp(min=0)
    targets = torch.where(index >= 0, flat_labels[safe], torch.zeros_like(flat_labels[safe]))
    return flat_hidden[safe], targets


def chunked_nll(rows: Tensor, targets: Tensor, head: Head, params: Sequence[Tensor], vocab_size: int) -> Tensor:
    """Sum over rows of -log softmax(head(rows, *params))[target] (targets ``IGNORE`` add 0; the head's outputs
    have ``vocab_size`` columns), computed ``chunk_rows(vocab_size)`` rows at a time; differentiable in ``rows``
    and ``params`` without keeping any chunk's logits (module docstring)."""
    size = chunk_rows(vocab_size)
    total = rows.new_zeros((), dtype=torch.float32)
    if not torch.is_grad_enabled():
        for start in range(0, rows.shape[0], size):
            logits = head(rows[start:start + size], *params)
            total = total + F.cross_entropy(logits.float(), targets[start:start + size], ignore_index=IGNORE,
                                            reduction="sum")
        return total

    fixed = [p.detach() for p in params]
    param_grads: list[Tensor] | None = None
    row_grads = []
    for start in range(0, rows.shape[0], size):
        wanted = targets[start:start + size]

        def loss(x: Tensor, *ps: Tensor, wanted: Tensor = wanted) -> Tensor:
            return F.cross_entropy(head(x, *ps).float(), wanted, ignore_index=IGNORE, reduction="sum")

        value, pull = torch.func.vjp(loss, rows[start:start + size].detach(), *fixed)
        grads = pull(torch.ones_like(value))
        row_grads.append(grads[0])
        param_grads = list(grads[1:]) if param_grads is None else [a + b for a, b in zip(param_grads, grads[1:],
                                                                                         strict=True)]
        total = total + value.detach()
    if param_grads is None:  # no labelled row
        return total + sum((p.sum() * 0 for p in params), rows.sum() * 0)
    surrogate = (rows * torch.cat(row_grads).to(rows.dtype)).sum()
    for p, g in zip(params, param_grads, strict=True):
        surrogate = surrogate + (p * g.to(p.dtype)).sum()
    return total + (surrogate - surrogate.detach())


def full_logits_nll(module: Any, chunks: Sequence[Any]) -> tuple[Tensor, Tensor]:
    """The reference ``nll`` of a Transformer-XL core module (``txl_lm``): logits [B, L, V] at every position,
    upcast to float32, cross-entropy ignoring label 0 — what the loss computed before this module (tests and
    ``benchmarks/seed_group.py`` compare against it)."""
    logits, _ = module(chunks)
    total = logits[0].new_zeros((), dtype=torch.float32)
    count = torch.zeros((), dtype=torch.long, device=total.device)
    for chunk_logits, chunk in zip(logits, chunks, strict=True):
        labels = chunk["labels"] if isinstance(chunk, dict) else chunk.labels
        total = total + F.cross_entropy(chunk_logits.flatten(0, 1).float(), labels.flatten(), ignore_index=IGNORE,
                                        reduction="sum")
        count = count + (labels != IGNORE).sum()
    return total, count
