"""The loss at labelled positions in chunks of rows (``lightning_modules.models.labelled_loss``): the NLL sum,
count and gradients of ``TransformerGrammarLM.nll`` equal those of the full logits at every position (the loss
as it was computed before), for TG's head and DTG's split head, in float32 and under bf16 autocast, over
several chunks; and the padded per-seed index gathers, under ``vmap``, what each seed gathers alone."""

from __future__ import annotations

import pytest
import torch

from lightning_modules.families.dtg import model as dtg
from lightning_modules.models import labelled_loss
from lightning_modules.models import txl_lm as tg
from tests.lightning_modules.models.test_txl_lm import TINY, random_chunks
from tests.tolerances import FLOAT32


def module_of(head: str) -> tg.TransformerGrammarLM:
    torch.manual_seed(0)
    if head == "tg":
        return tg.build(TINY)
    # DTG's split head needs arc-standard's vocabulary layout: transitions last
    return dtg.build({**TINY, "output_head": "split", "system": "standard"})


def loss_and_grads(module: tg.TransformerGrammarLM, chunks: list[dict], nll, bf16: bool):
    module.zero_grad(set_to_none=True)
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
        total, count = nll(module, chunks)
    total.backward()
    return total.detach(), count, {n: p.grad.clone() for n, p in module.named_parameters()}


@pytest.mark.parametrize("bf16", [False, True], ids=["fp32", "bf16"])
@pytest.mark.parametrize("head", ["tg", "dtg-split"])
def test_chunked_loss_equals_the_full_logits_loss(head, bf16, monkeypatch):
    module = module_of(head).train()
    chunks = random_chunks(batch=3)
    monkeypatch.setattr(labelled_loss, "CHUNK_FLOATS", 5 * TINY["vocab_size"])  # 5 rows a chunk: several chunks
    assert labelled_loss.chunk_rows(TINY["vocab_size"]) == 5
    ours = loss_and_grads(module, chunks, tg.TransformerGrammarLM.nll, bf16)
    reference = loss_and_grads(module, chunks, labelled_loss.full_logits_nll, bf16)
    fp32 = loss_and_grads(module, chunks, labelled_loss.full_logits_nll, False)
    # the loss: each row's logits are the same products, only the sum over rows is ordered otherwise
    torch.testing.assert_close(ours[0], reference[0], **FLOAT32)
    assert int(ours[1]) == int(reference[1]) == sum(int((c["labels"] != 0).sum()) for c in chunks)
    for name, grad in reference[2].items():
        if not bf16:
            torch.testing.assert_close(ours[2][name], grad, **FLOAT32, msg=name)
        else:  # the head's gradient sums bf16 products chunk by chunk: within what bf16 itself moves it
            moved = torch.linalg.vector_norm(grad - fp32[2][name])
            assert torch.linalg.vector_norm(ours[2][name] - grad) <= 2 * moved + 1e-6, name
    if bf16:  # the solo run's precision: bf16 logits, float32 log-softmax (not the float32 loss)
        assert float(ours[0]) != float(fp32[0])


def test_without_gradients_the_loss_is_the_same():
    module = module_of("tg").eval()
    chunks = random_chunks(batch=3)
    with torch.no_grad():
        total, count = module.nll(chunks)
    reference, n = labelled_loss.full_logits_nll(module, chunks)
    torch.testing.assert_close(total, reference.detach(), **FLOAT32)
    assert int(count) == int(n)


def test_the_padded_index_gathers_each_seeds_labelled_positions_under_vmap():
    g = torch.Generator().manual_seed(1)
    labels = torch.randint(0, 4, (3, 2, 5), generator=g)  # 0 = nothing to predict
    labels[2] = 0  # a seed with no labelled position
    hidden = torch.randn(3, 2, 5, 4, generator=g)
    index = labelled_loss.padded_label_index(labels)
    assert index.shape == (3, int((labels != 0).flatten(1).sum(1).max()))
    rows, targets = torch.func.vmap(labelled_loss.labelled_rows)(hidden, labels, index)
    for s in range(3):
        alone_rows, alone_targets = labelled_loss.labelled_rows(hidden[s], labels[s])
        n = alone_targets.numel()
        assert torch.equal(rows[s, :n], alone_rows) and torch.equal(targets[s, :n], alone_targets)
        assert not targets[s, n:].any()  # padding predicts nothing


def test_a_chunk_holds_at_most_the_bound_of_logits():
    assert labelled_loss.chunk_rows(32768) * 32768 <= labelled_loss.CHUNK_FLOATS
    assert labelled_loss.chunk_rows(10**9) == 1
