"""Well-formedness of Choe–Charniak prefixes, one action at a time (shared by sampling and the beam)."""

import numpy as np
import pytest

from lightning_modules.data.encodings.choe_charniak import ActionVocab, TokenType, choe_charniak
from lightning_modules.data.tree import parse_tree
from lightning_modules.families.tg.cc_constraints import ActionMasks, CCState, build_tree

TREE = parse_tree("(S (NP the cat) (VP meows))")


def vocab():
    return ActionVocab.build([choe_charniak(TREE), choe_charniak(parse_tree("(X dog)"))])


def allowed_tokens(masks, state, **flags):
    return sorted(masks.vocab.tokens[i] for i in np.flatnonzero(masks.allowed(state, **flags)))


def test_state_follows_a_tree_and_rebuilds_it():
    actions = choe_charniak(TREE)
    state = CCState()
    for token, ttype in zip(actions.tokens[1:], actions.types[1:]):
        state = state.advance(ttype, token)
        assert not state.finished or token == "S)"
    assert state.finished
    assert build_tree(actions.tokens, actions.types) == TREE


def test_allowed_actions():
    masks = ActionMasks(vocab())
    start = CCState()
    assert allowed_tokens(masks, start) == ["(NP", "(S", "(VP", "(X"]  # the root opens first
    opened = start.advance(TokenType.ONT, "(S")
    assert "S)" not in allowed_tokens(masks, opened)  # an empty constituent cannot close
    assert "the" in allowed_tokens(masks, opened) and "</s>" not in allowed_tokens(masks, opened)
    filled = opened.advance(TokenType.T, "the")
    assert "S)" in allowed_tokens(masks, filled)
    assert "S)" not in allowed_tokens(masks, filled, close_root=False)  # words remain: the root stays open
    inner = filled.advance(TokenType.ONT, "(NP").advance(TokenType.T, "cat")
    assert allowed_tokens(masks, inner, opening=False, terminal=False, close_root=False) == ["NP)"]
    assert not masks.allowed(inner.advance(TokenType.CNT, "NP)").advance(TokenType.CNT, "S)")).any()


@pytest.mark.parametrize("ttype, token, state", [
    (TokenType.T, "the", CCState()),
    (TokenType.CNT, "S)", CCState(("S",), 1, True)),
    (TokenType.CNT, "NP)", CCState(("S",), 0, True)),
    (TokenType.ONT, "(S", CCState((), 0, True)),
])
def test_invalid_actions_are_refused(ttype, token, state):
    with pytest.raises(ValueError):
        state.advance(ttype, token)
