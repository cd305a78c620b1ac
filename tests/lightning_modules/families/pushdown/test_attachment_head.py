"""The attachment head (Eq. 5 / Fig. 8 as the official StackPredictor): shapes, masking, equality with the
materialised composed keys, and the one-query (decoding) mode."""

from __future__ import annotations

import torch

from lightning_modules.families.pushdown.attachment_head import AttachmentHead
from lightning_modules.families.pushdown.attention import interleaved_sinusoids
from tests.tolerances import FLOAT32

D, T = 8, 5


def make_case(seed=0):
    torch.manual_seed(seed)
    head = AttachmentHead(D, depth_vocab=6, depth_dim=4, dropout=0.0).eval()
    states = torch.randn(2, T, D)
    next_words = torch.randn(2, T, D)
    tape = torch.randint(0, 9, (2, T, T)).tril()  # depths up to 8 > 5: clamped
    lengths = torch.tensor([T, 3])
    return head, states, next_words, tape, lengths


def official_logits(head, states, next_words, tape):
    """StackPredictor.forward's steps with the [B, T, T, 2d] composed keys materialised (no masking)."""
    q = head.query_mlp(torch.cat([head.query(states), next_words], -1))
    self_key = head.self_key_mlp(torch.cat([q, next_words], -1))
    keys = head.key(states)[:, None].expand(-1, T, -1, -1)
    depth = head.depth(tape.clamp(max=head.depth.num_embeddings - 1))
    composed = head.compose(torch.cat([keys, depth], -1))  # [B, T, T, 2d]
    logits = (q[:, :, None, :] @ composed.transpose(-1, -2)).squeeze(2)
    logits = torch.cat([logits, torch.zeros(2, T, 1)], -1)
    out = logits.clone()
    for t in range(T):
        out[:, t, t + 1] = (q[:, t] * self_key[:, t]).sum(-1)
        for c in range(t + 2):
            rel = head.position(interleaved_sinusoids(torch.tensor([float(c - t - 1)]), D))[0]
            out[:, t, c] += q[:, t] @ rel
    return out


def test_equals_the_materialised_official_formulation():
    head, states, next_words, tape, lengths = make_case()
    got = head(states, next_words, tape, lengths)
    want = official_logits(head, states, next_words, tape)
    assert got.shape == (2, T, T + 1)
    visible = torch.isfinite(got)
    torch.testing.assert_close(got[visible], want[visible], atol=1e-5, rtol=1e-5)


def test_masking_causal_and_length():
    head, states, next_words, tape, lengths = make_case(1)
    got = head(states, next_words, tape, lengths)
    cols = torch.arange(T + 1)
    for t in range(T):
        assert torch.isfinite(got[0, t, : t + 2]).all() and torch.isinf(got[0, t, t + 2 :]).all()
        # row 1 has 3 valid tokens: never more than columns 0..3; padded rows keep a finite column
        assert torch.isinf(got[1, t, cols > 3]).all() and torch.isfinite(got[1, t]).any()
    assert (got[torch.isinf(got)] < 0).all()


def test_single_query_mode_matches_the_training_row():
    head, states, next_words, tape, lengths = make_case(2)
    full = head(states, next_words, tape, lengths)
    for t in range(T):
        one = head(states[:, : t + 1], next_words[:, t : t + 1], tape[:, t : t + 1, : t + 1],
                   torch.tensor([t + 1, t + 1]), query_positions=torch.tensor([t]))
        assert one.shape == (2, 1, t + 2)
        torch.testing.assert_close(one[0, 0], full[0, t, : t + 2], **FLOAT32)


def test_gradients_flow_to_every_parameter():
    head, states, next_words, tape, lengths = make_case(3)
    logits = head(states, next_words, tape, lengths)
    labels = torch.tensor([[1, 1, 3, 2, 1], [1, 2, 3, 1, 1]])
    torch.nn.functional.cross_entropy(logits.flatten(0, 1), labels.flatten()).backward()
    for name, p in head.named_parameters():
        assert p.grad is not None and p.grad.abs().sum() > 0, name
