"""DTG over subword pieces (the paper's appendix "Using subword tokenizers"): arcs between the words' last pieces,
every piece of a masked word masked, the head embedded by its last piece; golden vectors of the official masking
library; the SentencePiece model of DTG and TXL (trans) trained as the official tokenizer_build.py (on the
transition sequences, the transitions user-defined symbols), or on the sentences as TG's (the same pieces as
TG's); word-level configs unchanged."""

from __future__ import annotations

import base64
import random
from pathlib import Path

import numpy as np
import pytest

from experiments.config import resolve_train_config
from experiments.families.dependency_presets import DATA_PRESETS
from lightning_modules.data.corpora import load_corpus
from lightning_modules.data.sentencepiece import SentencePieceModel
from lightning_modules.data.treebank_sequences import corpus_splits, terminal_mapping
from lightning_modules.errors import InputError
from lightning_modules.families.dtg import data as dtg_data
from lightning_modules.families.dtg.encoding import SYSTEMS, TYPE_NAMES, decode, encode_pieces, oracle


def rows(seq) -> list[dict[int, int]]:
    return [dict(zip(*(a.tolist() for a in seq.attend(i)))) for i in range(len(seq))]


def test_official_golden_vectors_with_a_two_piece_head() -> None:
    # reference-impls.md §3.2: "She eats fresh ▁app|les", heads [1,-1,3,1] (0-based), from the official DTG C++
    # library (positions 5-12; pos:relpos, cp = composed_position = our arc head position)
    seq = encode_pieces([("She",), ("eats",), ("fresh",), ("▁app", "les")], oracle((2, 0, 4, 2)))
    assert seq.tokens[5:] == ["fresh", "▁app", "les", "left_arc", "left_arc", "right_arc", "right_arc", "pop_root"]
    assert [TYPE_NAMES[t] for t in seq.types.tolist()][5:] == ["W", "W", "T", "LA", "LA2", "RA", "RA2", "POP"]
    assert rows(seq)[5:] == [{0: 2, 3: 1, 5: 0}, {0: 3, 3: 2, 5: 1, 6: 0}, {0: 3, 3: 2, 5: 1, 6: 0, 7: 0},
                             {5: -1, 6: 0, 7: 0, 8: 0}, {0: 2, 3: 1, 8: 0, 9: 0}, {3: 0, 8: -1, 10: 0},
                             {0: 1, 10: 0, 11: 0}, {0: 0, 10: -1, 12: 0}]
    # the left arcs' head is "apples", embedded by its last piece "les" (position 7)
    assert {i: h for i, h in enumerate(seq.arc_heads.tolist()) if h >= 0} == {3: 2, 4: 2, 8: 7, 9: 7, 10: 2,
                                                                              11: 2, 12: 0}
    assert seq.word_index.tolist() == [-1, 0, 1, -1, -1, 2, 3, 3, -1, -1, -1, -1, -1]
    assert seq.labels[5:] == ["▁app", "les", "left_arc", None, "right_arc", None, "pop_root", "</s>"]


def test_a_masked_word_masks_all_its_pieces() -> None:
    # "She reads books": both two-piece words; the right arc composes both pieces of "books" (relpos -1) and
    # nothing after it sees them; every arc's head input is the last piece of "reads" (position 3)
    seq = encode_pieces([("▁She",), ("▁re", "ads"), ("▁book", "s")], oracle((2, 0, 2)))
    assert seq.tokens == ["<s>", "▁She", "▁re", "ads", "left_arc", "left_arc", "▁book", "s", "right_arc",
                          "right_arc", "pop_root"]
    assert rows(seq) == [{0: 0}, {0: 1, 1: 0}, {0: 2, 1: 1, 2: 0}, {0: 2, 1: 1, 2: 0, 3: 0},
                         {1: -1, 2: 0, 3: 0, 4: 0}, {0: 1, 4: 0, 5: 0}, {0: 2, 4: 1, 6: 0},
                         {0: 2, 4: 1, 6: 0, 7: 0}, {4: 0, 6: -1, 7: -1, 8: 0}, {0: 1, 8: 0, 9: 0},
                         {0: 0, 8: -1, 10: 0}]
    assert seq.arc_heads.tolist() == [-1, -1, -1, -1, 3, 3, -1, -1, 3, 3, 0]
    assert seq.labels == ["▁She", "▁re", "ads", "left_arc", None, "▁book", "s", "right_arc", None, "pop_root",
                          "</s>"]


