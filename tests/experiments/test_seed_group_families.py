"""Seed groups beyond TG: each family with a stacked form (``Family.stacks_seeds``) trains S seeds in one
process to where their solo runs end (every dropout at 0; few steps, tiny models)."""

from __future__ import annotations

import pytest

from lightning_modules.data.tree import read_bracketed, to_bracketed
from tests.experiments.test_seed_group import close, logged

TINY = ["model.d_model=32", "model.n_heads=2", "model.d_ff=64", "model.warmup_steps=2",
        "model.total_steps=20", "model.peak_lr=3e-3", "train.batch_size=4", "train.eval_batch_size=8",
        "train.log_every=1", "runtime.wandb=disabled", "runtime.progress=false", "runtime.threads=1",
        "train.max_steps=6", "train.val_every=3", "train.ckpt_every=3"]
FAMILIES = {"pushdown": ["model.n_layers=2", "model.attachment_depth_dim=8"],
            "base-lm": ["model.n_layers=2", "model.attachment_depth_dim=8", "model.attachment_loss=true"],
            "proposal-parser": ["model.n_encoder_layers=1", "model.n_decoder_layers=1", "model.max_depth=40",
                                "data.min_count=1"]}


@pytest.fixture(scope="module")
def small_treebank(tmp_path_factory, shared_data):
    trees = [t for _, t in read_bracketed(shared_data / "ptb_nltk_sample" / "combined" / "wsj_0003.mrg")]
    path = tmp_path_factory.mktemp("tb") / "small.mrg"
    path.write_text("".join(to_bracketed(t) + "\n" for t in trees[:16]))
    return path


def without_dropout(family: str, overrides: list[str]) -> dict:
    """The config of ``overrides`` with every dropout rate of the model at 0."""
    from experiments.config import resolve_train_config
    from experiments.seed_grouping import dropout_settings

    cfg = resolve_train_config(family, "cpu-small", overrides)
    return resolve_train_config(family, "cpu-small", overrides + [f"model.{k}=0" for k in dropout_settings(cfg)])


@pytest.mark.parametrize("family", list(FAMILIES))
def test_each_seed_of_a_group_ends_where_its_solo_run_ends(family, small_treebank, tmp_path):
    from experiments.families import get_family
    from experiments.seed_group import train_group
    from experiments.train import train

    assert get_family(family).stacks_seeds
    cfg = without_dropout(family, [*TINY, *FAMILIES[family], f"data.corpus={small_treebank}",
                                   "data.train_split=file", "data.valid_split=file"])
    group = train_group(cfg, [0, 1], [tmp_path / "g0", tmp_path / "g1"])
    solo = train(cfg, 1, tmp_path / "solo")
    group[1].pop("device"), solo.pop("device")
    assert close(group[1], solo)
    for column, count in (("train/loss", 6), ("val/loss", 2)):
        ours, theirs = logged(tmp_path / "g1", column), logged(tmp_path / "solo", column)
        assert ours.keys() == theirs.keys() and len(ours) == count, column
        assert all(ours[k] == pytest.approx(theirs[k], rel=1e-5) for k in ours), column


def test_dependency_parser_seeds_stacked_score_and_learn_as_solo():
    """dep-parser (the constituency parser's module on dependency actions): two seeds, each its own batch of
    another length, stacked (packed): losses and gradients equal each solo module's (packing changes nothing)."""
    import torch

    from experiments.families import get_family
    from lightning_modules.data.dependency import DepTree
    from lightning_modules.data.vocab import WordVocab
    from lightning_modules.families.parser import dep_data
    from lightning_modules.families.parser.data import source_mapping
    from lightning_modules.families.parser.model import build
    from lightning_modules.models.seed_stack import SeedStack

    assert get_family("dep-parser").stacks_seeds
    words = ["the", "cat", "sat", "on", "the", "mat"]
    mapping = source_mapping({"terminals": "words", "words": WordVocab.build(words, 1).to_dict()})
    models = []
    for seed in (0, 1):
        torch.manual_seed(seed)
        models.append(build({"source_vocab_size": len(WordVocab.build(words, 1)) + 1,
                             "action_vocab_size": dep_data.encoding.VOCAB_SIZE, "d_model": 16,
                             "n_encoder_layers": 1, "n_decoder_layers": 1, "n_heads": 2, "d_ff": 32,
                             "dropout": 0.0}))
    trees = [[DepTree(("the", "cat", "sat"), (2, 3, 0), ("_",) * 3)] * 2,
             [DepTree(tuple(words), (2, 3, 0, 6, 6, 3), ("_",) * 6), DepTree(("cat", "sat"), (2, 0), ("_",) * 2)]]
    batches = [dep_data.collate([dep_data.encode(t, mapping) for t in rows]) for rows in trees]
    stack = SeedStack(models)
    loss, total, count = stack.losses(stack.batch(batches))
    loss.sum().backward()
    for i, (model, batch) in enumerate(zip(models, batches, strict=True)):
        nll, n, _ = model.loss_terms(batch)
        (nll / n).backward()
        assert float(total[i]) == pytest.approx(float(nll), rel=1e-5) and int(count[i]) == int(n)
        for name, p in model.named_parameters():
            assert torch.allclose(stack.grads()[name][i], p.grad, rtol=1e-4, atol=1e-6), name
