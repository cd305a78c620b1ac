"""The decoder over tensor rows and the word-synchronous beam of TG and TXL (trees).

1. ``Decoder.feed`` (``TransformerXL.step`` over a ``KeyValuePool``, attention from ``AttentionRule`` over
   ``Hypotheses`` rows) gives the full forward pass's next-token distribution (1e-5) at every position of
   random trees and documents, sentence and document level, smart and plain memory, short chunks (memory in
   use), clipped relpos, two attention functions — with many sequences decoded in one batch, a branch
   sharing its prefix's rows, and the pool compacted midway, and with a closing's two tokens in one step.
2. ``BeamScorer`` (tensor rows) returns the numbers of ``ReencodingBeamScorer`` (the re-encoding beam) at the
   same settings on PTB-sample sentences, for TG and TXL (trees), words and SentencePiece terminals, and on
   sentences longer than the segment (memory, both modes); its numbers do not depend on how sentences are
   batched (also under ``word_prob="corrected"``).
3. ``UnionScorer`` pools the beam's final trees with proposals, each distinct tree once.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from experiments.evaluate.scorer import Convention
from experiments.evaluate.scorers.tree_marginal import TreeScorer, UnionScorer
from experiments.families.tg.beam import BeamScorer
from experiments.families.tg.hypotheses import Decoder, Hypotheses
from experiments.families.tg.reference_beam import ReencodingBeamScorer
from experiments.families.tg.scorers import TGModel
from lightning_modules.data import treebank_sequences
from lightning_modules.data.corpora import Document
from lightning_modules.data.encodings.choe_charniak import TokenType
from lightning_modules.data.tree import Tree, clean, drop_pos_tags, read_bracketed
from lightning_modules.families.tg import data as tg_data
from lightning_modules.models.txl_lm import build
from lightning_modules.numeric import logsumexp
from tests.tolerances import FLOAT32, close32

LABELS = st.sampled_from(["S", "NP", "VP", "PP"])
WORDS = ["the", "cat", "sat", "on", "a", "mat"]


def _node(children: st.SearchStrategy) -> st.SearchStrategy[Tree]:
    return st.builds(Tree, LABELS, st.lists(children, min_size=1, max_size=4).map(tuple))


TREES = _node(st.recursive(st.sampled_from(WORDS), _node, max_leaves=20))
VOCAB_TREES = [Tree(label, tuple(WORDS)) for label in ("S", "NP", "VP", "PP")]  # every label and word


def make_model(family: str, trees: list[Tree], level: str = "sentence", memory: str = "smart",
               segment_length: int = 4, terminals: str = "words", seed: int = 0, double: bool = False,
               **model: object) -> TGModel:
    """A randomly initialised model (sharpened embeddings) with the vocabularies training would build."""
    docs = [Document("d", tuple(("<test>", t) for t in trees))]
    seqs = treebank_sequences.sequences(docs, level, "none")
    words = [w for seq in seqs for t in seq for w in t.leaves()]
    data_cfg = {"terminals": terminals, "min_count": 1, "sp_vocab_size": 120}
    mapping, payload, tokens = treebank_sequences.terminal_mapping(data_cfg, words, seqs)
    linearise = tg_data.actions_function(family, level, mapping)
    vocab = tg_data.build_action_vocab(tokens, [linearise(s) for s in seqs])
    model_cfg = {"d_model": 32, "n_layers": 2, "n_heads": 2, "d_ff": 64, "segment_length": segment_length,
                 "memory_length": segment_length, "relpos": "delta_depth" if family == "tg" else "linear",
                 "attention": "dense", **model}
    torch.manual_seed(seed)
    module = build({**model_cfg, "vocab_size": len(vocab)})
    with torch.no_grad():
        module.network.embedding.weight.mul_(4.0)
    if double:  # exact comparisons: float64 leaves only the rounding of the final float32 log-softmax
        module = module.double()
    meta = {"family": family, "vocab": payload,
            "config": {"model": model_cfg, "data": {"memory": memory, "tree_transform": "none", "level": level}}}
    return TGModel(module, meta, vocab)


def full_forward(model: TGModel, example) -> torch.Tensor:
    logits, _ = model._forward([example])
    return torch.cat(logits, 1)[0, : len(example)].float().log_softmax(-1)


def check_decoder(model: TGModel, examples: list, compact_at: int = 9, together: bool = False,
                  read_widths: bool = True) -> None:
    """Decode all examples as rows of one ``Hypotheses``, one batched step per token (plus a branch of the
    first, sharing its rows), against the full pass; with ``together`` a TG closing's two tokens (COMPOSE,
    then STACK) are fed in one step, as the beam feeds them; ``read_widths`` False: keys as wide as the
    host's bounds (as on an accelerator)."""
    expected = [full_forward(model, e) for e in examples]
    decoder = Decoder(model, capacity=4, slack=-(10**9))  # grows while decoding; compacts when asked
    decoder.read_widths = read_widths
    h = Hypotheses.start(len(examples), 0, "cpu")
    sources, done = list(range(len(examples))), [0] * len(examples)  # each row's example, tokens fed
    branch_at, step = len(examples[0]) // 2, 0
    while True:
        if len(sources) == len(examples) and done[0] >= branch_at:  # a branch copies rows, not keys
            h = Hypotheses.cat([h, h.select(torch.tensor([0]))])
            sources.append(0)
            done.append(done[0])
        live = [r for r, k in enumerate(sources) if done[r] < len(examples[k])]
        if not live:
            break
        entries = [(examples[sources[r]], done[r]) for r in live]
        twice = [together and j + 1 < len(e) and int(e.types[j + 1]) == TokenType.CNT2 for e, j in entries]
        h = h.grown(2)
        out = decoder.feed(h, torch.tensor(live), torch.tensor([int(e.tokens[j]) for e, j in entries]),
                           torch.tensor([int(e.types[j]) for e, j in entries]),
                           torch.tensor(twice) if together else None)
        for row, r, two in zip(out, live, twice):
            done[r] += 1 + two
            assert torch.allclose(row, expected[sources[r]][done[r] - 1], **FLOAT32), (sources[r], done[r])
        step += 1
        if step == compact_at:  # drop every row no hypothesis can attend any more; decoding goes on the same
            decoder.compact(h)  # every row kept is one some position still refers to, and only those
            assert decoder.pool.size == len(torch.unique(h.rows[h.rows >= 0]))