TREES = [(2, 0, 4, 2), (2, 3, 0, 6, 6, 3, 3), (2, 0, 4, 2, 7, 7, 4, 2), (0, 1, 2, 3, 4), (5, 5, 5, 5, 0),
         (3, 3, 0, 5, 3, 5, 3)]


@pytest.mark.parametrize("system", SYSTEMS)
def test_piece_invariants_in_every_system(system: str) -> None:
    rng = random.Random(0)
    for heads in TREES * 4:
        pieces = [tuple(f"w{i}.{k}" for k in range(rng.randint(1, 3))) for i in range(len(heads))]
        transitions = oracle(heads, system)
        seq = encode_pieces(pieces, transitions, system)
        assert decode(transitions, system) == heads
        positions = [np.flatnonzero(seq.word_index == w) for w in range(len(heads))]
        assert [len(p) for p in positions] == [len(p) for p in pieces]
        for q in range(len(seq)):
            keys = set(seq.attend(q)[0].tolist())
            for p in positions:  # a word's pieces are attended together (those up to the query) or not at all
                seen = keys & set(p.tolist())
                assert not seen or seen == {int(k) for k in p if k <= q}
        for h in seq.arc_heads[seq.arc_heads > 0].tolist():  # arcs embed their head by its last piece
            assert h == positions[seq.word_index[h]][-1]
        # a word's piece predicts its next piece, and every piece is predicted once, in order
        for word, p in zip(pieces, positions):
            assert [seq.labels[q] for q in p[:-1]] == list(word[1:])
        assert [lab for lab in seq.labels if lab and lab.startswith("w")] == [x for word in pieces for x in word]


ROW = "{i}\t{w}\t_\t_\t_\t_\t{h}\t_\t_\t_\n"
SENTENCES = [("the cats sat on the mats .", (2, 3, 0, 6, 6, 3, 3)), ("a dog ran home .", (2, 3, 0, 3, 3)),
             ("the dogs sat .", (2, 3, 0, 3)), ("cats ran on mats .", (2, 0, 4, 2, 2))]


def piece_config(path: Path, size: int = 21) -> dict:
    return {"data": {"corpus": str(path), "train_split": "file", "valid_split": "file", "min_count": 1,
                     "terminals": "sentencepiece", "sp_vocab_size": size},
            "model": {"system": "standard", "segment_length": 64, "arc_input": "w+arc"},
            "runtime": {"data_dir": None}}


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    path = tmp_path / "small.conllu"
    path.write_text("".join("".join(ROW.format(i=i, w=w, h=h) for i, (w, h) in enumerate(zip(s.split(), hs), 1))
                            + "\n" for s, hs in SENTENCES * 3))
    return path


