"""Packed seed-group batches of Pushdown-LM and Base-LM (``lightning_modules/families/pushdown/packing.py``):
a packed row's word and attachment log-probabilities are each sentence's solo ones, and every seed of a packed
group trains as its solo run: per-step losses over 60 steps (within 1e-5, or within twice what the solo run's
own rounding moves them) and the gradients of the first and last steps (dropout 0, fp32), with seeds whose
batches differ in length and rows holding several sentences."""

from __future__ import annotations

import pytest
import torch

from lightning_modules.data.tree import read_bracketed, to_bracketed
from tests.lightning_modules.models.group_equivalence import offsets, packed_alone, trains_as_solo
from tests.tolerances import FLOAT32

TINY = ["model.d_model=32", "model.n_layers=2", "model.n_heads=2", "model.d_ff=64", "model.attachment_depth_dim=8",
        "model.warmup_steps=4", "model.total_steps=30"]
FAMILIES = {"pushdown": [], "base-lm": ["model.attachment_loss=true"]}  # Base-LM with the multi-task head too
STEPS = 60
BATCH = 4


@pytest.fixture(scope="module")
def treebank(tmp_path_factory, shared_data):
    """60 PTB-sample trees: sentences of 1 to 40 words and more."""
    files = sorted((shared_data / "ptb_nltk_sample" / "combined").glob("wsj_00*.mrg"))[:8]
    trees = [t for f in files for _, t in read_bracketed(f)][:60]
    path = tmp_path_factory.mktemp("pushdown-packing") / "trees.mrg"
    path.write_text("".join(to_bracketed(t) + "\n" for t in trees))
    return path


def setup(family: str, treebank) -> tuple[dict, object]:
    from experiments.config import resolve_train_config
    from experiments.families import get_family
    from experiments.seed_grouping import dropout_settings

    overrides = [*TINY, *FAMILIES[family], f"data.corpus={treebank}", "data.train_split=file",
                 "data.valid_split=file"]
    cfg = resolve_train_config(family, "cpu-small", overrides)
    cfg = resolve_train_config(family, "cpu-small", overrides + [f"model.{k}=0" for k in dropout_settings(cfg)])
    return cfg, get_family(family).build_data(cfg)


@pytest.mark.parametrize("family", list(FAMILIES))
def test_a_packed_row_scores_each_sentence_as_its_solo_batch(family, treebank):
    from lightning_modules.families.pushdown.packing import pack

    cfg, data = setup(family, treebank)
    module, sentences, batch, packed, layout = packed_alone(family, cfg, data, pack, lambda sentence: len(sentence) - 1)
    lengths = [len(sentence) - 1 for sentence in sentences]
    where = offsets(layout, lengths)
    with torch.no_grad():
        words, attach = module.gold_logprobs(packed)
        for k, sentence in enumerate(sentences):
            alone_words, alone_attach = module.gold_logprobs(data.collate([sentence]))
            (r, o), n = where[k], lengths[k]
            assert torch.equal(packed["inputs"][r, o:o + n], batch.inputs[k, :n])
            torch.testing.assert_close(words[r, o:o + n], alone_words[0, :n], **FLOAT32)
            torch.testing.assert_close(attach[r, o:o + n], alone_attach[0, :n], **FLOAT32)
        assert float(words.sum()) == pytest.approx(float(module.gold_logprobs(batch)[0].sum()), rel=1e-5)
        assert float(attach.sum()) == pytest.approx(float(module.gold_logprobs(batch)[1].sum()), rel=1e-5)


@pytest.mark.parametrize("family", list(FAMILIES))
def test_each_seed_of_a_packed_group_trains_as_its_solo_run(family, treebank):
    from experiments.batching import StepBatches

    cfg, data = setup(family, treebank)
    seeds = [0, 1, 2]
    batches = [[b for _, b in zip(range(STEPS), StepBatches(data.train, BATCH, s, data.collate))] for s in seeds]
    group = trains_as_solo(family, cfg, data, seeds, batches,
                           lambda module, batch: module.joint_loss(module.loss_terms(batch)),
                           float(cfg["model"]["grad_clip_norm"]))
    shared = sum(int(batch[0]["segments"].amax()) > 1 for batch in group)  # rows shared by several sentences
    assert shared >= 0.9 * len(group), shared  # in nearly every step (a batch of long sentences has none)
    lengths = [[own[step].inputs.shape[1] for own in batches] for step in range(STEPS)]
    assert any(len(set(row)) > 1 for row in lengths)  # the seeds' batches differ in length