@settings(max_examples=12, deadline=None)
@given(trees=st.lists(TREES, min_size=2, max_size=4), family=st.sampled_from(["tg", "txl-trees"]),
       memory=st.sampled_from(["smart", "plain"]), length=st.sampled_from([3, 4, 7]),
       together=st.booleans(), read_widths=st.booleans())
def test_decoder_equals_the_full_forward_on_random_trees(trees, family, memory, length, together, read_widths):
    """Also with a closing's two tokens in one step (the STACK token attends its COMPOSE copy), and with keys
    as wide as the host's bounds."""
    model = make_model(family, VOCAB_TREES + trees, memory=memory, segment_length=length, max_rel=3,
                       double=True)
    check_decoder(model, [model.encode_tree(t) for t in trees], together=together, read_widths=read_widths)


@settings(max_examples=6, deadline=None)
@given(docs=st.lists(st.lists(TREES, min_size=1, max_size=3), min_size=1, max_size=3),
       family=st.sampled_from(["tg", "txl-trees"]))
def test_decoder_equals_the_full_forward_on_random_documents(docs, family):
    trees = [t for d in docs for t in d]
    model = make_model(family, VOCAB_TREES + trees, level="document", segment_length=5, double=True)
    linearise = tg_data.actions_function(family, "document", model.terminals)
    check_decoder(model, [model.encode(linearise(d)) for d in docs])


@pytest.mark.parametrize("variant, together", [({"use_different_attn_fns": True}, False),
                                               ({"use_different_attn_fns": True}, True), ({"relpos": "none"}, False),
                                               ({"relpos": "linear", "min_rel": -8, "max_rel": 9}, True)])
def test_decoder_variants(variant, together):
    rng = np.random.default_rng(0)
    trees = [Tree("S", (Tree("NP", tuple(rng.choice(WORDS, 2))), Tree("VP", (str(rng.choice(WORDS)),
                                                                               Tree("PP", ("on", "a"))))))
             for _ in range(3)]
    model = make_model("tg", VOCAB_TREES + trees, segment_length=4, double=True, **variant)
    check_decoder(model, [model.encode_tree(t) for t in trees], together=together)