def test_piece_training_data(corpus: Path) -> None:
    data = dtg_data.build("dtg", piece_config(corpus))
    assert data.vocab["terminals"] == "sentencepiece" and data.vocab["unknown"] == "<unk>"
    sp = SentencePieceModel.from_bytes(base64.b64decode(data.vocab["sentencepiece"]))
    actions = data.vocab["actions"]
    names = ["<PAD>", "<s>", "</s>", "<XXX>", *actions["terminals"], *actions["opening"], *actions["closing"]]
    assert actions["terminals"][-1] == "<unk>" and len(actions["terminals"]) == len(sp) - 4 + 1
    assert data.valid_words == 3 * sum(len(s.split()) for s, _ in SENTENCES)
    example = data.train[1][0]  # "a dog ran home ."
    pieces, index = sp.encode_words("a dog ran home .".split())
    tokens = [names[i] for i in example.tokens]
    assert [t for t in tokens if t not in ("<s>", "left_arc", "right_arc", "pop_root")] == pieces
    assert example.word_index[example.word_index >= 0].tolist() == index
    # w+arc: an arc adds its head word's last piece: "dog" (a <- dog), then "ran" (dog, home, . <- ran), <s>
    last = [pieces[max(i for i, w in enumerate(index) if w == word)] for word in range(5)]
    assert [names[a] for a, t in zip(example.added.tolist(), tokens) if t.endswith(("arc", "root"))] == \
        [last[1]] * 2 + [last[2]] * 6 + ["<s>"]
    causal = dtg_data.build("txl-trans", piece_config(corpus)).train[1][0]
    assert [names[i] for i in causal.tokens[causal.word_index >= 0]] == pieces
    assert [TYPE_NAMES[t] for t, w in zip(causal.types.tolist(), causal.word_index.tolist()) if w >= 0] == \
        ["W" if i == 0 or index[i - 1] != w else "T" for i, w in enumerate(index)]
    with pytest.raises(InputError) as info:
        dtg_data.build("dtg", piece_config(corpus, size=10_000))
    assert info.value.location == "data.sp_vocab_size"


# the official data_scripts/conll_to_dep.py output for SENTENCES (its arc-standard loop run on their heads)
OFFICIAL_TEXT = ["the cats left_arc sat left_arc on the mats left_arc left_arc right_arc . right_arc pop_root",
                 "a dog left_arc ran left_arc home right_arc . right_arc pop_root",
                 "the dogs left_arc sat left_arc . right_arc pop_root",
                 "cats ran left_arc on mats left_arc right_arc . right_arc pop_root"]


def test_sentencepiece_trained_as_the_official_tokenizer_build(corpus: Path, monkeypatch) -> None:
    """The official tokenizer_build.py: the transition text, left_arc/right_arc/pop_root user-defined symbols (ids
    4-6, one piece wherever they occur), pad 0 / <s> 1 / </s> 2 / <unk> 3, full character coverage, sentences of
    up to 100,000 bytes, a unigram model of vocab_size pieces counting the specials and symbols."""
    from sentencepiece import sentencepiece_model_pb2

    seen: list[list[str]] = []
    train = SentencePieceModel.train.__func__

    def recording(cls, sentences, *args, **kwargs):
        sentences = list(sentences)
        seen.extend(" ".join(s) for s in sentences)
        return train(cls, sentences, *args, **kwargs)

    monkeypatch.setattr(SentencePieceModel, "train", classmethod(recording))
    data = dtg_data.build("dtg", piece_config(corpus))
    assert seen == OFFICIAL_TEXT * 3
    sp = SentencePieceModel.from_bytes(base64.b64decode(data.vocab["sentencepiece"]))
    proto = sentencepiece_model_pb2.ModelProto.FromString(sp.to_bytes())
    spec = proto.trainer_spec
    assert list(spec.user_defined_symbols) == ["left_arc", "right_arc", "pop_root"]
    assert (spec.vocab_size, spec.character_coverage, spec.max_sentence_length, spec.model_type) == \
        (21, 1.0, 100_000, sentencepiece_model_pb2.TrainerSpec.UNIGRAM)
    assert (spec.pad_id, spec.bos_id, spec.eos_id, spec.unk_id) == (0, 1, 2, 3) and len(sp) == 21
    user = sentencepiece_model_pb2.ModelProto.SentencePiece.USER_DEFINED
    assert [(p.piece, p.type) for p in proto.pieces[4:7]] == [(a, user) for a in ("left_arc", "right_arc", "pop_root")]
    assert all(p.type != user for p in proto.pieces[7:])
    # a symbol is one piece wherever it occurs, never split nor merged with text; a word spelled like one
    # reads that piece, a terminal of its own (escaped), not the transition
    pieces, _ = sp.encode_words(["sat", "xpop_rooty"])
    assert "pop_root" in pieces and not any("pop_root" in p and p != "pop_root" for p in pieces)
    assert "\\pop_root" in data.vocab["actions"]["terminals"] and "pop_root" in data.vocab["actions"]["closing"] + \
        data.vocab["actions"]["opening"]


