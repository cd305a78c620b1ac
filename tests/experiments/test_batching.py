import numpy as np

from experiments.batching import StepBatches, batch_indices, epoch_order


def test_epoch_orders_are_permutations_and_differ():
    a, b = epoch_order(50, seed=1, epoch=0), epoch_order(50, seed=1, epoch=1)
    assert sorted(a) == list(range(50)) and not np.array_equal(a, b)
    assert np.array_equal(a, epoch_order(50, seed=1, epoch=0))
    assert not np.array_equal(a, epoch_order(50, seed=2, epoch=0))


def test_each_epoch_visits_every_full_batch_once():
    seen = np.concatenate([batch_indices(20, 4, seed=0, index=i) for i in range(5)])
    assert sorted(seen) == list(range(20))


def test_stream_resumes_exactly():
    examples = list(range(13))
    full = StepBatches(examples, 3, seed=5, collate=list)
    it = iter(full)
    reference = [next(it) for _ in range(12)]
    step = {"n": 7}
    resumed = StepBatches(examples, 3, seed=5, collate=list, consumed=lambda: step["n"])
    it2 = iter(resumed)
    assert [next(it2) for _ in range(5)] == reference[7:]
    restored = StepBatches(examples, 3, seed=5, collate=list)
    restored.load_state_dict({"consumed": 4})
    it3 = iter(restored)
    assert next(it3) == reference[4]