# -- the beam equals today's re-encoding beam -----------------------------------------------------------------
@pytest.fixture(scope="module")
def ptb_trees(shared_data):
    files = sorted((shared_data / "ptb_nltk_sample" / "combined").glob("wsj_*.mrg"))[:12]
    return [drop_pos_tags(clean(t)) for f in files for _, t in read_bracketed(f)]


@pytest.mark.parametrize(("family", "terminals", "settings_"), [
    ("tg", "words", (6, 3, 4)), ("txl-trees", "words", (6, 3, 4)), ("tg", "sentencepiece", (5, 2, 3)),
])
def test_beam_equals_the_reencoding_beam_on_ptb_sentences(ptb_trees, family, terminals, settings_):
    model = make_model(family, ptb_trees, segment_length=16, terminals=terminals)
    sentences = [t.leaves() for t in ptb_trees if 3 <= len(t.leaves()) <= 9][:5]
    beam, word_beam, max_actions = settings_
    reference = ReencodingBeamScorer(model, beam, word_beam, max_actions).score(sentences)
    cached = BeamScorer(model, beam, word_beam, max_actions, batch_size=3).score(sentences)
    assert_same_scores(reference, cached)


def assert_same_scores(reference: list, scores: list) -> None:
    """Equal words, values (float32), best trees and tree counts, sentence by sentence."""
    for ref, got in zip(reference, scores, strict=True):
        assert got.words == ref.words
        assert got.total == close32(ref.total)
        assert got.word_logprobs == close32(ref.word_logprobs, scale=abs(ref.total))
        assert got.end_logprob == close32(ref.end_logprob)
        assert got.best_tree == ref.best_tree and got.extra["trees"] == ref.extra["trees"]
        assert got.extra["best_logprob"] == close32(ref.extra["best_logprob"])
        assert got.unknown_words == ref.unknown_words


@pytest.mark.parametrize(("family", "memory"), [("tg", "smart"), ("tg", "plain"), ("txl-trees", "smart")])
def test_beam_equals_the_reencoding_beam_past_the_segment(ptb_trees, family, memory):
    """Sentences of up to 14 words (~60 tokens) with 6-token segments: most keys come from the memory;
    sentences of different lengths share a batch (the shorter ones end while the others go on)."""
    model = make_model(family, ptb_trees, memory=memory, segment_length=6)
    sentences = [t.leaves() for t in ptb_trees if 3 <= len(t.leaves()) <= 14][:4]
    assert max(map(len, sentences)) > 10
    reference = ReencodingBeamScorer(model, 5, 2, 3).score(sentences)
    assert_same_scores(reference, BeamScorer(model, 5, 2, 3, batch_size=4).score(sentences))


@pytest.mark.parametrize(("terminals", "word_prob"), [("words", "sum-pieces"), ("sentencepiece", "corrected")])
def test_beam_does_not_depend_on_the_batch(ptb_trees, terminals, word_prob):
    model = make_model("tg", ptb_trees, segment_length=16, terminals=terminals)
    sentences = [t.leaves() for t in ptb_trees if 3 <= len(t.leaves()) <= 10][:5]
    alone = BeamScorer(model, 6, 3, 3, batch_size=1, word_prob=word_prob).score(sentences)
    together = BeamScorer(model, 6, 3, 3, batch_size=5, word_prob=word_prob).score(sentences)
    assert_same_scores(alone, together)


# -- fast-track (Stern et al. 2017) ---------------------------------------------------------------------------
def test_fast_track_changes_nothing_without_pruning():
    trees = [Tree("S", (Tree("X", ("a", "b")), "c")), Tree("X", (Tree("S", ("a",)), "b"))]
    model = make_model("tg", trees, segment_length=8)
    words = [["a", "b"], ["b", "a", "c"]]
    every = BeamScorer(model, 10_000, 10_000, 2).score(words)
    for k in (0, 3):
        tracked = BeamScorer(model, 10_000, 10_000, 2, fast_track=k).score(words)
        assert [s.total for s in tracked] == pytest.approx([s.total for s in every], abs=1e-9)
        assert [s.word_logprobs for s in tracked] == [s.word_logprobs for s in every]


