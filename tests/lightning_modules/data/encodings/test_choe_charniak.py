"""Choe–Charniak actions, terminal sequences, documents, tree transforms and the action vocabulary."""

from __future__ import annotations

import json

import numpy as np
import pytest

from lightning_modules.data.encodings.choe_charniak import (
    ActionVocab,
    TokenType,
    choe_charniak,
    document_choe_charniak,
    terminal_actions,
    transform_tree,
)
from lightning_modules.data.tree import clean, drop_pos_tags, parse_tree, read_bracketed, to_bracketed
from lightning_modules.errors import InputError

T, ONT, CNT, SOS = TokenType.T, TokenType.ONT, TokenType.CNT, TokenType.SOS
CAT = parse_tree("(S (NP the hungry cat) (VP meows))")


def test_choe_charniak_sequence():
    a = choe_charniak(CAT)
    assert " ".join(a.tokens) == "<s> (S (NP the hungry cat NP) (VP meows VP) S)"
    assert a.types == (SOS, ONT, ONT, T, T, T, CNT, ONT, T, CNT, CNT)
    assert a.word_index == (-1, -1, -1, 0, 1, 2, -1, -1, 3, -1, -1)


def test_choe_charniak_from_ptb_tree_with_pos_and_traces():
    tree = parse_tree("( (S (NP-SBJ-1 (DT The) (NN cat)) (VP (VBZ meows) (NP (-NONE- *T*-1))) (. .)) )")
    a = choe_charniak(drop_pos_tags(clean(tree)))
    assert " ".join(a.tokens) == "<s> (S (NP The cat NP) (VP meows VP) . S)"


def test_several_terminals_per_word_keep_the_word_index():
    pieces = {"the": ["▁the"], "hungry": ["▁hun", "gry"], "cat": ["▁c", "a", "t"], "meows": ["▁meows"]}
    a = choe_charniak(CAT, pieces.__getitem__)
    assert " ".join(a.tokens) == "<s> (S (NP ▁the ▁hun gry ▁c a t NP) (VP ▁meows VP) S)"
    assert [w for w, t in zip(a.word_index, a.types) if t == T] == [0, 1, 1, 2, 2, 2, 3]
    assert all(w == -1 for w, t in zip(a.word_index, a.types) if t != T)


def test_a_word_without_terminals_is_an_error():
    with pytest.raises(InputError, match="no tokens"):
        choe_charniak(CAT, lambda w: [])


def test_terminal_sequence_has_bos_and_eos():
    a = terminal_actions(CAT)
    assert a.tokens == ("<s>", "the", "hungry", "cat", "meows", "</s>")
    assert a.types == (SOS, T, T, T, T, T)
    assert a.word_index == (-1, 0, 1, 2, 3, -1)


def test_documents():
    second = parse_tree("(S (NP it) (VP sleeps))")
    doc = document_choe_charniak([CAT, second])
    assert " ".join(doc.tokens) == ("<s> (DOC (S (NP the hungry cat NP) (VP meows VP) S) "
                                    "(S (NP it NP) (VP sleeps VP) S) DOC)")
    assert max(doc.word_index) == 5 and doc.tokens.count("<s>") == 1
    bare = document_choe_charniak([CAT, second], root_label=None)
    assert " ".join(bare.tokens) == ("<s> (S (NP the hungry cat NP) (VP meows VP) S) "
                                     "(S (NP it NP) (VP sleeps VP) S)")
    words = terminal_actions([CAT, second])
    assert words.tokens == ("<s>", "the", "hungry", "cat", "meows", "it", "sleeps", "</s>")
    with pytest.raises(InputError):
        document_choe_charniak([])


@pytest.mark.parametrize(
    ("name", "text", "expected"),
    [  # TG transforms_test.py
        ("none", "(S (NP the hungry cat) (VP meows))", "(S (NP the hungry cat) (VP meows))"),
        ("left", "(S (NP the hungry cat) (VP meows))", "(S (NP (VP the hungry) cat) meows)"),
        ("left", "(S (NP the hungry cat) (VP meows loudly))", "(S (NP (VP the hungry) cat) meows loudly)"),
        ("right", "(S (NP the hungry cat) (VP meows))", "(S the (NP hungry (VP cat meows)))"),
        ("right", "(S (NP the hungry cat) (VP meows loudly))", "(S the hungry (NP cat (VP meows loudly)))"),
        ("reversed", "(A x (B y))", "(A (B x) y)"),
        ("reversed", "(A x (B y (C z)))", "(A (B (C x) y) z)"),
    ],
)
def test_tree_transforms(name, text, expected):
    assert to_bracketed(transform_tree(parse_tree(text), name)) == expected


def test_unknown_tree_transform():
    with pytest.raises(InputError, match="unknown tree transform"):
        transform_tree(CAT, "sideways")


def test_vocabulary_layout_types_and_json():
    vocab = ActionVocab.build([choe_charniak(CAT), terminal_actions(CAT)])
    assert vocab.tokens == ("<PAD>", "<s>", "</s>", "<XXX>", "cat", "hungry", "meows", "the",
                            "(NP", "(S", "(VP", "NP)", "S)", "VP)")
    ids = vocab.ids(["<s>", "(S", "cat", "S)", "</s>", "<XXX>", "<PAD>"])
    assert ids.tolist() == [1, 9, 4, 12, 2, 3, 0]
    assert vocab.token_types(ids).tolist() == [SOS, ONT, T, CNT, T, TokenType.PLACEHOLDER, TokenType.PAD]
    again = ActionVocab.from_json(json.loads(json.dumps(vocab.to_json())))
    assert again == vocab and again.tokens == vocab.tokens
    with pytest.raises(InputError, match="not in the vocabulary"):
        vocab.ids(["dog"])
    assert vocab.ids(["dog", "cat"], unknown="<XXX>").tolist() == [3, 4]
    with pytest.raises(InputError, match="malformed"):
        ActionVocab.from_json({"terminals": []})


def test_every_ptb_sample_tree(shared_data):
    files = sorted((shared_data / "ptb_nltk_sample" / "combined").glob("wsj_*.mrg"))
    trees = [drop_pos_tags(clean(t)) for f in files for _, t in read_bracketed(f)]
    assert len(trees) == 3914
    for tree in trees:
        a = choe_charniak(tree)
        types = np.asarray(a.types)
        depth = np.cumsum((types == ONT).astype(int) - (types == CNT))
        assert depth[-1] == 0 and depth[1:].min() >= 0 and (depth[1:-1] > 0).all()
        assert [t for t, ty in zip(a.tokens, a.types) if ty == T] == tree.leaves()
        assert [w for w in a.word_index if w >= 0] == list(range(len(tree.leaves())))
