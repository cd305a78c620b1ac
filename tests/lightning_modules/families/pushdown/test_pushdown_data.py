"""Pushdown training data: collation of the paper's Fig. 2 sentence, padding, and building from a corpus."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from experiments.config import resolve_train_config
from lightning_modules.data.tree import parse_tree, read_bracketed, to_bracketed
from lightning_modules.data.vocab import EOS, PAD, SOS, TokenVocab
from lightning_modules.errors import InputError
from lightning_modules.families.pushdown.batch import collate, max_depth
from lightning_modules.families.pushdown.data import build, encode_sentence, with_unknown

FIG2 = "(ROOT (S (NP (DT The) (NN dog)) (VP (VBZ is) (ADJP (JJ happy)))))"


def test_figure_2_sentence_collates_to_the_official_targets_and_tape():
    vocab = TokenVocab(["The", "dog", "is", "happy", "barks"])
    fig2 = encode_sentence(parse_tree(FIG2), vocab, lambda w: (w,))
    short = encode_sentence(parse_tree("(S (NP (DT The) (NN dog)) (VP (VBZ barks)))"), vocab, lambda w: (w,))
    batch = collate([fig2, short])
    the, dog, is_, happy, barks = (vocab.id(w) for w in ("The", "dog", "is", "happy", "barks"))
    assert vocab.tokens[:3] == (PAD, SOS, EOS)
    assert batch.inputs.tolist() == [[1, the, dog, is_, happy], [1, the, dog, barks, 0]]
    assert batch.targets.tolist() == [[the, dog, is_, happy, 2], [the, dog, barks, 2, 0]]
    # official labels [0, 1, 1, 3, 2, 0]; targets are labels[1:], the <eos> step (0) is not trained
    assert batch.attachment.tolist() == [[1, 1, 3, 2, 0], [1, 1, 2, 0, 0]]
    assert batch.lengths.tolist() == [5, 4]
    # the golden tape without the <eos> row/column: [1, 1, 0] after "The dog is", [2, 2, 2, 2] after "happy"
    assert batch.tape[0].tolist() == [[0] * 5, [0] * 5, [0, 1, 1, 0, 0], [0, 1, 1, 0, 0], [0, 2, 2, 2, 2]]
    assert batch.tape[1].tolist() == [[0] * 5, [0] * 5, [0, 1, 1, 0, 0], [0, 2, 2, 1, 0], [0] * 5]
    assert max_depth(fig2) == 2 and max_depth(short) == 2
    moved = batch.to("cpu")
    assert all(isinstance(t, torch.Tensor) for t in (moved.inputs, moved.tape))


def test_pieces_become_tokens_with_their_own_labels():
    vocab = TokenVocab(["The", "do", "g", "barks"])
    pieces = {"dog": ("do", "g")}
    sent = encode_sentence(parse_tree("(S (NP (DT The) (NN dog)) (VP (VBZ barks)))"), vocab,
                           lambda w: pieces.get(w, (w,)))
    assert sent.words == 3 and len(sent) == 6  # <s> The do g barks <eos>
    # g closes (do g) then (The (do g)); barks reduces with that NP, named by its rightmost token g (3)
    assert sent.attachment.tolist() == [0, 1, 2, 1, 3, 0]
    assert np.array_equal(sent.labels, sent.ids[1:])


def test_pieces_outside_the_vocabulary_become_unk():
    vocab = TokenVocab(["▁", "d", "o", "g", "<unk>"])
    split = with_unknown(lambda w: ("▁", *w), vocab, "<unk>")
    assert split("dog") == ("▁", "d", "o", "g") and split("zog") == ("▁", "<unk>", "o", "g")
    assert with_unknown(lambda w: (w,), vocab, None)("zog") == ("zog",)  # word vocabularies map words themselves
    sent = encode_sentence(parse_tree("(S (NN zog))"), vocab, split)
    assert sent.ids.tolist() == [1, 3, vocab.id("<unk>"), 5, 6, 2]


def test_special_token_clash_is_an_error():
    with pytest.raises(InputError, match="clash"):
        TokenVocab(["<s>", "a"])


@pytest.fixture(scope="module")
def small_treebank(tmp_path_factory, shared_data):
    trees = [t for _, t in read_bracketed(shared_data / "ptb_nltk_sample" / "combined" / "wsj_0001.mrg")]
    trees += [t for _, t in read_bracketed(shared_data / "ptb_nltk_sample" / "combined" / "wsj_0002.mrg")]
    path = tmp_path_factory.mktemp("tb") / "small.mrg"
    path.write_text("".join(to_bracketed(t) + "\n" for t in trees))
    return path, len(trees)


def test_build_from_a_treebank(small_treebank):
    path, n = small_treebank
    cfg = resolve_train_config("pushdown", "cpu-small", [f"data.corpus={path}", "data.train_split=file",
                                                         "data.valid_split=file", "data.min_count=1"])
    data = build("pushdown", cfg)
    assert len(data.train) == len(data.valid) == n
    assert data.vocab["terminals"] == "words" and data.vocab["tokens"][:3] == [PAD, SOS, EOS]
    assert data.vocab_size == len(data.vocab["tokens"]) and data.stats["max_train_depth"] >= 2
    assert data.valid_words == sum(s.words for s in data.valid)
    batch = data.collate(list(data.train[:3]))
    assert batch.tape.shape == (3, batch.inputs.shape[1], batch.inputs.shape[1])
    # every word's attachment is a visible column: 1 <= label <= its own position + 1
    pos = torch.arange(batch.inputs.shape[1])
    labelled = batch.attachment != 0
    assert ((batch.attachment >= 1) & (batch.attachment <= pos + 1))[labelled].all()
    assert labelled.sum() == (batch.lengths - 1).sum()


def test_document_level_is_refused(small_treebank):
    path, _ = small_treebank
    cfg = resolve_train_config("base-lm", "cpu-small", [f"data.corpus={path}", "data.train_split=file",
                                                        "data.valid_split=file", "data.level=document"])
    with pytest.raises(InputError) as e:
        build("base-lm", cfg)
    assert e.value.location == "data.level"
