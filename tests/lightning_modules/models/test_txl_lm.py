"""The TG LightningModule: config, parameter count, loss, training, validation, LR schedule, scoring."""

from __future__ import annotations

import math

import numpy as np
import pytest
import pytorch_lightning as pl
import torch

from lightning_modules.errors import InputError
from lightning_modules.models import txl_lm as tg

TINY = dict(vocab_size=23, d_model=16, n_layers=2, n_heads=2, d_ff=32, segment_length=8, memory_length=8,
            embedding_dropout=0.0, core_dropout=0.0, core_output_dropout=0.0, attention_dropout=0.0,
            attention="dense", peak_lr=3e-3, start_lr=1e-4, min_lr=1e-4, warmup_steps=5, total_steps=100)


def random_chunks(batch: int, n_chunks: int = 2, L: int = 8, seed: int = 0) -> list[dict[str, torch.Tensor]]:
    """Causal chunks with plain memory over random tokens; the last sequence is shorter (padding)."""
    g = torch.Generator().manual_seed(seed)
    total = n_chunks * L
    ids = torch.randint(1, 23, (batch, total + 1), generator=g)
    lengths = torch.full((batch,), total)
    lengths[-1] = total - 5
    pos = torch.arange(total + 1)
    ids = ids.masked_fill(pos[None] > lengths[:, None], 0)
    inputs, labels = ids[:, :-1], ids[:, 1:].masked_fill(pos[None, 1:] > lengths[:, None], 0)
    chunks = []
    for c in range(n_chunks):
        q = torch.arange(c * L, (c + 1) * L)[:, None]
        k = torch.arange(c * L - L, (c + 1) * L)[None, :]
        key_ok = (k >= 0) & (k <= q)
        key_real = inputs[:, k.clamp(min=0)[0]] != 0  # [B, 2L]
        mask = key_ok[None] & key_real[:, None, :] & (inputs[:, c * L:(c + 1) * L] != 0)[:, :, None]
        chunks.append({
            "inputs": inputs[:, c * L:(c + 1) * L], "labels": labels[:, c * L:(c + 1) * L], "attn_mask": mask,
            "relpos": (q - k)[None] * mask, "mem_src": torch.arange(L, 2 * L).expand(batch, L),
            "reset": torch.full((batch,), c == 0), "compose": torch.zeros(batch, L, dtype=torch.bool),
        })
    return chunks


def tiny(**overrides) -> tg.TransformerGrammarLM:
    torch.manual_seed(0)
    return tg.build({**TINY, **overrides})


def test_bllip_config_has_251_887_616_parameters():
    with torch.device("meta"):
        module = tg.build({"vocab_size": 32768, "d_model": 1024, "n_layers": 16, "n_heads": 8, "d_ff": 4096})
    assert tg.parameter_count(module) == 251_887_616
    parts = tg.parameter_breakdown(module)
    assert sum(parts.values()) == 251_887_616
    assert parts["embedding"] == 33_554_432 and parts["output_bias"] == 32_768


@pytest.mark.parametrize(("key", "value"), [
    ("d_modle", 4), ("d_model", "big"), ("n_heads", 3), ("relpos", "tree"), ("attention", "fast"),
    ("memory_length", 5), ("core_dropout", 1.5), ("use_different_attn_fns", 1),
])
def test_bad_config_values_are_input_errors_located_at_the_key(key, value):
    with pytest.raises(InputError) as err:
        tg.config_from_dict({**TINY, key: value})
    assert err.value.location == f"model.{key}"


def test_flex_with_attention_dropout_is_rejected():
    with pytest.raises(InputError, match="flex cannot drop attention weights"):
        tg.config_from_dict({**TINY, "attention": "flex", "attention_dropout": 0.1})


