"""PushdownLM: config validation, the joint loss on the Fig. 2 sentence, last-k Pushdown Layers, Base-LM,
and the step API a beam search calls."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from lightning_modules.data.tree import parse_tree
from lightning_modules.data.vocab import TokenVocab
from lightning_modules.errors import InputError
from lightning_modules.families.pushdown.batch import collate
from lightning_modules.families.pushdown.data import encode_sentence
from lightning_modules.families.pushdown.model import PushdownConfig, build, config_from_dict

TINY = dict(vocab_size=9, d_model=16, n_layers=3, n_heads=2, d_ff=32, attachment_depth_dim=8, dropout=0.0,
            embedding_dropout=0.0, output_dropout=0.0, attachment_dropout=0.0)
WORDS = ["The", "dog", "is", "happy", "barks", "cat"]


@pytest.fixture
def batch():
    vocab = TokenVocab(WORDS)
    trees = ["(ROOT (S (NP (DT The) (NN dog)) (VP (VBZ is) (ADJP (JJ happy)))))",
             "(S (NP (DT The) (NN cat)) (VP (VBZ barks)))"]
    return collate([encode_sentence(parse_tree(t), vocab, lambda w: (w,)) for t in trees])


@pytest.mark.parametrize(("family", "overrides", "key"), [
    ("pushdown", {"pushdown_layers": 0}, "model.pushdown_layers"),
    ("pushdown", {"attachment_loss": False}, "model.attachment_loss"),
    ("base-lm", {"pushdown_layers": -1}, "model.pushdown_layers"),
    ("pushdown", {"pushdown_layers": 4}, "model.pushdown_layers"),
    ("pushdown", {"n_heads": 3}, "model.n_heads"),
    ("pushdown", {"dropout": 1.0}, "model.dropout"),
    ("pushdown", {"depth_vocab": 0}, "model.depth_vocab"),
    ("pushdown", {"d_ff": "big"}, "model.d_ff"),
    ("pushdown", {"n_hedas": 2}, "model.n_hedas"),
])
def test_bad_config_names_the_key(family, overrides, key):
    with pytest.raises(InputError) as e:
        config_from_dict({**TINY, **overrides}, family=family)
    assert e.value.location == key


def test_last_k_blocks_are_pushdown_layers():
    model = build({**TINY, "pushdown_layers": 1}, "pushdown")
    assert [b.attention.is_pushdown for b in model.blocks] == [False, False, True]
    model = build({**TINY, "pushdown_layers": -1}, "pushdown")
    assert all(b.attention.is_pushdown for b in model.blocks)
    base = build({**TINY, "pushdown_layers": 0, "attachment_loss": False}, "base-lm")
    assert not any(b.attention.is_pushdown for b in base.blocks) and base.attachment_head is None


def test_joint_loss_on_the_figure_2_sentence(batch):
    torch.manual_seed(0)
    model = build(TINY, "pushdown").eval()
    word_logits, attach_logits = model(batch)
    assert word_logits.shape == (2, 5, 9) and attach_logits.shape == (2, 5, 6)
    # by hand: LM over "The dog is happy <eos>" + "The cat barks <eos>" (9 targets), attachments of the
    # 7 words [1, 1, 3, 2] and [1, 1, 2]; the <eos> steps and padding carry no attachment loss
    lm = [F.cross_entropy(word_logits[0, t], batch.targets[0, t]) for t in range(5)]
    lm += [F.cross_entropy(word_logits[1, t], batch.targets[1, t]) for t in range(4)]
    gold = {(0, 0): 1, (0, 1): 1, (0, 2): 3, (0, 3): 2, (1, 0): 1, (1, 1): 1, (1, 2): 2}
    att = [F.cross_entropy(attach_logits[b, t], torch.tensor(label)) for (b, t), label in gold.items()]
    expected = sum(lm) / 9 + sum(att) / 7
    terms = model.loss_terms(batch)
    assert int(terms["lm_count"]) == 9 and int(terms["attachment_count"]) == 7
    torch.testing.assert_close(model.joint_loss(terms), expected)
    weighted = build({**TINY, "attachment_loss_weight": 0.5}, "pushdown").eval()
    weighted.load_state_dict(model.state_dict())
    torch.testing.assert_close(weighted.joint_loss(weighted.loss_terms(batch)), sum(lm) / 9 + 0.5 * sum(att) / 7)
    # gold log-probs are the same numbers, per position
    words, attach = model.gold_logprobs(batch)
    torch.testing.assert_close(-words.sum(), sum(lm))
    torch.testing.assert_close(-attach.sum(), sum(att))
    assert attach[0, 4] == 0 and attach[1, 3:].eq(0).all() and words[1, 4] == 0


def test_step_api_matches_the_full_forward(batch):
    """The cached incremental pass gives the training forward's numbers at every position."""
    torch.manual_seed(1)
    model = build({**TINY, "pushdown_layers": 2}, "pushdown").eval()
    words, attach = model.gold_logprobs(batch)
    state = model.start(5)
    for t in range(5):
        word_lp, attach_lp, state = model.step(state, batch.inputs[:1, t], batch.tape[:1, t, : t + 1],
                                               batch.targets[:1, t])
        assert word_lp.shape == (1, 9) and attach_lp.shape == (1, t + 2)
        assert state.states.shape == (1, t + 1, TINY["d_model"])
        torch.testing.assert_close(word_lp[0, batch.targets[0, t]], words[0, t], atol=1e-5, rtol=1e-5)
        torch.testing.assert_close(attach_lp.exp().sum(), torch.tensor(1.0))
        if t < 4:
            torch.testing.assert_close(attach_lp[0, batch.attachment[0, t]], attach[0, t], atol=1e-5, rtol=1e-5)


