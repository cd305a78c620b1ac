"""Transformer-XL encoding against the official ``TXLCausalMasking(4, 4)`` golden vectors."""

from __future__ import annotations

import numpy as np
import pytest

from lightning_modules.data.encodings.batch import collate_chunk
from lightning_modules.data.encodings.choe_charniak import (
    ActionVocab,
    TokenType,
    choe_charniak,
    terminal_actions,
)
from lightning_modules.data.encodings.segmentation import chunk_attention, segment
from lightning_modules.data.tree import parse_tree
from lightning_modules.families.tg import txl_encoding as txl

CAT = parse_tree("(S (NP the hungry cat) (VP meows))")
OFFICIAL_IDS = ["<PAD>", "<s>", "(S", "(NP", "the", "hungry", "cat", "NP)", "(VP", "meows", "VP)", "S)"]
INPUTS = [[1, 2, 3, 4], [5, 6, 7, 8], [9, 10, 11, 0]]
MEM_POS = [[-1] * 4, [0, 1, 2, 3], [4, 5, 6, 7]]
CAUSAL = [[1, 0, 0, 0], [1, 1, 0, 0], [1, 1, 1, 0], [1, 1, 1, 1]]
RELPOS = [
    [[0] * 8, [0, 0, 0, 0, 1, 0, 0, 0], [0, 0, 0, 0, 2, 1, 0, 0], [0, 0, 0, 0, 3, 2, 1, 0]],
    [[4, 3, 2, 1, 0, 0, 0, 0], [5, 4, 3, 2, 1, 0, 0, 0], [6, 5, 4, 3, 2, 1, 0, 0], [7, 6, 5, 4, 3, 2, 1, 0]],
    [[4, 3, 2, 1, 0, 0, 0, 0], [5, 4, 3, 2, 1, 0, 0, 0], [6, 5, 4, 3, 2, 1, 0, 0], [0] * 8],
]


def encode_cat(relpos: str = "linear"):
    actions = choe_charniak(CAT)
    vocab = ActionVocab.build([actions])
    return txl.encode(actions, vocab, relpos), vocab


@pytest.mark.parametrize("chunk", range(3))
def test_chunked_golden(chunk):
    ex, vocab = encode_cat()
    seg = segment(ex, 4, 4, "plain")
    assert len(seg) == 3 and seg.mem_pos[chunk].tolist() == MEM_POS[chunk]
    batch = collate_chunk([ex], [seg], chunk)
    official = {vocab.id(t): i for i, t in enumerate(OFFICIAL_IDS)}
    assert [official[i] for i in batch.inputs[0].tolist()] == INPUTS[chunk]
    n = 4 if chunk < 2 else 3  # the official lib also fills the padding row; padding attends nothing here
    assert batch.attn_mask[0, :n, 4:].long().tolist() == CAUSAL[:n]
    assert batch.attn_mask[0, :n, :4].all() == (chunk > 0) and not batch.attn_mask[0, n:].any()
    assert batch.relpos[0].tolist() == RELPOS[chunk]
    assert not batch.compose.any() and batch.types[0, :n].tolist() == [
        int(t) for t in ex.types[4 * chunk : 4 * chunk + n]]
    if chunk < 2:
        assert batch.mem_src[0].tolist() == [4, 5, 6, 7]  # the chunk becomes the next memory


def test_untransformed_sequence_and_labels():
    ex, vocab = encode_cat()
    assert [vocab.tokens[i] for i in ex.tokens] == ["<s>", *OFFICIAL_IDS[2:]]
    assert [vocab.tokens[i] if i else None for i in ex.labels.tolist()] == [*OFFICIAL_IDS[2:], None]
    assert ex.types.tolist()[-1] == TokenType.CNT and not ex.depth.any()
    keys, rel = ex.attend(5)
    assert keys.tolist() == [0, 1, 2, 3, 4, 5] and rel.tolist() == [5, 4, 3, 2, 1, 0]
    assert ex.stack_after(5).tolist() == [0, 1, 2, 3, 4, 5]


def test_no_position_information():
    ex, _ = encode_cat("none")
    seg = segment(ex, 4, 4, "plain")
    assert all(not chunk_attention(ex, seg, c).relpos.any() for c in range(len(seg)))
    with pytest.raises(ValueError, match="TXL relpos"):
        encode_cat("depth")


def test_terminals_with_eos():
    actions = terminal_actions(CAT)
    vocab = ActionVocab.build([actions])
    ex = txl.encode(actions, vocab)
    assert [vocab.tokens[i] for i in ex.labels if i] == ["the", "hungry", "cat", "meows", "</s>"]
    assert ex.word_index.tolist() == [-1, 0, 1, 2, 3, -1]


def test_one_chunk_is_the_full_causal_attention():
    ex, _ = encode_cat()
    seg = segment(ex, len(ex))
    att = chunk_attention(ex, seg, 0)
    q, k = np.tril_indices(len(ex))
    assert att.query.tolist() == q.tolist() and att.key.tolist() == k.tolist()
    assert att.relpos.tolist() == (q - k).tolist()
