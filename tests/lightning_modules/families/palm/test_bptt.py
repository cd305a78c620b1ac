"""Stream batching for truncated BPTT: rows, variable window lengths, determinism and resumption."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from lightning_modules.families.palm.bptt import StreamBatches, batchify, fixed_windows, window_lengths


def test_batchify_cuts_the_stream_into_consecutive_rows_with_aligned_rows():
    ids = np.arange(11)
    aligned = np.arange(22).reshape(11, 2)
    rows, rows_aligned = batchify(ids, 3, aligned)
    assert rows.tolist() == [[0, 1, 2], [3, 4, 5], [6, 7, 8]]
    assert rows_aligned.shape == (3, 3, 2) and rows_aligned[1, 2].tolist() == [10, 11]
    with pytest.raises(ValueError):
        batchify(np.arange(5), 3)


def test_window_lengths_follow_the_official_distribution_and_cover_the_stream():
    lengths = window_lengths(100_000, 70, np.random.default_rng(0))
    assert sum(lengths) == 99_999
    body = np.array(lengths[:-1])
    assert body.min() >= 5 and body.max() <= 80
    half = (body < 52).mean()  # the bptt / 2 windows: N(35, 5)
    assert 0.03 < half < 0.07
    assert abs(body[body >= 52].mean() - 69.5) < 0.3  # int() truncates N(70, 5): mean 69.5


def test_stream_batches_read_each_epoch_in_order_and_reset_at_its_start():
    stream, _ = batchify(np.arange(200), 2)
    batches = StreamBatches(stream, None, 10, seed=3)
    first_epoch = len(batches.epoch_lengths(0))
    windows = [batches.batch(k) for k in range(first_epoch + 1)]
    assert [w.reset for w in windows] == [True] + [False] * (first_epoch - 1) + [True]
    inputs = torch.cat([w.inputs for w in windows[:first_epoch]], dim=1)
    assert inputs.tolist() == [list(range(0, 99)), list(range(100, 199))]
    assert torch.equal(windows[0].targets, windows[0].inputs + 1)


def test_stream_batches_are_a_function_of_seed_and_step_and_resume_anywhere():
    stream, _ = batchify(np.arange(500), 2)
    a = iter(StreamBatches(stream, None, 8, seed=1))
    steps = [next(a) for _ in range(40)]
    resumed = StreamBatches(stream, None, 8, seed=1)
    resumed.load_state_dict({"consumed": 25})
    again = iter(resumed)
    for k in range(25, 40):
        b = next(again)
        assert torch.equal(b.inputs, steps[k].inputs) and b.reset == steps[k].reset
    other = StreamBatches(stream, None, 8, seed=2)
    assert [other.batch(k).inputs.shape[1] for k in range(20)] != [s.inputs.shape[1] for s in steps[:20]]


def test_per_epoch_stream_batches_end_each_iteration_with_its_epochs_last_window():
    """The official epoch loop: one pass of the trainer is one epoch, also when resumed in its middle."""
    stream, _ = batchify(np.arange(500), 2)
    endless = StreamBatches(stream, None, 8, seed=1)
    lengths = [len(endless.epoch_lengths(e)) for e in range(2)]
    consumed = [0]
    per_epoch = StreamBatches(stream, None, 8, seed=1, consumed=lambda: consumed[0], per_epoch=True)
    first = list(per_epoch)
    assert len(first) == lengths[0] and first[0].reset and {b.epoch for b in first} == {0}
    consumed[0] = lengths[0] + 3  # resumed 3 windows into the second epoch
    rest = list(per_epoch)
    assert len(rest) == lengths[1] - 3 and {b.epoch for b in rest} == {1}
    for k, b in enumerate(rest, start=lengths[0] + 3):
        assert torch.equal(b.inputs, endless.batch(k).inputs)


def test_fixed_windows_cover_the_stream_once():
    stream, aligned = batchify(np.arange(40), 2, np.ones((40, 3), dtype=np.float32))
    windows = fixed_windows(stream, aligned, 7)
    assert [w.inputs.shape[1] for w in windows] == [7, 7, 5]
    assert [w.reset for w in windows] == [True, False, False]
    assert windows[0].span_targets.shape == (2, 7, 3)
