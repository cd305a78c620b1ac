"""Proposals scored as a trie (``experiments.evaluate.scorers.trie``) equal scoring each tree alone.

Random tiny TG and TXL (trees) networks (``test_tg_scorers.make_model``) with the vocabulary of PTB-sample
trees; sentences are real PTB-sample sentences, proposals the gold tree plus random well-formed trees over its
words (``benchmarks/marginalize.py``), some repeated. Segment lengths 16 and 64 put every sentence, or some, over
the segment length, so the solo path segments them with (smart) memory. The dependency families (DTG with its
added arc-head embeddings, TXL over transitions) are checked on random dependency trees of a tiny trained model.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from benchmarks.marginalize import proposals
from experiments.evaluate.scorers import trie
from experiments.evaluate.scorers.tree_marginal import TreeScorer
from lightning_modules.data.encodings.choe_charniak import choe_charniak
from lightning_modules.data.tree import clean, drop_pos_tags, read_bracketed
from lightning_modules.errors import InputError
from lightning_modules.families.tg.cc_constraints import ActionMasks
from tests.experiments.families.tg.test_tg_scorers import make_model
from tests.tolerances import FLOAT32, close32


@pytest.fixture(scope="module")
def ptb(shared_data):
    """Raw PTB-sample trees (for the vocabulary) and the first sentences' cleaned POS-free trees."""
    raw = [t for name in ("wsj_0001.mrg", "wsj_0003.mrg")
           for _, t in read_bracketed(shared_data / "ptb_nltk_sample" / "combined" / name)]
    return raw, [drop_pos_tags(clean(t)) for t in raw][:5]


@pytest.fixture(scope="module", params=[("tg", 16), ("tg", 64), ("txl-trees", 16), ("txl-trees", 64)],
                ids=lambda p: f"{p[0]}-L{p[1]}")
def setting(request, ptb):
    """A model, the sentences, and their proposal sets: 6 distinct trees plus two repeats, one sentence with
    a single proposal."""
    family, length = request.param
    raw, golds = ptb
    model = make_model(family, raw, segment_length=length)
    rng = np.random.default_rng(0)
    masks = ActionMasks(model.vocab)
    sets = [proposals(g, 6, masks, rng) for g in golds]
    sets = [s + s[:2] for s in sets]
    sets[1] = sets[1][:1]
    return model, [g.leaves() for g in golds], sets


def test_marginal_equals_scoring_each_tree_alone(setting):
    model, sentences, sets = setting
    encoded = [len(model.encode_tree(t)) for t in sets[2]]
    assert max(encoded) > model.length  # a sentence longer than the segment: chunks with memory when alone
    off = TreeScorer(model, None, n=None, batch_size=16, prefix_sharing="off").score_trees(sentences, sets)
    on = TreeScorer(model, None, n=None, batch_size=16).score_trees(sentences, sets)
    assert [s.extra["trees"] for s in on] == [6, 1, 6, 6, 6]
    for a, b in zip(off, on):
        assert b.total == close32(a.total)
        assert b.end_logprob == close32(a.end_logprob, scale=abs(a.total))
        assert b.word_logprobs == close32(a.word_logprobs, scale=abs(a.total))
        assert b.extra["best_logprob"] == close32(a.extra["best_logprob"])
        assert b.best_tree == a.best_tree


