"""DTG training data: projective filter and too-long counts, the vocabulary, arc representations (w+arc, arc,
w), the TXL (trans) causal sequence, and the batch with its added ids."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from lightning_modules.data.dependency import DepTree
from lightning_modules.errors import InputError
from lightning_modules.families.dtg import data as dtg_data
from lightning_modules.families.dtg import encoding as dtg

ROW = "{i}\t{w}\t_\t_\t_\t_\t{h}\t_\t_\t_\n"


def conllu(words: str, heads: tuple[int, ...]) -> str:
    return "".join(ROW.format(i=i, w=w, h=h) for i, (w, h) in enumerate(zip(words.split(), heads), 1)) + "\n"


THERE = conllu("There is a difference", (2, 0, 4, 2))
CROSSING = conllu("a b c d", (3, 4, 0, 3))
LONG = conllu("There is a big difference", (2, 0, 5, 5, 2))


def config(path: Path, family_system: str = "standard", arc_input: str = "w+arc", length: int = 12) -> dict:
    return {"data": {"corpus": str(path), "train_split": "file", "valid_split": "file", "min_count": 1},
            "model": {"system": family_system, "segment_length": length, "arc_input": arc_input},
            "runtime": {"data_dir": None}}


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    path = tmp_path / "tiny.conllu"
    path.write_text(THERE + CROSSING + LONG + THERE)
    return path


def test_counts_vocabulary_and_labels(corpus: Path) -> None:
    data = dtg_data.build("dtg", config(corpus))
    assert {k: data.stats[k] for k in ("train_nonprojective", "valid_nonprojective", "train_too_long",
                                       "valid_too_long", "train_sequences")} == {
        "train_nonprojective": 1, "valid_nonprojective": 1, "train_too_long": 1, "valid_too_long": 1,
        "train_sequences": 2}
    assert data.vocab["actions"]["closing"] == ["left_arc", "pop_root", "right_arc"]
    assert data.valid_words == 8 and data.vocab["system"] == "standard"
    example, seg = data.train[0]
    tokens = data.vocab["actions"]
    names = ["<PAD>", "<s>", "</s>", "<XXX>", *tokens["terminals"], *tokens["opening"], *tokens["closing"]]
    assert [names[i] for i in example.tokens] == ["<s>", "There", "is", "left_arc", "left_arc", "a", "difference",
                                                 "left_arc", "left_arc", "right_arc", "right_arc", "pop_root"]
    assert [names[i] if i else None for i in example.labels] == [
        "There", "is", "left_arc", None, "a", "difference", "left_arc", None, "right_arc", None, "pop_root", "</s>"]
    # w+arc: the head word's token is added at arc positions (<s> for pop_root)
    assert [names[i] if i else None for i in example.added] == [
        None, None, None, "is", "is", None, None, "difference", "difference", "is", "is", "<s>"]
    assert example.compose.tolist() == [t in ("LA", "RA", "POP") for t in
                                        [dtg.TYPE_NAMES[t] for t in example.types.tolist()]]
    assert len(seg) == 1


def test_arc_representation_ablations() -> None:
    tree = DepTree(("There", "is", "a", "difference"), (2, 0, 4, 2), ("_",) * 4)
    from lightning_modules.data.encodings.choe_charniak import ActionVocab

    vocab = ActionVocab(("There", "a", "difference", "is"), (), ("left_arc", "pop_root", "right_arc"))
    seq = dtg.encode(tree)
    arc = dtg_data.dtg_example(seq, vocab, "arc")
    w = dtg_data.dtg_example(seq, vocab, "w")
    both = dtg_data.dtg_example(seq, vocab, "w+arc")
    assert not arc.added.any() and not w.added.any()
    arcs = seq.arc_heads >= 0
    assert (w.tokens[arcs] == both.added[arcs]).all() and (w.tokens[~arcs] == arc.tokens[~arcs]).all()
    assert (arc.tokens == both.tokens).all()


def test_txl_trans_is_the_undoubled_causal_sequence(corpus: Path) -> None:
    data = dtg_data.build("txl-trans", config(corpus, length=12))
    example, _ = data.train[0]
    tokens = data.vocab["actions"]
    names = ["<PAD>", "<s>", "</s>", "<XXX>", *tokens["terminals"], *tokens["opening"], *tokens["closing"]]
    assert [names[i] for i in example.tokens] == ["<s>", "There", "is", "left_arc", "a", "difference", "left_arc",
                                                 "right_arc", "pop_root"]
    assert [names[i] for i in example.labels] == [names[i] for i in example.tokens[1:]] + ["</s>"]
    assert example.causal and example.relpos == "linear" and not example.added.any()
    assert data.stats["train_too_long"] == 0  # 2n + 1 tokens: the 5-word sentence fits in 12


@pytest.mark.parametrize("system", dtg.SYSTEMS)
def test_batches_carry_the_added_ids(corpus: Path, system: str) -> None:
    data = dtg_data.build("dtg", config(corpus, system, length=32))
    (batch,) = data.collate(list(data.train))
    assert isinstance(batch, dtg_data.DTGBatch) and batch.added.shape == batch.inputs.shape
    moved = batch.to("cpu")
    assert isinstance(moved, dtg_data.DTGBatch) and (moved.added == batch.added).all()
    for row, (example, _) in enumerate(data.train):
        n = len(example)
        assert (batch.added[row, :n].numpy() == example.added).all() and not batch.added[row, n:].any()
        memory = batch.attn_mask.shape[-1] - batch.inputs.shape[1]  # memory columns first (unused: one chunk)
        keys = np.flatnonzero(batch.attn_mask[row, n - 1].numpy()) - memory
        assert keys.tolist() == example.attend(n - 1)[0].tolist()


def test_constituency_corpus_and_empty_data_are_errors(tmp_path: Path) -> None:
    trees = tmp_path / "t.mrg"
    trees.write_text("(S (NP (NN x)) (VP (VBZ y)))\n")
    with pytest.raises(InputError, match=r"needs dependency trees \(use .*t.mrg-dep"):
        dtg_data.build("dtg", config(trees))
    crossing = tmp_path / "c.conllu"
    crossing.write_text(CROSSING)
    with pytest.raises(InputError, match="no sentence is left"):
        dtg_data.build("dtg", config(crossing))


def test_a_word_spelled_like_a_transition_has_its_own_token(tmp_path: Path) -> None:
    """UD EWT's train split has the word "pop": arc-eager's POP token must not swallow it (nor "pop_root",
    a swift arc, or a backslash word, the escape's own spelling)."""
    path = tmp_path / "pop.conllu"
    path.write_text(conllu("pop music is pop_root", (2, 3, 0, 3)) + conllu("\\x right_arc[2] rocks", (3, 3, 0)))
    data = dtg_data.build("dtg", config(path, "eager", length=40))
    tokens = data.vocab["actions"]
    names = ["<PAD>", "<s>", "</s>", "<XXX>", *tokens["terminals"], *tokens["opening"], *tokens["closing"]]
    assert len(set(names)) == len(names) and "pop" in names and "\\pop" in names
    assert {"\\pop_root", "\\\\x", "\\right_arc[2]"} <= set(tokens["terminals"])
    assert [names[i] for i in data.train[0][0].tokens][:3] == ["<s>", "\\pop", "music"]


def test_unknown_word_classes_stay_distinct_tokens(tmp_path: Path) -> None:
    """With ``min_count`` the vocabulary holds unknown-word classes: each is one token, never re-classed."""
    path = tmp_path / "unk.conllu"
    path.write_text(conllu("pop Music is pop", (2, 3, 0, 3)) * 2 + conllu("Zyx-Q bars x", (3, 3, 0)))
    cfg = config(path, "eager", length=40)
    cfg["data"]["min_count"] = 2
    data = dtg_data.build("dtg", cfg)
    terminals = data.vocab["actions"]["terminals"]
    assert "\\pop" in terminals and len(set(terminals)) == len(terminals) > 3
