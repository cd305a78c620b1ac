"""The Transformer-XL encoding (TG §3 baselines): causal attention with relpos i - j.

Used for TXL (trees) on Choe–Charniak actions (closing NTs stay single, type ``CNT``) and TXL (terminals)
on ``<s> words </s>``. As the official ``TXLCausalMasking``: no transform, depth 0, query i attends to
every j <= i with relpos i - j; the memory is the previous chunk. ``relpos="none"`` is the "no position
information" ablation of TG Table 2.
"""

from __future__ import annotations

import numpy as np

from lightning_modules.data.encodings.choe_charniak import Actions, ActionVocab
from lightning_modules.data.encodings.example import Example

TXL_RELPOS_MODES = ("linear", "none")


def encode(actions: Actions, vocab: ActionVocab, relpos: str = "linear",
           unknown: str | None = None) -> Example:
    """Encode an action sequence for a causal Transformer-XL (attention lists stay implicit)."""
    if relpos not in TXL_RELPOS_MODES:
        raise ValueError(f"TXL relpos must be one of {TXL_RELPOS_MODES}, not {relpos!r}")
    tokens = vocab.ids(actions.tokens, unknown)
    n = len(tokens)
    return Example(
        tokens=tokens,
        labels=np.append(tokens[1:], 0),
        types=np.asarray(actions.types, dtype=np.int8),
        depth=np.zeros(n, dtype=np.int32),
        compose=np.zeros(n, dtype=bool),
        word_index=np.asarray(actions.word_index, dtype=np.int32),
        attend_ptr=np.zeros(n + 1, dtype=np.int64),
        attend_key=np.zeros(0, dtype=np.int32),
        attend_rel=np.zeros(0, dtype=np.int32),
        relpos=relpos,
        causal=True,
    )
