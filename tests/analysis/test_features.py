"""Node representations of TG-family checkpoints: positions (against ``synbench inspect``), hooks, cache."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from analysis.features import extract_features, node_positions, trees_sha256
from experiments.families.tg.inspect import inspect_tree
from lightning_modules.data import treebank_sequences
from lightning_modules.data.corpora import Document
from lightning_modules.data.tree import parse_tree, read_bracketed
from lightning_modules.errors import InputError
from lightning_modules.families.tg import data as tg_data
from lightning_modules.models.txl_lm import build

# TG Fig. 2: (S (NP the blue bird NP) (VP sings VP) S), with POS tags
FIG2 = "(S (NP (DT the) (JJ blue) (NN bird)) (VP (VBZ sings)))"
TREES = [FIG2, "(S (NP (PRP it)) (VP (VBD sang) (PP (IN in) (NP (DT the) (JJ old) (NN tree)))) (. .))",
         "(S (NP (NP (DT the) (NN bird)) (PP (IN on) (NP (NN wire)))) (VP (VBZ sings) (ADVP (RB loudly))))"]


def write_checkpoint(path, family, trees, terminals="words", segment_length=8, level="sentence", seed=0):
    """A randomly initialised synbench checkpoint with the vocabularies training builds from ``trees``."""
    seqs = treebank_sequences.sequences([Document("test", tuple(("<test>", t) for t in trees))], level, "none")
    words = [w for seq in seqs for t in seq for w in t.leaves()]
    data_cfg = {"terminals": terminals, "min_count": 1, "sp_vocab_size": 30, "memory": "smart",
                "tree_transform": "none", "level": level}
    mapping, payload, tokens = treebank_sequences.terminal_mapping(data_cfg, words, seqs)
    linearise = tg_data.actions_function(family, level, mapping)
    vocab = tg_data.build_action_vocab(tokens, [linearise(s) for s in seqs])
    model_cfg = {"d_model": 16, "n_layers": 2, "n_heads": 2, "d_ff": 32, "segment_length": segment_length,
                 "memory_length": segment_length, "relpos": "delta_depth" if family == "tg" else "linear",
                 "attention": "dense", **({} if family == "tg" else {"min_rel": -segment_length,
                                                                      "max_rel": 2 * segment_length})}
    torch.manual_seed(seed)
    module = build({**model_cfg, "vocab_size": len(vocab)})
    meta = {"format": 1, "family": family, "seed": seed, "vocab": {**payload, "actions": vocab.to_json()},
            "config": {"model": model_cfg, "data": data_cfg}}
    torch.save({"state_dict": module.state_dict(), "synbench": meta}, path)
    return path


@pytest.fixture(scope="module")
def trees():
    return [parse_tree(t) for t in TREES]


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory, trees):
    folder = tmp_path_factory.mktemp("ckpt")
    return {f: write_checkpoint(folder / f"{f}.ckpt", f, trees) for f in ("tg", "txl-trees", "txl-terminals")}


def load(checkpoint):
    from experiments.families import get_family

    return get_family("tg").prober(checkpoint)


def positions_of(types, name):
    return [i for i, t in enumerate(types) if t == name]


def test_tg_positions_are_the_cnt1_and_cnt2_tokens_of_inspect(checkpoints, trees):
    for tree in trees:
        example, words, reps = node_positions(load(checkpoints["tg"]), tree)
        record = inspect_tree(tree, "tg")
        assert list(reps["compose"]) == positions_of(record["types"], "CNT1")
        assert list(reps["stack"]) == positions_of(record["types"], "CNT2")
        assert list(words) == positions_of(record["types"], "T")
        assert [record["tokens"][p] for p in reps["compose"]] == [record["tokens"][p] for p in reps["stack"]]
    _, words, reps = node_positions(load(checkpoints["tg"]), trees[0])
    # <s> (S (NP the blue bird NP) NP) (VP sings VP) VP) S) S): NP, VP, S in post-order
    assert list(words) == [3, 4, 5, 9]
    assert list(reps["compose"]) == [6, 10, 12] and list(reps["stack"]) == [7, 11, 13]


def test_txl_positions(checkpoints, trees):
    _, words, reps = node_positions(load(checkpoints["txl-trees"]), trees[0])
    record = inspect_tree(trees[0], "txl")
    assert list(reps["closing"]) == positions_of(record["types"], "CNT") == [6, 9, 10]
    assert list(words) == [3, 4, 5, 8]
    example, words, reps = node_positions(load(checkpoints["txl-terminals"]), trees[0])
    assert list(words) == [1, 2, 3, 4]  # <s> the blue bird sings </s>
    assert reps["first+last"].tolist() == [[0, 2], [3, 3], [0, 3]]  # word indices of each span's ends


def test_document_level_checkpoint_reads_a_one_sentence_document(tmp_path, trees):
    ckpt = write_checkpoint(tmp_path / "doc.ckpt", "tg", trees, level="document")
    example, words, reps = node_positions(load(ckpt), trees[0])
    # <s> (DOC (S (NP the blue bird NP) NP) ... : everything shifts by one, (DOC closes last (not a node)
    assert list(words) == [4, 5, 6, 10] and list(reps["compose"]) == [7, 11, 13]
    assert len(example) == 17


def test_sentencepiece_word_is_its_last_piece(tmp_path, trees):
    ckpt = write_checkpoint(tmp_path / "sp.ckpt", "tg", trees, terminals="sentencepiece")
    model = load(ckpt)
    example, words, _ = node_positions(model, trees[0])
    for i, p in enumerate(words):
        assert example.word_index[p] == i and (p + 1 == len(example) or example.word_index[p + 1] != i)
    assert any(len(model.model.terminals(w)) > 1 for w in trees[0].leaves())  # the test means something


def test_layer_zero_is_the_embedding_and_last_layer_gives_the_logits(checkpoints, trees):
    """Chunks of 8 tokens: the hooks' outputs are concatenated over chunks with the memory carried."""
    for family, ckpt in checkpoints.items():
        prober = load(ckpt)
        model = prober.model
        feats = extract_features(ckpt, trees, layers=[0, 2], batch_size=2)
        assert feats.layers == (0, 2) and feats.family == family
        net = model.module.network
        for s, tree in enumerate(trees):
            example, words, _ = node_positions(prober, tree)
            rows = slice(feats.word_offsets[s], feats.word_offsets[s + 1])
            emb = net.embedding.weight[torch.from_numpy(example.tokens[words])].detach().numpy()
            assert np.array_equal(feats.word[rows, 0], emb.astype(np.float16))
            chunks = tg_data.collate_sequences([(example, _segment(model, example))])
            with torch.no_grad():
                logits = torch.cat(model.module(chunks)[0], dim=1)[0, torch.from_numpy(words)]
                last = torch.from_numpy(feats.word[rows, 1].astype(np.float32))
                from_features = torch.nn.functional.linear(last, net.embedding.weight, net.output_bias)
            assert torch.allclose(from_features, logits, atol=0.05)