def test_flex_needs_heads_its_compiled_kernel_takes_and_auto_falls_back_to_dense():
    """FlexAttention's CUDA kernel refuses heads under 16 dimensions (seen on an H200): ``flex`` is a config
    error for every device, and ``auto`` stays dense there."""
    narrow = {**TINY, "attention_dropout": 0.0}  # d_model 16 / 2 heads = 8 dimensions
    with pytest.raises(InputError, match=">= 16 dimensions") as err:
        tg.config_from_dict({**narrow, "attention": "flex"})
    assert err.value.location == "model.attention"
    cuda = torch.device("cuda")
    assert not tg.build({**narrow, "attention": "auto"}).eval().use_flex(cuda)
    assert tg.build({**narrow, "attention": "auto", "d_model": 32}).eval().use_flex(cuda)


@pytest.mark.filterwarnings("ignore:You are trying to `self.log()`")
def test_loss_is_mean_nll_over_labelled_positions_and_matches_token_logprobs():
    module = tiny().eval()
    chunks = random_chunks(3)
    total, count = module.nll(chunks)
    logp = module.token_logprobs(chunks)
    labels = torch.cat([c["labels"] for c in chunks], 1)
    assert logp.shape == labels.shape
    assert int(count) == int((labels != 0).sum())
    assert (logp[labels == 0] == 0).all() and (logp[labels != 0] < 0).all()
    torch.testing.assert_close(-logp.sum(), total)
    loss = module.training_step(chunks, 0)
    torch.testing.assert_close(loss, total / count)


def test_token_logprobs_do_not_depend_on_the_batch():
    module = tiny().eval()
    chunks = random_chunks(8, seed=3)
    together = module.token_logprobs(chunks)
    for b in range(8):
        alone = module.token_logprobs([{k: v[b:b + 1] for k, v in c.items()} for c in chunks])
        torch.testing.assert_close(alone[0], together[b], rtol=1e-5, atol=1e-5)


def official_schedule(step, start_lr=1e-7, max_lr=1.5e-4, min_lr=3e-7, warmup=8000, cycle=100_000):
    """``linear_warmup_then_cosine_anneal`` of the official lr_schedules.py, in numpy."""
    step = np.asarray(step, dtype=np.float64)
    linear = start_lr + (np.minimum(step, warmup) / warmup) * (max_lr - start_lr)
    t = np.minimum((step - warmup) / cycle, 1.0)
    cosine = min_lr + (max_lr - min_lr) * 0.5 * (1.0 + np.cos(np.pi * t))
    return np.where(step < warmup, linear, cosine)


def test_learning_rate_schedule_matches_the_official_formula():
    module = tg.build({**TINY, **{k: v for k, v in tg.asdict(tg.TGConfig()).items()
                                  if k in ("peak_lr", "start_lr", "min_lr", "warmup_steps", "total_steps")}})
    steps = [0, 1, 4000, 7999, 8000, 8001, 58000, 100_000, 108_000, 250_000]
    ours = [module.learning_rate(s) for s in steps]
    np.testing.assert_allclose(ours, official_schedule(steps), rtol=1e-12, atol=0)
    assert ours[0] == 1e-7 and ours[4] == 1.5e-4 and ours[-1] == ours[-2] == 3e-7
    # The Lightning scheduler applies it per optimizer step: update k uses schedule(k).
    conf = module.configure_optimizers()
    optimizer, scheduler = conf["optimizer"], conf["lr_scheduler"]["scheduler"]
    assert conf["lr_scheduler"]["interval"] == "step"
    seen = []
    for _ in range(3):
        seen.append(optimizer.param_groups[0]["lr"])
        optimizer.step()
        scheduler.step()
    np.testing.assert_allclose(seen, official_schedule([0, 1, 2]), rtol=1e-12)
    assert optimizer.defaults["betas"] == (0.9, 0.999)


class Batches(torch.utils.data.Dataset):
    def __init__(self, batches):
        self.batches = batches

    def __len__(self):
        return len(self.batches)

    def __getitem__(self, i):
        return self.batches[i]


def loader(batches):
    return torch.utils.data.DataLoader(Batches(batches), batch_size=None, shuffle=False)


def trainer(**kw) -> pl.Trainer:
    return pl.Trainer(accelerator="cpu", logger=False, enable_checkpointing=False, enable_progress_bar=False,
                      enable_model_summary=False, **kw)