def test_sentencepiece_text_setting(corpus: Path) -> None:
    """sp_text: words trains on the sentences with no symbols (TG's tokenizer); an unknown value is an error."""
    cfg = piece_config(corpus, size=18)
    lines, symbols = dtg_data.sentencepiece_text({**cfg["data"], "sp_text": "words"}, [], [("a", "b"), ("c",)])
    assert (lines, symbols) == ([["a", "b"], ["c"]], [])
    data = dtg_data.build("dtg", {**cfg, "data": {**cfg["data"], "sp_text": "words"}})
    sp = SentencePieceModel.from_bytes(base64.b64decode(data.vocab["sentencepiece"]))
    assert "left_arc" not in [sp.id_to_piece(i) for i in range(len(sp))]
    with pytest.raises(InputError) as info:
        dtg_data.build("dtg", {**cfg, "data": {**cfg["data"], "sp_text": "actions"}})
    assert info.value.location == "data.sp_text"


def test_the_same_pieces_as_tg(prepared_data_dir: Path) -> None:
    """DTG's pieces on the PTB sample converted by head rules are TG's on the PTB sample: the same sentences, the
    same SentencePiece training (its validation split as the training split, to be quick)."""
    shared = [f"runtime.data_dir={prepared_data_dir}", "data.sp_vocab_size=300", "data.train_split=valid"]
    tg = resolve_train_config("tg", "cpu-small", ["data.terminals=sentencepiece", *shared])
    splits = corpus_splits("tg", tg)
    words = [w for seq in splits["train_split"] for t in seq for w in t.leaves()]
    _, tg_payload, _ = terminal_mapping(tg["data"], words, splits["train_split"])
    dtg = resolve_train_config("dtg", "cpu-small-pieces", ["data.corpus=ptb-sample-dep", "data.sp_text=words",
                                                           *shared])
    forms = [t.forms for _, t in load_corpus("ptb-sample-dep", str(prepared_data_dir)).sentences("valid", "valid")]
    assert [list(f) for f in forms] == [t.leaves() for seq in splits["train_split"] for t in seq]
    _, _, payload = dtg_data.terminal_vocabulary(dtg["data"], [], forms)
    assert payload["sentencepiece"] == tg_payload["sentencepiece"]


def test_word_level_configs_are_unchanged_and_table_2_reads_pieces() -> None:
    for family in ("dtg", "txl-trans"):
        for preset in ("cpu-small", "ptb"):  # no terminals key: the same configs (and run ids) as before
            data = resolve_train_config(family, preset)["data"]
            assert data == DATA_PRESETS[preset] and "terminals" not in data
        # Table 2's rows: the official tokenizer_build.py's 32,719 pieces trained on the transition sequences
        assert resolve_train_config(family, "bllip")["data"] == {
            **DATA_PRESETS["bllip"], "terminals": "sentencepiece", "sp_vocab_size": 32719, "sp_text": "transitions"}
        assert resolve_train_config(family, "cpu-small-pieces")["data"] == {
            **DATA_PRESETS["cpu-small"], "terminals": "sentencepiece", "sp_vocab_size": 2000,
            "sp_text": "transitions"}
    dtg, trans = (resolve_train_config(f, "cpu-small-pieces")["model"] for f in ("dtg", "txl-trans"))
    assert trans == {**dtg, "relpos": "linear", "min_rel": -383, "max_rel": 768, "arc_input": "arc",
                     "output_head": "joint"}  # the official TXL (trans) has no action MLP
    # the dependency parser reads words whatever the preset
    assert "terminals" not in resolve_train_config("dep-parser", "bllip")["data"]