@pytest.mark.parametrize("max_nodes", [1, 40, 10**6])
def test_label_logprobs_of_every_candidate(setting, max_nodes):
    """Per candidate, per position: the grouped trie pass (duplicates included, rows of at most ``max_nodes``
    nodes or one sequence) equals ``label_logprobs``; the trie shares what it should."""
    model, _, sets = setting
    groups = [[model.encode_tree(model.model_tree(t, False, "test")) for t in trees] for trees in sets]
    alone = model.label_logprobs([e for g in groups for e in g])
    model.trie_stats, model.trie_max_nodes = stats, _ = trie.TrieStats(), max_nodes
    try:
        grouped = model.grouped_label_logprobs(groups)
    finally:
        model.trie_stats, model.trie_max_nodes = None, trie.DEFAULT_MAX_NODES
    flat = [lp for g in grouped for lp in g]
    assert [len(lp) for lp in flat] == [len(e) for g in groups for e in g]
    for a, b, e in zip(alone, flat, (e for g in groups for e in g)):
        assert b.dtype == np.float64
        np.testing.assert_allclose(b, a, **FLOAT32)
        assert (b[e.labels == 0] == 0).all()
    assert stats.positions == sum(len(e) for g in groups for e in g)
    if max_nodes == 1:  # one sequence per row: nothing shared
        assert stats.nodes == stats.positions and stats.rows == sum(len(g) for g in groups)
    if max_nodes == 10**6:  # one row per sentence
        distinct = sum(len({p for e in g for p in prefixes(e)}) for g in groups)
        assert stats.nodes == distinct < stats.positions
        assert stats.rows == len(groups)


def test_groups_with_a_long_sequence_are_scored_alone(setting):
    """``trie_max_length``: a group with a longer sequence takes today's path; the others still share."""
    model, _, sets = setting
    groups = [[model.encode_tree(model.model_tree(t, False, "test")) for t in sets[k]] for k in (0, 2)]
    limit = max(len(e) for e in groups[0])
    assert max(len(e) for e in groups[1]) > limit
    alone = model.label_logprobs([e for g in groups for e in g])
    model.trie_stats, model.trie_max_length = stats, _ = trie.TrieStats(), limit
    try:
        grouped = model.grouped_label_logprobs(groups)
    finally:
        model.trie_stats, model.trie_max_length = None, trie.DEFAULT_MAX_LENGTH
    assert stats.positions == sum(len(e) for e in groups[0])
    for a, b in zip(alone, (lp for g in grouped for lp in g), strict=True):
        np.testing.assert_allclose(b, a, **FLOAT32)


def prefixes(example):
    """The distinct token prefixes of one sequence (for causal encodings: its trie nodes)."""
    tokens = tuple(example.tokens.tolist())
    return [tokens[: t + 1] for t in range(len(tokens))]


def test_trie_shares_prefixes_and_keeps_the_solo_attention(ptb):
    """Two trees: the shared prefix is one set of nodes; each node attends its own path's nodes at the solo
    key positions with the solo relative positions (TG: STACK/COMPOSE rows, duplicated closing NTs)."""
    raw, golds = ptb
    model = make_model("tg", raw, segment_length=256)
    masks = ActionMasks(model.vocab)
    trees = proposals(golds[1], 2, masks, np.random.default_rng(1))
    examples = [model.encode(choe_charniak(t, model.terminals)) for t in trees]
    t = trie.Trie()
    paths = [t.insert(e, model.segmentation(e)) for e in examples]
    assert t.insert(examples[0], model.segmentation(examples[0])).tolist() == paths[0].tolist()  # a repeat
    common = int(np.argmax(examples[0].tokens[: len(examples[1])] != examples[1].tokens[: len(examples[0])]))
    assert common > 0 and paths[0][:common].tolist() == paths[1][:common].tolist()
    assert len(t) == len(examples[0]) + len(examples[1]) - common
    for e, path in zip(examples, paths):
        assert np.array_equal(np.asarray(t.tokens)[path], e.tokens)
        assert np.array_equal(np.asarray(t.compose)[path], e.compose)
        for i, node in enumerate(path.tolist()):
            keys, rel = e.attend(i)
            assert t.columns[node].tolist() == path[keys].tolist()
            assert t.relpos[node].tolist() == rel.tolist()


