"""The Pushdown score function's paths against the block loop: ``dense`` (the score function evaluated on all
(b, h, q, kv) at once) equals it in outputs and gradients, ``flex`` (FlexAttention, forward only on CPU) in
outputs; the model's ``attention`` setting selects them, and the cached decoding step is untouched."""

from __future__ import annotations

import math

import pytest
import torch

from lightning_modules.data.tree import parse_tree
from lightning_modules.data.vocab import TokenVocab
from lightning_modules.errors import InputError
from lightning_modules.families.pushdown.attention import block_causal_attention, causal_mask
from lightning_modules.families.pushdown.batch import collate
from lightning_modules.families.pushdown.data import encode_sentence
from lightning_modules.families.pushdown.model import build, config_from_dict
from lightning_modules.families.pushdown.score_function import PushdownPattern

pytestmark = pytest.mark.filterwarnings("ignore:flex_attention called without torch.compile")

VOCAB = 5  # depth table rows; tapes go up to 8, so clamping is part of every comparison


def random_case(length: int, dtype: torch.dtype, seed: int, batch: int = 2, heads: int = 3, d: int = 8):
    """Scaled q, k, v, depth table, rel keys, tape, causal mask (batch row 1 padded by 3), all leaves."""
    g = torch.Generator().manual_seed(seed)
    q, k, v = (torch.randn(batch, heads, length, d, generator=g, dtype=dtype) for _ in range(3))
    q = (q / math.sqrt(d)).requires_grad_()
    k, v = k.requires_grad_(), v.requires_grad_()
    table = torch.randn(VOCAB, d, generator=g, dtype=dtype, requires_grad=True)
    rel_keys = torch.randn(heads, length, d, generator=g, dtype=dtype, requires_grad=True)
    tape = torch.randint(0, 9, (batch, length, length), generator=g).tril()
    return q, k, v, table, rel_keys, tape, causal_mask(torch.tensor([length, length - 3])[:batch], length)


@pytest.mark.parametrize("with_rel", [False, True])
@pytest.mark.parametrize(("length", "seed"), [(7, 0), (13, 1)])
def test_dense_score_function_equals_the_block_loop_in_outputs_and_gradients(length, seed, with_rel):
    q, k, v, table, rel_keys, tape, mask = random_case(length, torch.float64, seed)
    rel_keys = rel_keys if with_rel else None
    pattern = PushdownPattern.build(mask, tape, VOCAB, flex=False)
    got = pattern.attend(q, k, v, rel_keys, table)
    want = block_causal_attention(q, k, v, mask, rel_keys, table, tape, block=4)  # several query blocks
    torch.testing.assert_close(got, want, atol=1e-10, rtol=1e-10)
    inputs = (q, k, v, table) + ((rel_keys,) if with_rel else ())
    upstream = torch.randn_like(want)
    for a, b in zip(torch.autograd.grad(got, inputs, upstream), torch.autograd.grad(want, inputs, upstream),
                    strict=True):
        torch.testing.assert_close(a, b, atol=1e-10, rtol=1e-10)


@pytest.mark.parametrize("length", [7, 130])  # one partial tile; 2 x 2 tiles (one full, one skipped)
def test_flex_forward_equals_the_block_loop(length):
    q, k, v, table, rel_keys, tape, mask = (t.detach() for t in random_case(length, torch.float32, 2))
    pattern = PushdownPattern.build(mask, tape, VOCAB, flex=True)
    assert pattern.flex
    want = block_causal_attention(q, k, v, mask, rel_keys, table, tape)
    torch.testing.assert_close(pattern.attend(q, k, v, rel_keys, table), want, atol=1e-5, rtol=1e-5)


# heads of 16 dimensions: the narrowest FlexAttention's compiled (CUDA) kernel takes
TINY = dict(vocab_size=9, d_model=32, n_layers=3, n_heads=2, d_ff=32, attachment_depth_dim=8, dropout=0.0,
            embedding_dropout=0.0, output_dropout=0.0, attachment_dropout=0.0, pushdown_layers=2)


