"""The reference DTG word-synchronous beam: ``beam.DTGBeamScorer``'s search, re-encoding every prefix.

The same search (``DTGBeamScorer`` is inherited: the same transitions, constraints, selection and ties); only
the feeding differs. Where the cached scorer feeds each new token once through ``TransformerXL.step`` into a
key/value pool, this one keeps each hypothesis's token records (id, attend list, relative positions, COMPOSE
flag, added arc-head id) and, whenever a hypothesis needs its next distribution, runs the full forward pass
(``DTGModel.distributions``) over its whole prefix, as a beam without a cache must: a sentence of n words
costs O(n·(max_actions+1)) passes over ``beam`` prefixes of growing length. It is the reference of
``benchmarks/dtg_beam.py`` (totals checked equal) and never used for scoring. DTG checkpoints only (the
records are DTG's STACK/COMPOSE attention lists).
"""

from __future__ import annotations

import numpy as np

from experiments.families.dtg.beam import DTGBeamScorer, _Hypothesis
from lightning_modules.families.dtg.data import DTGExample
from lightning_modules.families.dtg.encoding import DTGType


class ReencodingDTGBeamScorer(DTGBeamScorer):
    """``DTGBeamScorer`` without a cache: ``rows`` hold each hypothesis's token records instead of pool rows."""

    def __init__(self, model: object, beam: int = 100, word_beam: int = 10, max_actions: int = 15,
                 fast_track: int | None = None):
        super().__init__(model, beam, word_beam, max_actions, fast_track, batch_size=1)
        if self.causal:
            raise ValueError("the re-encoding reference beam is for dtg checkpoints (attend lists), not txl-trans")

    def _step(self, pool: object, batch: list[tuple[_Hypothesis, tuple, bool]]) -> None:
        for h, record, _ in batch:
            h.ids.append(record[0])
            h.rows.append(record)  # type: ignore[arg-type]
        ready = [h for h, _, last in batch if last]
        if not ready:
            return
        examples = [_prefix_example(h.rows) for h in ready]  # type: ignore[arg-type]
        rows = self.model.distributions(examples, [[len(e) - 1] for e in examples])  # type: ignore[attr-defined]
        for h, row in zip(ready, rows):
            h.next = row[0]


def _prefix_example(records: list[tuple]) -> DTGExample:
    """A hypothesis's whole prefix as one example (the network reads ids, attention, COMPOSE and added ids)."""
    n = len(records)
    compose = np.array([r[3] for r in records], dtype=bool)
    ptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum([len(r[1]) for r in records], out=ptr[1:])
    return DTGExample(
        tokens=np.array([r[0] for r in records], dtype=np.int64),
        labels=np.zeros(n, dtype=np.int64),
        types=np.where(compose, DTGType.LA, DTGType.W).astype(np.int8),  # read by nothing for one chunk
        depth=np.zeros(n, dtype=np.int32),
        compose=compose,
        word_index=np.full(n, -1, dtype=np.int32),
        attend_ptr=ptr,
        attend_key=np.array([k for r in records for k in r[1]], dtype=np.int32),
        attend_rel=np.array([v for r in records for v in r[2]], dtype=np.int32),
        relpos="depth",
        added=np.array([r[4] for r in records], dtype=np.int64),
    )
