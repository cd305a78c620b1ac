"""Packed seed-group batches of Pushdown-LM and Base-LM (``lightning_modules/families/pushdown/packing.py``):
a packed row's word and attachment log-probabilities are each sentence's solo ones, and every seed of a packed
group trains as its solo run: per-step losses over 30 steps (within 1e-5, or within twice what the solo run's
own rounding moves them) and the gradients of the first and last steps (dropout 0, fp32), with seeds whose
batches differ in length and rows holding several sentences."""

from __future__ import annotations

import pytest
import torch

from lightning_modules.data.tree import read_bracketed, to_bracketed
from tests.tolerances import FLOAT32

TINY = ["model.d_model=32", "model.n_layers=2", "model.n_heads=2", "model.d_ff=64", "model.attachment_depth_dim=8",
        "model.warmup_steps=4", "model.total_steps=30"]
FAMILIES = {"pushdown": [], "base-lm": ["model.attachment_loss=true"]}  # Base-LM with the multi-task head too
STEPS = 30
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


def fresh(family: str, cfg: dict, data, seeds: list[int]) -> list[torch.nn.Module]:
    import pytorch_lightning as pl

    from experiments.families import get_family

    modules = []
    for seed in seeds:
        pl.seed_everything(seed, verbose=False)
        modules.append(get_family(family).build_module(cfg, data).train())
    return modules


@pytest.mark.parametrize("family", list(FAMILIES))
def test_a_packed_row_scores_each_sentence_as_its_solo_batch(family, treebank):
    from lightning_modules.families.pushdown.packing import pack
    from lightning_modules.models.packing import first_fit, row_length

    cfg, data = setup(family, treebank)
    [module] = fresh(family, cfg, data, [0])
    module.eval()
    sentences = list(data.train[:12])
    batch = data.collate(sentences)
    [packed] = pack([batch], None)
    packed = {k: v[0] for k, v in packed.items()}
    rows = packed["inputs"].shape[0]
    assert rows < len(sentences) and int(packed["segments"].amax()) > 1  # several sentences to a row
    lengths = [len(sentence) - 1 for sentence in sentences]
    where = {}  # sentence -> (row, offset): the packer's first-fit layout
    for r, members in enumerate(first_fit(lengths, row_length(max(lengths), 2 * max(lengths)))):
        offset = 0
        for k in members:
            where[k] = (r, offset)
            offset += lengths[k]
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
    from lightning_modules.models.seed_stack import SeedStack

    cfg, data = setup(family, treebank)
    seeds = [0, 1, 2]
    batches = [[b for _, b in zip(range(STEPS), StepBatches(data.train, BATCH, s, data.collate))] for s in seeds]
    clip = float(cfg["model"]["grad_clip_norm"])

    def optimiser(module):
        configured = module.configure_optimizers()
        return configured["optimizer"], configured["lr_scheduler"]["scheduler"]

    def solo_losses(threads: int) -> list[list[float]]:
        torch.set_num_threads(threads)
        out = []
        for module, own in zip(fresh(family, cfg, data, seeds), batches, strict=True):
            optimizer, scheduler = optimiser(module)
            losses = []
            for batch in own:
                loss = module.joint_loss(module.loss_terms(batch))
                loss.backward()
                torch.nn.utils.clip_grad_norm_(module.parameters(), clip)
                optimizer.step()
                optimizer.zero_grad(set_to_none=True)
                scheduler.step()
                losses.append(float(loss.detach()))
            out.append(losses)
        torch.set_num_threads(1)
        return out

    alone, rounded = solo_losses(1), solo_losses(2)
    stack = SeedStack(fresh(family, cfg, data, seeds))
    optimizer, scheduler = stack.optimizer, stack.configured["lr_scheduler"]["scheduler"]
    group_losses, shared_rows = [], []
    for step in range(STEPS):
        batch = stack.batch([own[step] for own in batches])
        shared_rows.append(int(batch[0]["segments"].amax()) > 1)
        loss, _, _ = stack.losses(batch)
        loss.sum().backward()
        if step in (0, STEPS - 1):
            for i, own in enumerate(batches):
                solo = stack.solo_module(i).train()
                solo.joint_loss(solo.loss_terms(own[step])).backward()
                for name, param in solo.named_parameters():
                    torch.testing.assert_close(stack.grads()[name][i], param.grad, **FLOAT32)
        stack.clip_per_seed(clip)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        scheduler.step()
        group_losses.append(loss.detach().tolist())

    assert all(shared_rows)
    lengths = [[own[step].inputs.shape[1] for own in batches] for step in range(STEPS)]
    assert any(len(set(row)) > 1 for row in lengths)  # the seeds' batches differ in length
    for i, losses in enumerate(alone):
        for step, expected in enumerate(losses):
            margin = max(1e-5 * abs(expected), 2 * abs(rounded[i][step] - expected))
            assert abs(group_losses[step][i] - expected) <= margin, (i, step)