@pytest.fixture
def batch():
    vocab = TokenVocab(["The", "dog", "is", "happy", "barks", "cat"])
    trees = ["(ROOT (S (NP (DT The) (NN dog)) (VP (VBZ is) (ADJP (JJ happy)))))",
             "(S (NP (DT The) (NN cat)) (VP (VBZ barks)))"]
    return collate([encode_sentence(parse_tree(t), vocab, lambda w: (w,)) for t in trees])


# CUDA where this machine has it (compiled flex with every gradient, as the model runs it there); never a skip
DEVICES = ["cpu", *(["cuda"] if torch.cuda.is_available() else [])]


@pytest.mark.parametrize("device", DEVICES)
def test_model_paths_agree_and_dense_trains_like_blocks(batch, device):
    """One Base-LM block and two Pushdown Layers: logits of all three paths, every gradient of dense (and of
    flex on CUDA: FlexAttention has no backward on CPU)."""
    batch = batch.to(device)
    logits, grads = {}, {}
    for path in ("blocks", "dense", "flex"):
        torch.manual_seed(0)
        model = build({**TINY, "attention": path}, "pushdown").to(device)
        assert model.attention_path(torch.device(device)) == path
        trains = path != "flex" or device == "cuda"
        with torch.set_grad_enabled(trains):
            logits[path] = model(batch)
            if trains:
                model.joint_loss(model.loss_terms(batch)).backward()
                grads[path] = {n: p.grad for n, p in model.named_parameters()}
    tolerance = dict(atol=1e-5, rtol=1e-5 if device == "cpu" else 1e-4)
    for path in ("dense", "flex"):
        for got, want in zip(logits[path], logits["blocks"], strict=True):
            torch.testing.assert_close(got, want, **tolerance)
    for path in grads.keys() - {"blocks"}:
        assert grads[path].keys() == grads["blocks"].keys()
        for name, grad in grads["blocks"].items():
            torch.testing.assert_close(grads[path][name], grad, **tolerance, msg=f"{path}: {name}")


def test_auto_is_flex_only_on_cuda_without_dropped_attention_weights():
    model = build({**TINY, "attention": "auto", "dropout": 0.1}, "pushdown")
    cpu, cuda = torch.device("cpu"), torch.device("cuda")
    assert model.attention_path(cpu) == "blocks" and model.attention_path(cuda) == "blocks"  # training
    model.eval()
    assert model.attention_path(cpu) == "blocks" and model.attention_path(cuda) == "flex"
    narrow = build({**TINY, "attention": "auto", "n_heads": 4}, "pushdown").eval()  # heads of 8 dimensions
    assert narrow.attention_path(cuda) == "blocks"


@pytest.mark.parametrize(("overrides", "message"), [({"attention": "fast"}, "must be one of"),
                                                    ({"attention": "flex", "dropout": 0.1}, "cannot drop"),
                                                    ({"attention": "flex", "n_heads": 4}, ">= 16 dimensions")])
def test_bad_attention_setting_names_the_key(overrides, message):
    with pytest.raises(InputError, match=message) as e:
        config_from_dict({**TINY, **overrides}, family="pushdown")
    assert e.value.location == "model.attention"


def test_cached_step_matches_the_dense_forward(batch):
    """The decoding step keeps its own cached attention (no path setting): the dense forward equals it."""
    torch.manual_seed(1)
    model = build({**TINY, "attention": "dense"}, "pushdown").eval()
    dense_words, _ = model.gold_logprobs(batch)
    state = model.start(5)
    for t in range(5):
        words, _, state = model.step(state, batch.inputs[:1, t], batch.tape[:1, t, : t + 1], batch.targets[:1, t])
        torch.testing.assert_close(words[0, batch.targets[0, t]], dense_words[0, t], atol=1e-5, rtol=1e-5)