def test_packed_chunk_is_one_chunk_with_empty_memory(ptb):
    raw, golds = ptb
    model = make_model("txl-trees", raw, segment_length=8)
    e = model.encode_tree(golds[1])
    t = trie.Trie()
    t.insert(e, model.segmentation(e))
    chunk = trie.pack([t, t], memory_length=8, device=torch.device("cpu"))
    assert chunk["attn_mask"].shape == (2, len(e), 8 + len(e)) and chunk["reset"].all()
    assert not chunk["attn_mask"][..., :8].any() and (chunk["mem_src"] == -1).all()
    # the solo forward keeps the previous chunk as memory: position 20 attends positions 8..20 (nodes 8..20)
    assert chunk["attn_mask"][0, 20, 8:].nonzero().squeeze(-1).tolist() == list(range(8, 21))
    assert chunk["relpos"][0, 20, 16:29].tolist() == list(range(12, -1, -1))


def test_prefix_sharing_setting(setting):
    model = setting[0]
    with pytest.raises(InputError, match="prefix_sharing"):
        TreeScorer(model, None, prefix_sharing="yes")
    assert TreeScorer(model, None).prefix_sharing == "trie"


# -- the dependency families: arc transitions, added arc-head embeddings -------------------------------------
def dependency_trees(n: int, rng: np.random.Generator, count: int) -> list:
    """Up to ``count`` random dependency trees over ``n`` words (one root, no cycle), some repeated."""
    from lightning_modules.data.dependency import DepTree

    out = []
    while len(out) < count:
        heads = rng.integers(0, n + 1, size=n)
        heads[heads == np.arange(1, n + 1)] = 0
        if (heads == 0).sum() != 1:
            continue
        reach = True
        for w in range(1, n + 1):  # every word reaches the root
            seen, h = set(), w
            while h and h not in seen:
                seen.add(h)
                h = int(heads[h - 1])
            reach &= h == 0
        if reach:
            out.append(DepTree(tuple(f"w{i}" for i in range(n)), tuple(int(h) for h in heads), ("_",) * n))
    return out + out[:2]


@pytest.mark.parametrize("family", ["dtg", "txl-trans"])
def test_dependency_families_equal_scoring_each_tree_alone(family, tmp_path):
    from experiments.config import resolve_train_config
    from experiments.families import get_family
    from experiments.train import train

    words = [f"w{i}" for i in range(7)]
    rng = np.random.default_rng(0)
    sets = [dependency_trees(7, rng, 10), dependency_trees(7, rng, 1)[:1], dependency_trees(7, rng, 6)]
    path = tmp_path / "small.conllu"
    path.write_text("".join("".join(f"{i}\t{w}\t_\t_\t_\t_\t{h}\t_\t_\t_\n" for i, (w, h) in
                                    enumerate(zip(t.forms, t.heads), 1)) + "\n" for s in sets for t in s))
    tiny = ["model.d_model=32", "model.n_layers=2", "model.n_heads=2", "model.d_ff=64", "train.batch_size=4",
            "train.max_steps=2", "train.val_every=2", "train.ckpt_every=2", "runtime.wandb=disabled",
            "runtime.progress=false", "runtime.threads=1", f"data.corpus={path}", "data.train_split=file",
            "data.valid_split=file"]
    train(resolve_train_config(family, "cpu-small", tiny), seed=1, run_dir=tmp_path / "run")
    model = get_family(family).load(tmp_path / "run" / "checkpoints" / "best.ckpt")
    sentences = [words] * len(sets)
    off = TreeScorer(model, None, n=None, prefix_sharing="off").score_trees(sentences, sets)
    on = TreeScorer(model, None, n=None).score_trees(sentences, sets)
    assert on[1].extra["trees"] == 1
    for a, b in zip(off, on):
        assert b.total == close32(a.total)
        assert b.word_logprobs == close32(a.word_logprobs, scale=abs(a.total))
    groups = [[model.encode_tree(model.model_tree(t, False, "test")) for t in s] for s in sets]
    if family == "dtg":  # arc representations: per-position added ids travel with the nodes
        assert any(e.added.any() for g in groups for e in g)
    alone = model.label_logprobs([e for g in groups for e in g])
    for a, b in zip(alone, (lp for g in model.grouped_label_logprobs(groups) for lp in g), strict=True):
        np.testing.assert_allclose(b, a, **FLOAT32)
