"""Packed seed-group batches (``lightning_modules.models.packing``): rows filled first-fit, and every seed of a
packed group trains as its solo run — per-step losses over 60 steps (within 1e-5, or within twice what the solo
run's own rounding moves them) and the gradients of the first and last steps (dropout 0, fp32; parameters
themselves drift apart at rounding level through Adam's normalisation),
with sentences longer than the segment (the memory path) and seeds whose batches differ in length."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest

from lightning_modules.models.packing import bucket, first_fit, row_length
from tests.lightning_modules.models.group_equivalence import trains_as_solo

TINY = ["model.d_model=32", "model.n_layers=2", "model.n_heads=2", "model.d_ff=64", "model.warmup_steps=4",
        "model.total_steps=60"]
STEPS = 60
DEPENDENCY = ("dtg", "txl-trans")
# segments some sentences exceed (words alone are shorter; DTG drops longer sentences, so it keeps most)
SEGMENT = {"txl-terminals": 32, "dtg": 128, "txl-trans": 128}
BATCH = 4


def test_rows_are_filled_first_fit_by_decreasing_length():
    assert first_fit([5, 9, 3, 7, 4], 12) == [[1, 2], [3, 0], [4]]  # 9+3, 7+5, 4
    assert first_fit([], 8) == []
    assert row_length(17, 256) == 32 and row_length(3, 256) == 16 and row_length(40, 48) == 48


def test_buckets_are_powers_of_two_and_one_and_a_half_times_them():
    assert [bucket(n) for n in range(1, 14)] == [1, 2, 3, 4, 6, 6, 8, 8, 12, 12, 12, 12, 16]
    assert bucket(0) == 1 and bucket(17) == 24 and bucket(25) == 32 and bucket(33) == 48
    assert all(n <= bucket(n) <= max(1, 3 * n // 2 + 1) for n in range(1, 300))  # at most a third left empty


@pytest.fixture(scope="module")
def corpora(tmp_path_factory, shared_data) -> dict[bool, Path]:
    """60 PTB-sample trees and 60 UD EWT dependency trees (key: dependency; the first 50 and 10 long ones):
    sentences of 1 to 40 words and more, several longer than the segments below."""
    from lightning_modules.data.tree import read_bracketed, to_bracketed

    folder = tmp_path_factory.mktemp("packing")
    files = sorted((shared_data / "ptb_nltk_sample" / "combined").glob("wsj_00*.mrg"))[:8]
    trees = [t for f in files for _, t in read_bracketed(f)]
    (folder / "trees.mrg").write_text("".join(to_bracketed(t) + "\n" for t in trees[:60]))
    with gzip.open(shared_data / "ud" / "UD_English-EWT" / "en_ewt-ud-dev.conllu.gz", "rt") as f:
        ewt = f.read().split("\n\n")
    ewt = [s for s in ewt if s.strip()]
    (folder / "trees.conllu").write_text("\n\n".join(ewt[:50] + sorted(ewt[50:1000], key=len)[-10:]) + "\n\n")
    return {False: folder / "trees.mrg", True: folder / "trees.conllu"}


def config(family: str, corpus: Path) -> dict:
    from experiments.config import resolve_train_config
    from experiments.seed_grouping import dropout_settings

    overrides = [*TINY, f"data.corpus={corpus}", "data.train_split=file", "data.valid_split=file"]
    length = SEGMENT.get(family, 96)
    overrides += [f"model.segment_length={length}", f"model.memory_length={length}"]
    cfg = resolve_train_config(family, "cpu-small", overrides)
    return resolve_train_config(family, "cpu-small", overrides + [f"model.{k}=0" for k in dropout_settings(cfg)])


@pytest.mark.parametrize("family", ["tg", "txl-trees", "txl-terminals", "dtg", "txl-trans"])
def test_each_seed_of_a_packed_group_trains_as_its_solo_run(family, corpora):
    from experiments.batching import StepBatches
    from experiments.families import get_family

    cfg = config(family, corpora[family in DEPENDENCY])
    data = get_family(family).build_data(cfg)
    seeds = [0, 1, 2]
    batches = [[b for _, b in zip(range(STEPS), StepBatches(data.train, BATCH, s, data.collate))] for s in seeds]

    def loss_of(module, batch):
        total, count = module.nll(batch)
        return total / count

    group = trains_as_solo(family, cfg, data, seeds, batches, loss_of,
                           float(cfg["model"].get("grad_clip_norm", 3.0)))
    parts = [sum(len(part.chunks) > 1 for part in batch) + 1 for batch in group]  # 2: a part with the memory path
    subsets = [part.seeds is not None for batch in group for part in batch]
    # steps with and without a sentence longer than the segment (DTG drops such sentences, as the official code)
    assert 1 in parts and (2 in parts or family in DEPENDENCY)
    assert any(subsets) and not all(subsets)  # parts over some of the seeds, and over all
    lengths = [[sum(c.inputs.shape[1] for c in own[step]) for own in batches] for step in range(STEPS)]
    assert any(len(set(row)) > 1 for row in lengths)  # the seeds' batches differ in length


STATIC_STEPS = 24


@pytest.mark.parametrize("family", ["tg", "txl-terminals"])
def test_static_layouts_train_as_the_solo_run_from_a_small_set(family, corpora):
    """A compiled group's bucketed layouts (``static``, run eagerly here): every part over all seeds with its
    rows, its longer sequences' length and its labelled positions bucketed, each seed still its solo run; and
    the layouts of the steps are few (each a compiled graph), far fewer than the exact shapes."""
    from experiments.batching import StepBatches
    from experiments.families import get_family

    cfg = config(family, corpora[False])
    data = get_family(family).build_data(cfg)
    seeds = [0, 1, 2]
    batches = [[b for _, b in zip(range(STATIC_STEPS), StepBatches(data.train, BATCH, s, data.collate))]
               for s in seeds]

    def loss_of(module, batch):
        total, count = module.nll(batch)
        return total / count

    group = trains_as_solo(family, cfg, data, seeds, batches, loss_of,
                           float(cfg["model"].get("grad_clip_norm", 3.0)), static=True)
    assert all(part.seeds is None for batch in group for part in batch)  # every part over all seeds
    layouts = {tuple((n, tuple(t.shape)) for part in batch for chunk in part.chunks for n, t in sorted(chunk.items()))
               for batch in group}
    exact = {tuple(tuple(c.inputs.shape) for own in batches for c in own[step]) for step in range(STATIC_STEPS)}
    assert any(len(part.chunks) > 1 for batch in group for part in batch)  # the memory path, bucketed too
    for batch in group:
        for part in batch:
            for chunk in part.chunks:
                rows, length = chunk["inputs"].shape[1:3]
                assert rows == bucket(rows) and length == part.chunks[0]["inputs"].shape[2]
                assert chunk["label_index"].shape[1] == chunk["labels"][0].numel()
    assert len(layouts) < len(exact) / 2, (len(layouts), len(exact))
