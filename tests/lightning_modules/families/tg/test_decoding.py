"""``AttentionRule`` over ``DecodingRows``: token by token, exactly the attention ``segment`` +
``chunk_attention`` give each query.

Checked on every PTB-sample tree and on random trees and documents (hypothesis), TG (depth, linear and no
relpos) and the causal TXL, both memory modes, chunk lengths that cut the sequences in many places.
"""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from lightning_modules.data.encodings.choe_charniak import ActionVocab, choe_charniak, document_choe_charniak
from lightning_modules.data.encodings.segmentation import chunk_attention, segment
from lightning_modules.data.tree import Tree, clean, drop_pos_tags, read_bracketed
from lightning_modules.families.tg import encoding as tg
from lightning_modules.families.tg import txl_encoding as txl
from lightning_modules.families.tg.decoding import AttentionRule, DecodingRows

LABELS = st.sampled_from(["S", "NP", "VP", "PP"])
WORDS = st.sampled_from(["the", "cat", "sat", "on", "a", "mat"])


def _node(children: st.SearchStrategy) -> st.SearchStrategy[Tree]:
    return st.builds(Tree, LABELS, st.lists(children, min_size=1, max_size=4).map(tuple))


TREES = _node(st.recursive(WORDS, _node, max_leaves=25))


def expected_attention(example, length: int, memory: str) -> list[tuple[list[int], list[int]]]:
    """Per position: (keys, relpos) of the chunked forward pass."""
    seg = segment(example, length, length, memory)
    out: list[tuple[list[int], list[int]]] = [([], []) for _ in range(len(example))]
    for c in range(len(seg)):
        att = chunk_attention(example, seg, c)
        start = int(seg.starts[c])
        for q, k, r in zip(att.query.tolist(), att.key.tolist(), att.relpos.tolist()):
            out[start + q][0].append(k)
            out[start + q][1].append(r)
    return out


def check(example, causal: bool, length: int, memory: str) -> None:
    """Every row advanced over the example's tokens gives each token the chunked pass's keys and relpos;
    rows copied midway (beam branches) go on giving the same answers as the original."""
    expected = expected_attention(example, length, memory)
    rule = AttentionRule(causal, example.relpos, length, memory)
    fields = DecodingRows.empty(1)
    width = len(example) + 1
    rows = DecodingRows(**{name: torch.nn.functional.pad(t, (0, width - 1)) if t.dim() == 2 else t
                           for name, t in fields.items()})
    for i, ttype in enumerate(example.types.tolist()):
        if i % 5 == 2:  # a branch taken here: a copy of row 0
            rows = DecodingRows(**{name: torch.cat([getattr(rows, name), getattr(rows, name)[:1]])
                                   for name in fields})
        everyone = torch.arange(len(rows.position))
        keys, relpos, compose = rule.advance(rows, everyone, torch.full_like(everyone, ttype))
        assert (keys == keys[:1]).all() and (relpos == relpos[:1]).all() and (compose == compose[:1]).all()
        valid = keys[0] >= 0
        assert keys[0][valid].tolist() == expected[i][0], (i, keys[0].tolist(), expected[i][0])
        assert relpos[0][valid].tolist() == expected[i][1]
        assert bool(compose[0]) == bool(example.compose[i])
        later = set(torch.nonzero(rule.live(rows)[0])[:, 0].tolist())  # every key a later token attends
        assert all(k in later for q in range(i + 1, len(example)) for k in expected[q][0] if k <= i)


@pytest.fixture(scope="module")
def ptb_actions(shared_data):
    files = sorted((shared_data / "ptb_nltk_sample" / "combined").glob("wsj_*.mrg"))
    actions = [choe_charniak(drop_pos_tags(clean(t))) for f in files for _, t in read_bracketed(f)]
    return actions, ActionVocab.build(actions)


@pytest.mark.parametrize("memory", ["smart", "plain"])
@pytest.mark.parametrize("relpos", ["depth", "linear", "none"])
def test_tg_on_ptb_trees(ptb_actions, memory, relpos):
    actions, vocab = ptb_actions
    for a in actions[:: 40 if relpos == "depth" else 120]:
        check(tg.encode(a, vocab, relpos), False, 8, memory)


def test_txl_on_ptb_trees(ptb_actions):
    actions, vocab = ptb_actions
    for a in actions[::120]:
        check(txl.encode(a, vocab, "linear"), True, 8, "smart")
        check(txl.encode(a, vocab, "none"), True, 8, "plain")


@settings(max_examples=60, deadline=None)
@given(trees=st.lists(TREES, min_size=1, max_size=3), length=st.sampled_from([2, 3, 5, 16]),
       memory=st.sampled_from(["smart", "plain"]))
def test_random_trees_and_documents(trees, length, memory):
    actions = choe_charniak(trees[0]) if len(trees) == 1 else document_choe_charniak(trees)
    vocab = ActionVocab.build([actions])
    check(tg.encode(actions, vocab, "depth"), False, length, memory)
    check(txl.encode(actions, vocab, "linear"), True, length, memory)


def test_bad_arguments():
    for args, message in (((False, "depth", 0), "positive"), ((False, "rel", 4), "relpos"),
                          ((False, "depth", 4, "lru"), "memory")):
        with pytest.raises(ValueError, match=message):
            AttentionRule(*args)


@settings(max_examples=30, deadline=None)
@given(tree=TREES, memory=st.sampled_from(["smart", "plain"]))
def test_every_row_and_first_chunk_shortcuts(tree, memory):
    """Advancing every row (index None: the fields replaced) and, within the first chunk, skipping the chunk
    and memory bookkeeping (``first_chunk``) give the same attention and state as the general path."""
    example = tg.encode(choe_charniak(tree), ActionVocab.build([choe_charniak(tree)]), "depth")
    length = 16
    rule = AttentionRule(False, "depth", length, memory)
    width = len(example) + 1

    def start() -> DecodingRows:
        return DecodingRows(**{name: torch.nn.functional.pad(t, (0, width - 1)) if t.dim() == 2 else t
                               for name, t in DecodingRows.empty(2).items()})

    general, shortcut = start(), start()
    for i, ttype in enumerate(example.types.tolist()):
        types = torch.full((2,), ttype)
        expected = rule.advance(general, torch.arange(2), types)
        got = rule.advance(shortcut, None, types, first_chunk=i < length)
        for a, b in zip(expected, got, strict=True):
            assert torch.equal(a, b)
        for name in DecodingRows.empty(1):
            assert torch.equal(getattr(general, name), getattr(shortcut, name)), name