def _segment(model, example):
    from lightning_modules.data.encodings.segmentation import segment

    return segment(example, model.length, model.length, model.memory)


def test_representations_shapes_and_matrix(checkpoints, trees):
    n_words, n_cons = 4 + 7 + 6, 3 + 5 + 7
    tg = extract_features(checkpoints["tg"], trees, layers=[1])
    assert tg.word.shape == (n_words, 1, 16) and tg.word.dtype == np.float16
    assert set(tg.constituent) == {"compose", "stack"} and tg.constituent["stack"].shape == (n_cons, 1, 16)
    assert tg.representations("word") == ("word",)
    assert tg.representations("constituent") == ("compose", "stack")
    terminals = extract_features(checkpoints["txl-terminals"], trees, layers=[1])
    first_last = terminals.constituent["first+last"]
    assert first_last.shape == (n_cons, 1, 32)
    # the S of tree 0 spans words 0..3: first word's vector then last word's
    assert np.array_equal(first_last[2, 0], np.concatenate([terminals.word[0, 0], terminals.word[3, 0]]))
    x = tg.matrix("stack", 1, np.array([1, 0]), np.array([0, 2]))
    assert x.dtype == np.float32 and np.array_equal(x, tg.constituent["stack"][[3, 2], 0].astype(np.float32))
    with pytest.raises(InputError, match="not extracted"):
        tg.matrix("stack", 0, np.array([0]), np.array([0]))
    with pytest.raises(InputError, match="no representation"):
        tg.matrix("closing", 1, np.array([0]), np.array([0]))


def test_cache_reused_and_corrupted_file_recomputed(tmp_path, checkpoints, trees, monkeypatch):
    import analysis.features as features

    first = extract_features(checkpoints["tg"], trees, layers=[0, 1], cache_dir=tmp_path)
    files = list(tmp_path.glob("features-*.npz"))
    assert len(files) == 1

    def fail(*args, **kwargs):
        raise AssertionError("recomputed although cached")

    with monkeypatch.context() as m:
        m.setattr(features, "_compute", fail)
        again = extract_features(checkpoints["tg"], trees, layers=[1, 0], cache_dir=tmp_path)
    assert np.array_equal(again.word, first.word) and again.layers == (0, 1)
    assert np.array_equal(again.constituent["compose"], first.constituent["compose"])
    files[0].write_bytes(files[0].read_bytes()[:200])  # truncated
    repaired = extract_features(checkpoints["tg"], trees, layers=[0, 1], cache_dir=tmp_path)
    assert np.array_equal(repaired.word, first.word)
    assert np.load(files[0])["word"].shape == first.word.shape  # rewritten whole
    other = extract_features(checkpoints["tg"], trees[:2], layers=[0, 1], cache_dir=tmp_path)
    assert len(list(tmp_path.glob("features-*.npz"))) == 2 and len(other.word_offsets) == 3
    assert trees_sha256(trees) != trees_sha256(trees[:2])


def test_bad_input(checkpoints, trees, tmp_path):
    with pytest.raises(InputError, match="layers must be in 0..2"):
        extract_features(checkpoints["tg"], trees, layers=[3])
    with pytest.raises(InputError, match="no trees"):
        extract_features(checkpoints["tg"], [])
    with pytest.raises(InputError, match="checkpoint not found"):
        extract_features(tmp_path / "missing.ckpt", trees)
    with pytest.raises(InputError, match="no POS tag"):
        extract_features(checkpoints["tg"], [parse_tree("(S (NP the bird) (VP (VBZ sings)))")])


def test_real_trees_every_node_has_a_position(shared_data, tmp_path):
    trees = [t for _, t in read_bracketed(shared_data / "ptb_nltk_sample" / "combined" / "wsj_0003.mrg")]
    ckpt = write_checkpoint(tmp_path / "tg.ckpt", "tg", trees, segment_length=32)
    feats = extract_features(ckpt, trees, layers=[2])
    from analysis.probing_tasks import tree_nodes

    nodes = [tree_nodes(t) for t in trees]
    assert feats.word_offsets[-1] == sum(len(n.words) for n in nodes)
    assert feats.constituent_offsets[-1] == sum(len(n.constituents) for n in nodes)
    assert np.isfinite(feats.word.astype(np.float32)).all()