def test_fast_track_selection_rule():
    """Completions compete with extensions for the beam; the best ``fast_track`` completions are kept anyway."""
    model = make_model("tg", VOCAB_TREES, segment_length=8)
    scorer = BeamScorer(model, beam=3, word_beam=2, max_actions=4, fast_track=1)
    close_col = int(scorer.column[scorer.masks.closing_id("NP")])

    def rows(logprobs, column_scores=None):  # hypotheses inside (S (NP ...: NP may close (not the root)
        h = Hypotheses.start(len(logprobs), 0, "cpu").grown(2)
        h.cc_close[:, :2] = torch.tensor([scorer.masks.closing_id("S"), scorer.masks.closing_id("NP")])
        h.cc_open[:] = 2
        h.logprob = torch.tensor(logprobs, dtype=torch.float64)
        h.next = torch.full((len(logprobs), len(model.vocab)), -50.0)
        for b, scores in enumerate(column_scores or []):
            for c, v in scores.items():
                h.next[b, int(scorer.nonterminal_ids[c])] = v
        return h

    frontier = rows([-1.0, -2.0, -1.5], [{0: -0.5, close_col: -0.2}, {0: -0.1}, {}])
    words = rows([-4.0, -2.2, -3.0])  # the completions of the frontier's rows

    def step(last=False):
        children, (kept, counts), sizes = scorer.select(frontier, [3], words, last)
        assert counts == [len(kept)] and sizes == [len(children)]
        return [round(v, 6) for v in children.logprob.tolist()], kept.logprob.tolist()

    # joint ranking: close NP from 0 (-1.2), open col 0 from 0 (-1.5), word of 1 (-2.2), col 0 of 1 (-2.1) ...
    children, kept = step()
    assert children == [-1.2, -1.5, -2.1]
    assert kept == [-2.2]  # no completion made the beam; the best one is fast-tracked
    scorer.fast_track = 0
    assert step()[1] == []
    scorer.fast_track = 2
    assert step()[1] == [-2.2, -3.0]
    scorer.beam = 5  # -1.2, -1.5, -2.1, -2.2 (word of 1), -3.0 (word of 2) ... in the beam
    scorer.fast_track = 0
    children, kept = step()
    assert kept == [-2.2, -3.0] and len(children) == 3
    children, kept = step(last=True)  # only completions remain
    assert children == [] and kept == [-4.0, -2.2, -3.0]  # kept in frontier order


# -- the union of the beam's trees and proposals ----------------------------------------------------------------
def test_union_of_beam_trees_and_proposals_counts_each_tree_once(ptb_trees):
    """The pooled marginal is logsumexp over the distinct trees of both sets: >= either bound alone, equal to
    the beam's when the proposals are trees the beam found, and each tree's value is its gold-tree score."""
    model = make_model("tg", ptb_trees, segment_length=16)
    chosen = [t for t in ptb_trees if 3 <= len(t.leaves()) <= 7][:3]
    sentences = [t.leaves() for t in chosen]
    beam = BeamScorer(model, 4, 2, 3, batch_size=2)
    found = beam.final_trees(sentences)
    by_beam = beam.score(sentences)
    for score, trees in zip(by_beam, found, strict=True):
        assert len(trees) == score.extra["trees"] == len(set(trees))

    def proposals(batch):  # the gold tree, then two of the beam's own trees (duplicates of the search's)
        return [[gold, *found[sentences.index(list(words))][:2]] for gold, words in zip(chosen, batch)]

    pooled = TreeScorer(model, proposals, method="proposals", n=None)
    convention = Convention(method="beam", bound=True, proposal_source="test")
    union = UnionScorer(pooled, beam.final_trees, convention).score(sentences)
    alone = pooled.score(sentences)
    gold = TreeScorer(model, None, method="gold")
    for k, (u, b, p) in enumerate(zip(union, by_beam, alone, strict=True)):
        distinct = set(found[k]) | {chosen[k]}
        assert u.extra["trees"] == len(distinct)
        assert u.extra["search_only_trees"] == len(distinct) - len(set(proposals(sentences)[k]))
        each = [gold.score_trees([sentences[k]], [[t]])[0].total for t in distinct]
        assert u.total == close32(logsumexp(each))
        assert u.total >= max(b.total, p.total) - 1e-4  # float32 passes
        assert sum(u.word_logprobs) + u.end_logprob == close32(u.total)
    same = UnionScorer(TreeScorer(model, beam.final_trees, method="proposals", n=None), beam.final_trees,
                       convention).score(sentences)
    assert [s.total for s in same] == close32([s.total for s in by_beam])
    assert all(s.extra["search_only_trees"] == 0 for s in same)