def test_a_tiny_model_trains_and_its_loss_decreases():
    module = tiny()
    batch = random_chunks(4, seed=7)

    def loss() -> float:
        with torch.no_grad():
            total, count = module.eval().nll(batch)
        return float(total / count)

    before = loss()
    trainer(max_steps=40).fit(module.train(), loader([batch] * 40))
    after = loss()
    assert after < before - 0.5, (before, after)
    assert math.isfinite(after)


def test_gradients_are_clipped_to_global_norm_3():
    module = tiny(grad_clip_norm=3.0)
    (module.nll(random_chunks(2))[0] * 1e3).backward()  # a huge gradient
    opt = torch.optim.SGD(module.parameters(), lr=0.0)
    module.trainer = trainer(max_steps=1)
    module.configure_gradient_clipping(opt)
    norm = torch.sqrt(sum((p.grad ** 2).sum() for p in module.parameters() if p.grad is not None))
    assert abs(float(norm) - 3.0) < 1e-4


def test_validation_logs_exact_token_level_mean_and_sums():
    module = tiny()
    batches = [random_chunks(3, seed=1), random_chunks(1, seed=2), random_chunks(2, n_chunks=1, seed=4)]
    metrics = trainer().validate(module, loader(batches), verbose=False)[0]
    with torch.no_grad():
        sums = [module.eval().nll(b) for b in batches]
    nll = sum(float(s) for s, _ in sums)
    tokens = sum(int(n) for _, n in sums)
    assert metrics["val/tokens"] == tokens
    assert metrics["val/nll_sum"] == pytest.approx(nll, rel=1e-5)
    assert metrics["val/loss"] == pytest.approx(nll / tokens, rel=1e-5)


def test_different_attention_functions_read_the_compose_flag():
    module = tiny(use_different_attn_fns=True).eval()
    chunks = random_chunks(2)
    base = module.token_logprobs(chunks)
    flagged = [dict(c, compose=c["inputs"] % 2 == 0) for c in chunks]
    assert not torch.allclose(module.token_logprobs(flagged), base)


def test_real_tg_batches_chunked_with_smart_memory_score_like_one_chunk(shared_data):
    """PTB sample trees through the TG encoding and collate: chunks of 32 with smart memory give the same
    token log-probabilities as the whole sentence in one chunk (the stack never exceeds 32 here; with 16 it
    does, and the oldest entries (<s>) fall out of the memory, as in the official library)."""
    from lightning_modules.data.encodings import batch as batching
    from lightning_modules.data.encodings import choe_charniak as cc
    from lightning_modules.data.encodings import segmentation
    from lightning_modules.data.tree import clean, read_bracketed
    from lightning_modules.families.tg import encoding as tg_encoding

    path = shared_data / "ptb_nltk_sample" / "combined" / "wsj_0001.mrg"
    trees = [clean(t) for _, t in read_bracketed(path)]
    actions = [cc.choe_charniak(t) for t in trees]
    vocab = cc.ActionVocab.build(actions)
    examples = [tg_encoding.encode(a, vocab) for a in actions]

    def score(length: int) -> torch.Tensor:
        torch.manual_seed(0)
        module = tg.build({**TINY, "vocab_size": len(vocab._tokens), "segment_length": length,
                           "memory_length": length, "use_different_attn_fns": True}).eval()
        segs = [segmentation.segment(e, length) for e in examples]
        n_chunks = max(len(s.starts) for s in segs)
        chunks = [batching.collate([(e, s, c) if c < len(s.starts) else None for e, s in zip(examples, segs)],
                                   length) for c in range(n_chunks)]
        return module.token_logprobs(chunks)

    chunked, whole = score(32), score(256)
    n = min(chunked.shape[1], whole.shape[1])
    assert (chunked[:, n:] == 0).all() and (whole[:, n:] == 0).all()
    assert (whole != 0).sum() > 50
    torch.testing.assert_close(chunked[:, :n], whole[:, :n], rtol=1e-5, atol=1e-5)
