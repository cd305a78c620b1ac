"""``KeyValuePool``: rows written as the last allocation's slice or by index read back alike, per attention
function; growth and compaction keep every live row's keys and values."""

from __future__ import annotations

import torch

from lightning_modules.layers.kv_cache import KeyValuePool


def _read(pool: KeyValuePool, layer: int, rows: list[int], fn: int) -> torch.Tensor:
    """k, v [n, 2, H, d] of ``rows`` under attention function ``fn``."""
    key_rows = torch.tensor([rows])
    return pool.gather(layer, pool.key_index(key_rows, torch.tensor([fn])))


def test_write_gather_grow_and_compact():
    torch.manual_seed(0)
    pool = KeyValuePool(n_layers=2, n_fns=2, n_heads=3, d_head=4, capacity=2)
    written = {}
    for step in range(4):  # outgrows the capacity twice
        rows = pool.allocate(3)
        kv = torch.randn(3, 2, 2, 3, 4)  # [B, n_fns, 2, H, d]
        if step % 2:  # the same rows, written by index rather than as the allocation's slice
            pool.write(1, rows.clone(), kv)
        else:
            pool.write(1, rows, kv)
        for b, row in enumerate(rows.tolist()):
            written[row] = kv[b]
    for fn in range(2):
        got = _read(pool, 1, list(written), fn)
        assert torch.equal(got, torch.stack([written[r][fn] for r in written]))
    live = torch.tensor([7, 2, 10])
    remap = pool.compact(live)
    assert pool.size == 3 and remap[live].tolist() == [0, 1, 2] and int((remap >= 0).sum()) == 3
    for fn in range(2):
        assert torch.equal(_read(pool, 1, [0, 1, 2], fn), torch.stack([written[r][fn] for r in live.tolist()]))
