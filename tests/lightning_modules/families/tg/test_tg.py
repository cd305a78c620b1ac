"""TG encoding against the official library's golden vectors (reference-impls §1.4), and its invariants.

The chunked vectors are the official ``cpp_masking_test.py`` (sequence = memory = 4, use_different_attn_fns)
for ``(S (NP the hungry cat) (VP meows))``; the full-sequence tables were produced by the C++ library.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from lightning_modules.data.encodings.batch import collate, collate_chunk
from lightning_modules.data.encodings.choe_charniak import ActionVocab, TokenType, choe_charniak
from lightning_modules.data.encodings.segmentation import chunk_attention, segment
from lightning_modules.data.tree import clean, drop_pos_tags, parse_tree, read_bracketed
from lightning_modules.families.tg import encoding as tg
from lightning_modules.families.tg.encoding import TGState

CAT = "(S (NP the hungry cat) (VP meows))"
MAT = "(S (NP (NP the cat) (PP on (NP the mat))) (VP sat (ADVP quietly)) .)"
TYPE_NAMES = {1: "SOS", 2: "ONT", 3: "T", 4: "CNT1", 14: "CNT2"}


def encode(text: str, relpos: str = "depth"):
    actions = choe_charniak(parse_tree(text))
    vocab = ActionVocab.build([actions])
    return tg.encode(actions, vocab, relpos), vocab


# -- full sequence: (token, type, depth, compose, {key: relpos}) per position --------------------------
FULL = {
    CAT: [
        ("<s>", "SOS", 0, 0, {0: 0}),
        ("(S", "ONT", 1, 0, {0: 1, 1: 0}),
        ("(NP", "ONT", 2, 0, {0: 2, 1: 1, 2: 0}),
        ("the", "T", 3, 0, {0: 3, 1: 2, 2: 1, 3: 0}),
        ("hungry", "T", 3, 0, {0: 3, 1: 2, 2: 1, 3: 0, 4: 0}),
        ("cat", "T", 3, 0, {0: 3, 1: 2, 2: 1, 3: 0, 4: 0, 5: 0}),
        ("NP)", "CNT1", 2, 1, {2: 0, 3: -1, 4: -1, 5: -1, 6: 0}),
        ("NP)", "CNT2", 2, 0, {0: 2, 1: 1, 6: 0, 7: 0}),
        ("(VP", "ONT", 2, 0, {0: 2, 1: 1, 6: 0, 8: 0}),
        ("meows", "T", 3, 0, {0: 3, 1: 2, 6: 1, 8: 1, 9: 0}),
        ("VP)", "CNT1", 2, 1, {8: 0, 9: -1, 10: 0}),
        ("VP)", "CNT2", 2, 0, {0: 2, 1: 1, 6: 0, 10: 0, 11: 0}),
        ("S)", "CNT1", 1, 1, {1: 0, 6: -1, 10: -1, 12: 0}),
        ("S)", "CNT2", 1, 0, {0: 1, 12: 0, 13: 0}),
    ],
    MAT: [
        ("<s>", "SOS", 0, 0, {0: 0}),
        ("(S", "ONT", 1, 0, {0: 1, 1: 0}),
        ("(NP", "ONT", 2, 0, {0: 2, 1: 1, 2: 0}),
        ("(NP", "ONT", 3, 0, {0: 3, 1: 2, 2: 1, 3: 0}),
        ("the", "T", 4, 0, {0: 4, 1: 3, 2: 2, 3: 1, 4: 0}),
        ("cat", "T", 4, 0, {0: 4, 1: 3, 2: 2, 3: 1, 4: 0, 5: 0}),
        ("NP)", "CNT1", 3, 1, {3: 0, 4: -1, 5: -1, 6: 0}),
        ("NP)", "CNT2", 3, 0, {0: 3, 1: 2, 2: 1, 6: 0, 7: 0}),
        ("(PP", "ONT", 3, 0, {0: 3, 1: 2, 2: 1, 6: 0, 8: 0}),
        ("on", "T", 4, 0, {0: 4, 1: 3, 2: 2, 6: 1, 8: 1, 9: 0}),
        ("(NP", "ONT", 4, 0, {0: 4, 1: 3, 2: 2, 6: 1, 8: 1, 9: 0, 10: 0}),
        ("the", "T", 5, 0, {0: 5, 1: 4, 2: 3, 6: 2, 8: 2, 9: 1, 10: 1, 11: 0}),
        ("mat", "T", 5, 0, {0: 5, 1: 4, 2: 3, 6: 2, 8: 2, 9: 1, 10: 1, 11: 0, 12: 0}),
        ("NP)", "CNT1", 4, 1, {10: 0, 11: -1, 12: -1, 13: 0}),
        ("NP)", "CNT2", 4, 0, {0: 4, 1: 3, 2: 2, 6: 1, 8: 1, 9: 0, 13: 0, 14: 0}),
        ("PP)", "CNT1", 3, 1, {8: 0, 9: -1, 13: -1, 15: 0}),
        ("PP)", "CNT2", 3, 0, {0: 3, 1: 2, 2: 1, 6: 0, 15: 0, 16: 0}),
        ("NP)", "CNT1", 2, 1, {2: 0, 6: -1, 15: -1, 17: 0}),
        ("NP)", "CNT2", 2, 0, {0: 2, 1: 1, 17: 0, 18: 0}),
        ("(VP", "ONT", 2, 0, {0: 2, 1: 1, 17: 0, 19: 0}),
        ("sat", "T", 3, 0, {0: 3, 1: 2, 17: 1, 19: 1, 20: 0}),
        ("(ADVP", "ONT", 3, 0, {0: 3, 1: 2, 17: 1, 19: 1, 20: 0, 21: 0}),
        ("quietly", "T", 4, 0, {0: 4, 1: 3, 17: 2, 19: 2, 20: 1, 21: 1, 22: 0}),
        ("ADVP)", "CNT1", 3, 1, {21: 0, 22: -1, 23: 0}),
        ("ADVP)", "CNT2", 3, 0, {0: 3, 1: 2, 17: 1, 19: 1, 20: 0, 23: 0, 24: 0}),
        ("VP)", "CNT1", 2, 1, {19: 0, 20: -1, 23: -1, 25: 0}),
        ("VP)", "CNT2", 2, 0, {0: 2, 1: 1, 17: 0, 25: 0, 26: 0}),
        (".", "T", 2, 0, {0: 2, 1: 1, 17: 0, 25: 0, 27: 0}),
        ("S)", "CNT1", 1, 1, {1: 0, 17: -1, 25: -1, 27: -1, 28: 0}),
        ("S)", "CNT2", 1, 0, {0: 1, 28: 0, 29: 0}),
    ],
}


@pytest.mark.parametrize("text", [CAT, MAT])
def test_full_sequence_golden(text):
    ex, vocab = encode(text)
    table = FULL[text]
    assert [vocab.tokens[i] for i in ex.tokens] == [row[0] for row in table]
    assert [TYPE_NAMES[t] for t in ex.types.tolist()] == [row[1] for row in table]
    assert ex.depth.tolist() == [row[2] for row in table]
    assert ex.compose.astype(int).tolist() == [row[3] for row in table]
    for i, row in enumerate(table):
        keys, rel = ex.attend(i)
        assert dict(zip(keys.tolist(), rel.tolist())) == row[4], i
        assert keys.tolist() == sorted(row[4])


def test_labels_golden():
    ex, vocab = encode(CAT)  # Figure 2: no prediction at COMPOSE positions nor after the last S)
    labels = [vocab.tokens[i] if i else None for i in ex.labels.tolist()]
    assert labels == ["(S", "(NP", "the", "hungry", "cat", "NP)", None, "(VP", "meows", "VP)", None, "S)",
                      None, None]


# -- chunked (L = M = 4), official ids 1..11 = <s> (S (NP the hungry cat NP) (VP meows VP) S) -----------
OFFICIAL_IDS = ["<PAD>", "<s>", "(S", "(NP", "the", "hungry", "cat", "NP)", "(VP", "meows", "VP)", "S)"]
INPUTS = [[1, 2, 3, 4], [5, 6, 7, 7], [8, 9, 10, 10], [11, 11, 0, 0]]
LABELS = [[2, 3, 4, 5], [6, 7, 0, 8], [9, 10, 0, 11], [0, 0, 0, 0]]
# the official test types <s> as ONT, which gives the same output as SOS
TYPES = [[1, 2, 2, 3], [3, 3, 4, 14], [2, 3, 4, 14], [4, 14, 0, 0]]
DEPTH = [[0, 1, 2, 3], [3, 3, 2, 2], [2, 3, 2, 2], [1, 1, 0, 0]]
INDICATOR = [[0, 0, 0, 0], [0, 0, 1, 0], [0, 0, 1, 0], [1, 0, 0, 0]]
ZERO = [0] * 8
# memory mode -> per chunk: mem_pos, attn_mask, memory_attn_mask, relpos, mem_src (from smartmem_*)
CHUNKS = {
    "plain": [
        ([-1] * 4, ["1000", "1100", "1110", "1111"], ["0000"] * 4,
         [ZERO, [0, 0, 0, 0, 1, 0, 0, 0], [0, 0, 0, 0, 2, 1, 0, 0], [0, 0, 0, 0, 3, 2, 1, 0]], [4, 5, 6, 7]),
        ([0, 1, 2, 3], ["1000", "1100", "1110", "0011"], ["1111", "1111", "0011", "1100"],
         [[3, 2, 1, 0, 0, 0, 0, 0], [3, 2, 1, 0, 0, 0, 0, 0], [0, 0, 0, -1, -1, -1, 0, 0],
          [2, 1, 0, 0, 0, 0, 0, 0]],
         [4, 5, 6, 7]),
        ([4, 5, 6, 7], ["1000", "1100", "1110", "0011"], ["0010", "0010", "0000", "0010"],
         [ZERO, [0, 0, 1, 0, 1, 0, 0, 0], [0, 0, 0, 0, 0, -1, 0, 0], ZERO], [4, 5, 6, 7]),
        ([8, 9, 10, 11], ["1000", "1100", "0000", "0000"], ["0010", "0000", "0000", "0000"],
         [[0, 0, -1, 0, 0, 0, 0, 0], ZERO, ZERO, ZERO], [4, 5, -1, -1]),
    ],
    "smart": [
        ([-1] * 4, ["1000", "1100", "1110", "1111"], ["0000"] * 4,
         [ZERO, [0, 0, 0, 0, 1, 0, 0, 0], [0, 0, 0, 0, 2, 1, 0, 0], [0, 0, 0, 0, 3, 2, 1, 0]], [4, 5, 6, 7]),
        ([0, 1, 2, 3], ["1000", "1100", "1110", "0011"], ["1111", "1111", "0011", "1100"],
         [[3, 2, 1, 0, 0, 0, 0, 0], [3, 2, 1, 0, 0, 0, 0, 0], [0, 0, 0, -1, -1, -1, 0, 0],
          [2, 1, 0, 0, 0, 0, 0, 0]],
         [-1, 0, 1, 6]),
        ([-1, 0, 1, 6], ["1000", "1100", "1110", "0011"], ["0111", "0111", "0000", "0111"],
         [[0, 2, 1, 0, 0, 0, 0, 0], [0, 3, 2, 1, 1, 0, 0, 0], [0, 0, 0, 0, 0, -1, 0, 0],
          [0, 2, 1, 0, 0, 0, 0, 0]],
         [1, 2, 3, 6]),
        ([0, 1, 6, 10], ["1000", "1100", "0000", "0000"], ["0111", "1000", "0000", "0000"],
         [[0, 0, -1, -1, 0, 0, 0, 0], [1, 0, 0, 0, 0, 0, 0, 0], ZERO, ZERO], [-1, -1, 0, 4]),
    ],
}


def bits(rows: list[str]) -> list[list[bool]]:
    return [[c == "1" for c in row] for row in rows]


@pytest.mark.parametrize("chunk", range(4))
@pytest.mark.parametrize("memory", ["plain", "smart"])
def test_chunked_golden(memory, chunk):
    ex, vocab = encode(CAT)
    seg = segment(ex, 4, 4, memory)
    assert len(seg) == 4 and seg.starts.tolist() == [0, 4, 8, 12]
    mem_pos, attn, mem_attn, relpos, mem_src = CHUNKS[memory][chunk]
    assert seg.mem_pos[chunk].tolist() == mem_pos
    assert seg.mem_src[chunk].tolist() == mem_src
    batch = collate_chunk([ex], [seg], chunk)
    official = {vocab.id(t): i for i, t in enumerate(OFFICIAL_IDS)}
    assert [official[i] for i in batch.inputs[0].tolist()] == INPUTS[chunk]
    assert [official[i] for i in batch.labels[0].tolist()] == LABELS[chunk]
    assert batch.types[0].tolist() == TYPES[chunk]
    assert batch.compose[0].long().tolist() == INDICATOR[chunk]
    depth = np.zeros(4, dtype=int)
    depth[: min(4, len(ex) - 4 * chunk)] = ex.depth[4 * chunk : 4 * chunk + 4]
    assert depth.tolist() == DEPTH[chunk]
    assert batch.attn_mask[0, :, 4:].tolist() == bits(attn)
    assert batch.attn_mask[0, :, :4].tolist() == bits(mem_attn)
    assert batch.relpos[0].tolist() == relpos
    assert batch.reset.tolist() == [chunk == 0]
    assert batch.mem_src[0].tolist() == mem_src


def test_relpos_ablations():
    linear, _ = encode(CAT, "linear")
    none, _ = encode(CAT, "none")
    depth, _ = encode(CAT)
    for i in range(len(depth)):
        keys, _ = depth.attend(i)
        assert linear.attend(i)[0].tolist() == none.attend(i)[0].tolist() == keys.tolist()
        assert linear.attend(i)[1].tolist() == (i - keys).tolist()
        assert none.attend(i)[1].tolist() == [0] * len(keys)


def test_tgstate_steps_and_errors():
    state = TGState()
    types = [1, 2, 2, 3, 3, 3, 4, 14, 2, 3, 4, 14, 4, 14]
    steps = [state.step(t) for t in types]
    for step, row in zip(steps, FULL[CAT]):
        assert dict(zip(step.keys, step.relpos)) == row[4] and step.depth == row[2] and step.compose == row[3]
    assert state.stack == [0, 12] and state.position == 14
    with pytest.raises(ValueError, match="without an open"):
        state.advance(TokenType.CNT)
    with pytest.raises(ValueError, match="empty constituent"):
        s = TGState()
        s.advance(TokenType.SOS), s.advance(TokenType.ONT), s.advance(TokenType.CNT)
    with pytest.raises(ValueError, match="padding"):
        TGState().advance(TokenType.PAD)
    with pytest.raises(ValueError, match="relpos"):
        TGState("tree")


def test_collate_pads_and_rows():
    short, _ = encode("(S (NP it) (VP sleeps))")  # 11 tokens
    long_, _ = encode(MAT)  # 30 tokens
    segs = [segment(e, 8, 8, "smart") for e in (short, long_)]
    batch = collate([(short, segs[0], 1), None, (long_, segs[1], 3)], 8)
    assert batch.attn_mask.shape == batch.relpos.shape == (3, 8, 16)
    assert batch.attn_mask.dtype == torch.bool and batch.relpos.dtype == torch.long
    assert batch.inputs.dtype == torch.long and batch.mem_src.shape == (3, 8)
    assert len(short) == 12 and len(long_) == 30
    assert batch.inputs[0, 4:].eq(0).all() and not batch.attn_mask[0, 4:].any()  # pad queries attend nothing
    assert not batch.attn_mask[1].any() and batch.mem_src[1].eq(-1).all() and batch.inputs[1].eq(0).all()
    assert batch.inputs[2, 6:].eq(0).all() and batch.attn_mask[2, :6].any(-1).all()
    assert batch.reset.tolist() == [False, False, False]
    assert batch.word_index[0].tolist() == [-1] * 8
    assert batch.word_index[2, :6].tolist() == [-1, -1, -1, 7, -1, -1]
    for row, (ex, seg, c) in ((0, (short, segs[0], 1)), (2, (long_, segs[1], 3))):
        att = chunk_attention(ex, seg, c)
        q, col = np.nonzero(batch.attn_mask[row].numpy())
        assert q.tolist() == att.query.tolist() and col.tolist() == att.column.tolist()
        assert batch.relpos[row].numpy()[q, col].tolist() == att.relpos.tolist()
    moved = batch.to("cpu")
    assert torch.equal(moved.attn_mask, batch.attn_mask) and torch.equal(moved.relpos, batch.relpos)
    with pytest.raises(ValueError, match="segmented with"):
        collate([(short, segs[0], 0)], 4)


@pytest.fixture(scope="module")
def ptb(shared_data):
    files = sorted((shared_data / "ptb_nltk_sample" / "combined").glob("wsj_*.mrg"))
    actions = [choe_charniak(drop_pos_tags(clean(t))) for f in files for _, t in read_bracketed(f)]
    vocab = ActionVocab.build(actions)
    return [tg.encode(a, vocab) for a in actions]


def test_tgstate_agrees_with_the_encoder_on_every_ptb_tree(ptb):
    assert len(ptb) == 3914
    for ex in ptb:
        state = TGState()
        for i, ttype in enumerate(ex.types.tolist()):
            step = state.step(ttype)
            keys, rel = ex.attend(i)
            assert step.keys == keys.tolist() and step.relpos == rel.tolist()
            assert step.depth == ex.depth[i] and step.compose == ex.compose[i]


@pytest.mark.parametrize("memory", ["plain", "smart"])
def test_memory_bookkeeping_on_ptb(ptb, memory):
    lost = 0
    for ex in ptb[::9]:
        seg = segment(ex, 8, 8, memory)
        full = {(q, k): r for q in range(len(ex)) for k, r in zip(*map(np.ndarray.tolist, ex.attend(q)))}
        for c in range(len(seg)):
            start = int(seg.starts[c])
            if c + 1 < len(seg):  # the next memory is the gather of (memory, chunk) by mem_src
                held = np.concatenate([seg.mem_pos[c], np.arange(start, start + 8)])
                expect = np.where(seg.mem_src[c] >= 0, held[seg.mem_src[c]], -1)
                assert expect.tolist() == seg.mem_pos[c + 1].tolist()
            att = chunk_attention(ex, seg, c)  # a subset of the full attention, with the same relpos
            entries = zip(att.query.tolist(), att.key.tolist(), att.relpos.tolist())
            got = {(start + q, k): r for q, k, r in entries}
            assert all(full[qk] == r for qk, r in got.items())
            missing = sum(1 for (q, k) in full if start <= q < start + 8 and (q, k) not in got)
            if memory == "smart" and missing:  # smart memory drops stack items only once it has been full
                assert (seg.mem_pos[: c + 1].min(axis=1) >= 0).any()
            lost += missing
    assert lost > 0  # plain: older stack items are unreachable; smart: some PTB stacks exceed 8 items