def _replay(model, inputs, tape, next_words, origins=None):
    """Steps over every position of ``inputs`` [N, T] with tape rows ``tape`` [N, T, T]; ``origins`` reorders the
    hypotheses after step ``origins[0]`` by ``origins[1]``. Returns the last step's log-probs."""
    state = model.start(inputs.shape[1])
    for t in range(inputs.shape[1]):
        words, attach, state = model.step(state, inputs[:, t], tape[:, t, : t + 1], next_words)
        if origins is not None and t == origins[0]:
            state = state.select(origins[1])
    return words, attach


def test_step_api_scores_several_hypotheses_with_different_tapes_and_reorders_them(batch):
    torch.manual_seed(2)
    model = build(TINY, "pushdown").eval()
    inputs = batch.inputs[:1, :4].expand(2, 4)
    tapes = batch.tape[:1, :4, :4].repeat(2, 1, 1)
    tapes[1, 2:] = 0  # hypothesis 2: "The dog" not reduced
    next_words = batch.targets[:1, 3].expand(2)
    word_lp, attach_lp = _replay(model, inputs, tapes, next_words)
    assert not torch.allclose(word_lp[0], word_lp[1]) and not torch.allclose(attach_lp[0], attach_lp[1])
    # hypothesis 2 alone gives its own numbers (batching does not mix hypotheses)
    alone = _replay(model, inputs[1:], tapes[1:], next_words[1:])
    torch.testing.assert_close(alone[0][0], word_lp[1], atol=1e-5, rtol=1e-5)
    # after position 2 both continue from hypothesis 2's cache: both then read tape 2's rows 0..2
    mixed = tapes.clone()
    mixed[0, :3] = tapes[1, :3]
    reordered = _replay(model, inputs, mixed, next_words, origins=(2, torch.tensor([1, 1])))
    expected = _replay(model, inputs, torch.stack([mixed[0], mixed[1]]), next_words)
    torch.testing.assert_close(reordered[0], expected[0], atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(reordered[1], expected[1], atol=1e-5, rtol=1e-5)


def test_base_lm_ignores_the_tape_and_may_add_the_attachment_loss(batch):
    torch.manual_seed(3)
    base = build({**TINY, "pushdown_layers": 0, "attachment_loss": False}, "base-lm").eval()
    words, attach = base.gold_logprobs(batch)
    batch.tape.fill_(7)
    torch.testing.assert_close(base.gold_logprobs(batch)[0], words)
    assert attach.eq(0).all()
    terms = base.loss_terms(batch)
    torch.testing.assert_close(base.joint_loss(terms), terms["lm_nll"] / 9)
    multitask = build({**TINY, "pushdown_layers": 0}, "base-lm")
    assert multitask.attachment_head is not None
    terms = multitask.loss_terms(batch)
    assert int(terms["attachment_count"]) == 7 and terms["attachment_nll"] > 0
    assert _replay(multitask, batch.inputs[:1, :2], batch.tape[:1, :2, :2], batch.targets[:1, 1])[1] is not None


def test_training_step_lowers_the_loss(batch):
    torch.manual_seed(4)
    model = build({**TINY, "peak_lr": 1e-2, "warmup_steps": 0}, "pushdown")
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    first = None
    for _ in range(20):
        loss = model.joint_loss(model.loss_terms(batch))
        first = float(loss.detach()) if first is None else first
        opt.zero_grad()
        loss.backward()
        opt.step()
    assert float(loss.detach()) < first / 2


def test_schedule_is_hf_cosine_with_zero_start_and_end():
    cfg = PushdownConfig(peak_lr=1e-4, start_lr=0.0, min_lr=0.0, warmup_steps=10, total_steps=90)
    model = build({**TINY, **{k: getattr(cfg, k) for k in ("peak_lr", "start_lr", "min_lr", "warmup_steps",
                                                            "total_steps")}}, "pushdown")
    # transformers.get_cosine_schedule_with_warmup(10 warm-up, 100 training steps)
    for step in (0, 5, 10, 55, 100):
        hf = step / 10 if step < 10 else 0.5 * (1 + math.cos(math.pi * (step - 10) / 90))
        assert model.learning_rate(step) == pytest.approx(1e-4 * hf)


def test_gradients_are_clipped_to_the_configured_global_norm(batch):
    import pytorch_lightning as pl

    model = build({**TINY, "grad_clip_norm": 2.0}, "pushdown")
    (model.joint_loss(model.loss_terms(batch)) * 1e3).backward()  # a huge gradient
    model.trainer = pl.Trainer(accelerator="cpu", logger=False, enable_checkpointing=False, enable_progress_bar=False,
                               enable_model_summary=False, max_steps=1)
    model.configure_gradient_clipping(torch.optim.SGD(model.parameters(), lr=0.0))
    norm = torch.sqrt(sum((p.grad ** 2).sum() for p in model.parameters() if p.grad is not None))
    assert abs(float(norm) - 2.0) < 1e-4
