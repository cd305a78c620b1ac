"""FlexAttention's block mask from per-tile counts (``block_mask_of``) and the flex path of the TG network on
random trees with memory: equal to ``create_block_mask`` tile for tile, and to the dense SDPA path (the
reference) to 1e-5 (forward: FlexAttention has no backward on CPU; on a CUDA machine gradients as well)."""

from __future__ import annotations

import random

import pytest
import torch
from torch.nn.attention.flex_attention import create_block_mask

from lightning_modules.data.encodings.batch import collate_chunk
from lightning_modules.data.encodings.choe_charniak import ActionVocab, choe_charniak
from lightning_modules.data.encodings.segmentation import segment
from lightning_modules.data.tree import Tree
from lightning_modules.families.tg import encoding as tg_encoding
from lightning_modules.layers.relative_attention import block_mask_of
from lightning_modules.models import txl_lm as tg

pytestmark = pytest.mark.filterwarnings("ignore:flex_attention called without torch.compile")


def random_mask(batch: int, length: int, keys: int, seed: int) -> torch.Tensor:
    """Causal-ish random masks with empty, full and partial tiles, and a padding row with no key."""
    g = torch.Generator().manual_seed(seed)
    mask = torch.rand(batch, length, keys, generator=g) < 0.3
    mask[:, :, : keys // 3] = True  # full tiles
    mask[:, : length // 2, -(keys // 3):] = False  # empty tiles
    mask[-1, -1] = False  # a query that attends to nothing (padding)
    return mask


@pytest.mark.parametrize("shape", [(2, 9, 17), (3, 16, 32), (1, 5, 5)])
def test_tiles_match_create_block_mask(shape):
    mask = random_mask(*shape, seed=sum(shape))
    ours = block_mask_of(mask, block_size=4)
    reference = create_block_mask(lambda b, h, q, kv: mask[b, q, kv], shape[0], None, shape[1], shape[2],
                                  device="cpu", BLOCK_SIZE=4)
    torch.testing.assert_close(ours.to_dense(), reference.to_dense())  # the same tiles computed
    for name in ("kv_num_blocks", "full_kv_num_blocks"):
        assert torch.equal(getattr(ours, name), getattr(reference, name)), name
    assert ours.seq_lengths == (shape[1], shape[2])


def random_tree(rng: random.Random, words: list[str], labels: list[str], depth: int = 0) -> Tree:
    """A random constituency tree (no POS tags, as TG encodes them) of 1-4 children per node."""
    children: list[Tree | str] = []
    for _ in range(rng.randint(1, 4)):
        if depth < 4 and rng.random() < 0.4:
            children.append(random_tree(rng, words, labels, depth + 1))
        else:
            children.append(rng.choice(words))
    return Tree(rng.choice(labels), tuple(children))


def random_tree_chunks(n: int, length: int, seed: int) -> tuple[list, int]:
    """The TG chunks (smart memory, M = L) of ``n`` random trees collated as one batch, and the vocab size."""
    rng = random.Random(seed)
    words, labels = [f"w{i}" for i in range(12)], ["S", "NP", "VP", "PP"]
    actions = [choe_charniak(random_tree(rng, words, labels)) for _ in range(n)]
    vocab = ActionVocab.build(actions)
    examples = [tg_encoding.encode(a, vocab) for a in actions]
    segs = [segment(e, length, length, "smart") for e in examples]
    chunks = [collate_chunk(examples, segs, c, trim=True) for c in range(max(len(s) for s in segs))]
    return chunks, len(vocab)


# CUDA where this machine has it (the device session of 2026-11-24 ran the same comparison on an H100 through
# ``benchmarks/training_step.py --check``); never a skip where it has not
DEVICES = ["cpu", *(["cuda"] if torch.cuda.is_available() else [])]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("seed", [0, 1])
def test_flex_equals_dense_on_random_trees_with_memory(seed, device):
    """Logits on every device; on CUDA (compiled flex, as the model runs it there) every gradient too."""
    chunks, vocab_size = random_tree_chunks(5, length=8, seed=seed)
    assert len(chunks) >= 3  # memory carried across several chunks
    chunks = [chunk.to(device) for chunk in chunks]
    config = dict(vocab_size=vocab_size, d_model=32, n_layers=2, n_heads=2, d_ff=64, segment_length=8,
                  memory_length=8, embedding_dropout=0.0, core_dropout=0.0, core_output_dropout=0.0,
                  attention_dropout=0.0)
    logits, grads = {}, {}
    for path in ("dense", "flex"):
        torch.manual_seed(seed)
        module = tg.build({**config, "attention": path}).to(device).eval()
        with torch.set_grad_enabled(device == "cuda"):  # FlexAttention has no backward on CPU
            logits[path], _ = module(chunks)
            if device == "cuda":
                loss = sum(torch.nn.functional.cross_entropy(out.flatten(0, 1), chunk.labels.flatten(),
                                                             ignore_index=0, reduction="sum")
                           for out, chunk in zip(logits[path], chunks))
                loss.backward()
                grads[path] = {n: p.grad for n, p in module.named_parameters() if p.grad is not None}
    for dense, flex in zip(logits["dense"], logits["flex"], strict=True):
        torch.testing.assert_close(flex, dense, rtol=1e-5 if device == "cpu" else 1e-4, atol=1e-5)
    if device == "cuda":
        assert grads["dense"].keys() == grads["flex"].keys() and grads["dense"]
        for name, grad in grads["dense"].items():
            torch.testing.assert_close(grads["flex"][name], grad, rtol=1e-4, atol=1e-5, msg=name)


def test_the_dense_mask_is_built_where_the_batch_is_sent():
    """A loader ships the sparse attend lists; the [B, L, M+L] mask appears only on the model's device."""
    chunks, _ = random_tree_chunks(3, length=8, seed=2)
    moved = chunks[0].to("meta")
    assert "attn_mask" not in vars(chunks[0])  # never densified on the CPU
    assert moved.attn_mask.device.type == "meta" and moved.attn_mask.shape == moved.shape
