"""The Pushdown-LM's decoding buffers: a beam whose hypothesis count grows and shrinks (the buffers' capacity
grows under it) and whose reorders repeat hypotheses gives every hypothesis the numbers it gets decoded alone,
and its states are the training forward's."""

from __future__ import annotations

import pytest
import torch

from lightning_modules.families.pushdown.model import build
from tests.tolerances import FLOAT32

TINY = dict(vocab_size=11, d_model=16, n_layers=3, n_heads=2, d_ff=32, attachment_depth_dim=8, dropout=0.0,
            embedding_dropout=0.0, output_dropout=0.0, attachment_dropout=0.0, pushdown_layers=2)


def _alone(model, tokens: list[int], rows: list[torch.Tensor], next_word: int):
    """One hypothesis decoded by itself, no reorder: the last step's word and attachment log-probs, its state."""
    state = model.start(len(tokens))
    for token, row in zip(tokens, rows):
        words, attach, state = model.step(state, torch.tensor([token]), row[None], torch.tensor([next_word]))
    return words[0], None if attach is None else attach[0], state


@pytest.mark.parametrize("family", ["pushdown", "base-lm"])
def test_a_beam_of_changing_width_equals_each_hypothesis_alone(family: str) -> None:
    torch.manual_seed(4)
    overrides = {} if family == "pushdown" else {"pushdown_layers": 0, "attachment_loss": False}
    model = build({**TINY, **overrides}, family).eval()
    counts = [1, 3, 6, 2, 5, 5]  # hypotheses reading each position: the capacity grows twice
    length = len(counts)
    state = model.start(length)
    histories: list[tuple[list[int], list[torch.Tensor]]] = [([], [])]
    generator = torch.Generator().manual_seed(0)
    for t, count in enumerate(counts):
        if t:  # the beam's reorder: each new hypothesis extends a random earlier one (repeats included)
            origins = torch.randint(0, len(histories), (count,), generator=generator)
            origins[0] = origins[-1]
            state = state.select(origins)
            histories = [histories[o] for o in origins.tolist()]
        tokens = torch.randint(1, TINY["vocab_size"], (count,), generator=generator)
        rows = torch.randint(0, 4, (count, t + 1), generator=generator)
        next_words = torch.randint(1, TINY["vocab_size"], (count,), generator=generator)
        histories = [(h[0] + [int(tokens[i])], h[1] + [rows[i]]) for i, h in enumerate(histories)]
        words, attach, state = model.step(state, tokens, rows, next_words)
        assert words.shape == (count, TINY["vocab_size"]) and state.states.shape == (count, t + 1, TINY["d_model"])
        assert (attach is None) == (family == "base-lm")
        for i, (seen, seen_rows) in enumerate(histories):
            words_alone, attach_alone, alone = _alone(model, seen, seen_rows, int(next_words[i]))
            torch.testing.assert_close(words[i], words_alone, **FLOAT32)
            torch.testing.assert_close(state.states[i], alone.states[0], **FLOAT32)
            if attach is not None:
                torch.testing.assert_close(attach[i], attach_alone, **FLOAT32)
    assert state.buffers.capacity >= max(counts)
    # the states are the training forward's final-layer states of each hypothesis's prefix under its tape rows
    for i, (seen, seen_rows) in enumerate(histories):
        tape = torch.zeros(1, length, length, dtype=torch.long)
        for j, row in enumerate(seen_rows):
            tape[0, j, : j + 1] = row
        h = model.hidden_states(torch.tensor([seen]), tape, torch.tensor([length]))
        torch.testing.assert_close(state.states[i], h[0], **FLOAT32)


def test_a_step_past_the_length_the_state_was_started_for_raises() -> None:
    model = build(TINY, "pushdown").eval()
    state = model.start(1)
    _, _, state = model.step(state, torch.tensor([1]), torch.zeros(1, 1, dtype=torch.long), torch.tensor([2]))
    with pytest.raises(ValueError, match="holds 1 positions"):
        model.step(state, torch.tensor([2]), torch.zeros(1, 2, dtype=torch.long), torch.tensor([3]))
