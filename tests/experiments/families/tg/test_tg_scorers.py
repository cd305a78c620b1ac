"""Scorers of the TG family: exactness on tiny grammars where every tree is enumerated, batching, files.

The exactness tests use randomly initialised networks: p(x, y) is whatever the network defines, and every
identity checked here holds for any network. A joint model can put mass on arbitrarily deep trees, so the
"exact marginal" is over an enumerated set: Y_A(x), the well-formed trees over x with at most A nonterminal
actions before each word (the final closings not counted) — exactly the set the beam explores with
``max_actions=A`` and no pruning.
"""

import itertools
import json

import numpy as np
import pytest
import torch

from experiments.evaluate.scorer import Scorer
from experiments.evaluate.scorers import load_scorer
from experiments.evaluate.scorers.tree_files import GoldTrees, ProposalFile
from experiments.evaluate.scorers.tree_marginal import TreeScorer
from experiments.families.tg.beam import BeamScorer
from experiments.families.tg.scorers import ExactScorer, TGModel
from lightning_modules.data import treebank_sequences
from lightning_modules.data.corpora import Document
from lightning_modules.data.encodings.choe_charniak import TokenType
from lightning_modules.data.encodings.segmentation import segment
from lightning_modules.data.tree import clean, parse_tree, read_bracketed, to_bracketed
from lightning_modules.errors import InputError
from lightning_modules.families.tg import data as tg_data
from lightning_modules.families.tg.cc_constraints import build_tree
from lightning_modules.models.txl_lm import build
from tests.tolerances import FLOAT32, close32

GRAMMAR = ["(S (X (W a) (W b)) (W c))", "(S (W a) (X (W b) (W c)))", "(X (S (W a)) (W b))", "(S (W c) (W a))"]
LABELS = ("S", "X")
A = 2  # nonterminal actions allowed before each word


def enumerate_trees(words, labels, max_actions):
    """Every tree of Y_A(words): before each word some closings (never the root) then some openings, at most
    ``max_actions`` in all, at least one opening before the first word; all constituents closed at the end."""
    out = []

    def grow(i, tokens, types, open_):
        if i == len(words):
            closing = [f"{label})" for label in reversed(open_)]
            out.append(build_tree(tokens + closing, types + [TokenType.CNT] * len(closing)))
            return
        for c in range(min(max_actions, len(open_) - 1) + 1 if i else 1):
            kept = open_[: len(open_) - c]
            closing = [f"{label})" for label in reversed(open_[len(kept):])]
            for o in range(0 if i else 1, max_actions - c + 1):
                for new in itertools.product(labels, repeat=o):
                    grow(i + 1, tokens + closing + [f"({label}" for label in new] + [words[i]],
                         types + [TokenType.CNT] * c + [TokenType.ONT] * o + [TokenType.T], kept + list(new))

    grow(0, [], [], [])
    return out


def make_model(family, trees, terminals="words", segment_length=8, seed=0, sp_vocab_size=200):
    """A randomly initialised model with the vocabularies training would build from ``trees``."""
    seqs = treebank_sequences.sequences([Document("grammar", tuple(("<test>", t) for t in trees))], "sentence", "none")
    words = [w for seq in seqs for t in seq for w in t.leaves()]
    data_cfg = {"terminals": terminals, "min_count": 1, "sp_vocab_size": sp_vocab_size}
    mapping, payload, tokens = treebank_sequences.terminal_mapping(data_cfg, words, seqs)
    linearise = tg_data.actions_function(family, "sentence", mapping)
    vocab = tg_data.build_action_vocab(tokens, [linearise(s) for s in seqs])
    model_cfg = {"d_model": 32, "n_layers": 2, "n_heads": 2, "d_ff": 64, "segment_length": segment_length,
                 "memory_length": segment_length, "relpos": "delta_depth" if family == "tg" else "linear",
                 "attention": "dense"}
    torch.manual_seed(seed)
    module = build({**model_cfg, "vocab_size": len(vocab)})
    with torch.no_grad():  # sharper distributions than the near-uniform initialisation
        module.network.embedding.weight.mul_(4.0)
    meta = {"family": family, "vocab": payload,
            "config": {"model": model_cfg, "data": {"memory": "smart", "tree_transform": "none"}}}
    return TGModel(module, meta, vocab)


@pytest.fixture(scope="module")
def grammar():
    return [parse_tree(t) for t in GRAMMAR]


@pytest.fixture(scope="module", params=["tg", "txl-trees"])
def joint(request, grammar):
    return make_model(request.param, grammar)


def reference_joint(model, tree):
    """log p(x, y) of one tree alone, straight from ``token_logprobs`` (no scorer code involved)."""
    from lightning_modules.data.encodings.choe_charniak import choe_charniak

    example = model.encode(choe_charniak(tree, model.terminals))
    return float(model.module.token_logprobs(tg_data.collate_sequences(
        [(example, segment(example, model.length, model.length, model.memory))])).double().sum())


def logsumexp(values):
    return float(torch.logsumexp(torch.tensor(values, dtype=torch.float64), 0))


def all_trees(trees):
    return lambda sentences: [list(trees) for _ in sentences]


# -- the enumerated set --------------------------------------------------------------------------------------
def test_enumeration_is_the_bounded_tree_set():
    one = enumerate_trees(["a"], LABELS, 2)
    expected = ["(S (S a))", "(S (X a))", "(S a)", "(X (S a))", "(X (X a))", "(X a)"]
    assert sorted(map(to_bracketed, one)) == expected
    three = enumerate_trees(list("abc"), LABELS, A)
    assert len(three) == len(set(three)) == 554 and all(t.leaves() == list("abc") for t in three)


def test_gold_score_splits_the_joint_into_the_words_given_the_tree_and_the_structure(joint):
    """``extra["structure_logprob"]``: the labels that are not terminals (told here by the vocabulary's id
    ranges, not by the encoding's word index); only a single given tree is split."""
    from lightning_modules.data.encodings.choe_charniak import RESERVED

    words = list("ab")
    trees = enumerate_trees(words, LABELS, A)[:6]
    scores = TreeScorer(joint, None, method="gold").score_trees([words] * len(trees), [[t] for t in trees])
    for tree, score in zip(trees, scores):
        example = joint.encode_tree(tree)
        lp = joint.label_logprobs([example])[0]
        terminal = (example.labels >= len(RESERVED)) & (example.labels < len(RESERVED) + len(joint.vocab.terminals))
        assert score.extra["structure_logprob"] == close32(float(lp[~terminal].sum()))
        assert score.total - score.extra["structure_logprob"] == close32(float(lp[terminal].sum()))
        assert score.extra["structure_logprob"] < 0
    for n in (1, 3):  # proposals, even a single one, are not split: only the gold tree is "the tree"
        assert "structure_logprob" not in TreeScorer(joint, all_trees(trees), n=n).score([words])[0].extra


# -- proposals: a bound that grows with N and is exact on the whole set --------------------------------------
@pytest.mark.parametrize("words", [list("ab"), pytest.param(list("abc"), marks=pytest.mark.slow)])
def test_proposal_bound_monotone_and_exact_on_all_trees(joint, words):
    trees = enumerate_trees(words, LABELS, A)
    reference = [reference_joint(joint, t) for t in trees[:20]]
    gold = TreeScorer(joint, None, method="gold").score_trees([words] * 20, [[t] for t in trees[:20]])
    assert np.allclose([s.total for s in gold], reference, **FLOAT32)
    marginal = TreeScorer(joint, all_trees(trees), n=None).score([words])[0]
    assert marginal.extra["trees"] == len(trees)
    each = TreeScorer(joint, None, method="gold", batch_size=1000).score_trees([words] * len(trees),
                                                                               [[t] for t in trees])
    assert marginal.total == close32(logsumexp([s.total for s in each]))
    previous = -np.inf
    for n in (1, 2, 3, 10, len(trees) // 2, len(trees) - 1, len(trees)):
        bound = TreeScorer(joint, all_trees(trees), n=n).score([words])[0]
        # monotone up to float32 rounding: the shared prefixes of each set are packed differently (scorers.trie)
        slack = FLOAT32["rtol"] * abs(marginal.total)
        assert bound.total <= marginal.total + slack and bound.total >= previous - slack
        previous = bound.total
        # per-word values telescope to the bound; each is a log-probability
        assert sum(bound.word_logprobs) + bound.end_logprob == pytest.approx(bound.total, abs=1e-9)
        assert max(bound.word_logprobs) <= 1e-9 and bound.end_logprob <= 1e-9
    assert previous == pytest.approx(marginal.total, abs=1e-12)
    assert TreeScorer(joint, all_trees(trees), n=1).score([words])[0].total == close32(reference_joint(joint, trees[0]))


def test_duplicates_removed_best_tree_and_prefix_counting(joint):
    words = list("ab")
    trees = enumerate_trees(words, LABELS, A)
    doubled = TreeScorer(joint, all_trees(trees + trees[::-1]), n=None).score([words])[0]
    single = TreeScorer(joint, all_trees(trees), n=None).score([words])[0]
    assert doubled.extra["trees"] == len(trees) == 54
    assert doubled.total == pytest.approx(single.total, abs=1e-9)
    assert doubled.word_logprobs == pytest.approx(single.word_logprobs, abs=1e-9)
    each = TreeScorer(joint, None, method="gold", batch_size=100).score_trees([words] * 54,
                                                                              [[t] for t in trees])
    assert single.best_tree == to_bracketed(trees[int(np.argmax([s.total for s in each]))])
    # two trees sharing the prefix "(S a": the prefix is counted once, so log p(a) is that prefix's log-prob
    shared = [parse_tree("(S a b)"), parse_tree("(S a (X b))")]
    score = TreeScorer(joint, all_trees(shared), n=None).score([words])[0]
    other = TreeScorer(joint, all_trees(shared[:1]), n=None).score([words])[0]
    assert score.word_logprobs[0] == close32(other.word_logprobs[0], scale=abs(other.total))


# -- beam: exact when wide enough, a bound otherwise ---------------------------------------------------------
@pytest.mark.parametrize("words", [list("ab"), pytest.param(list("abc"), marks=pytest.mark.slow)])
def test_wide_beam_equals_marginal_over_the_enumerated_set(joint, words):
    trees = enumerate_trees(words, LABELS, A)
    marginal = TreeScorer(joint, all_trees(trees), n=None, batch_size=1000).score([words])[0]
    wide = BeamScorer(joint, beam=10_000, word_beam=10_000, max_actions=A).score([words])[0]
    assert wide.extra["trees"] == len(trees)
    assert wide.total == close32(marginal.total)
    assert wide.word_logprobs == close32(marginal.word_logprobs, scale=abs(marginal.total))
    assert wide.end_logprob == close32(marginal.end_logprob)
    assert wide.best_tree == marginal.best_tree
    narrow = BeamScorer(joint, beam=3, word_beam=2, max_actions=A).score([words])[0]
    assert narrow.total <= marginal.total + 1e-9 and narrow.extra["trees"] < len(trees)
    assert parse_tree(narrow.best_tree).leaves() == words
    assert narrow.total == pytest.approx(sum(narrow.word_logprobs) + narrow.end_logprob, abs=1e-9)


# -- batching ------------------------------------------------------------------------------------------------
SENTENCES = [list("abc"), list("cab"), list("ab"), list("bca"), ["a"], list("cba")]


def test_exact_scores_are_batch_invariant_and_equal_token_logprobs(grammar):
    model = make_model("txl-terminals", grammar, segment_length=4)
    one = ExactScorer(model, batch_size=1).score(SENTENCES)
    many = ExactScorer(model, batch_size=32).score(SENTENCES)
    assert isinstance(ExactScorer(model), Scorer)
    for a, b, words in zip(one, many, SENTENCES):
        assert a.words == tuple(words)
        assert a.total == close32(b.total)
        assert a.word_logprobs == close32(b.word_logprobs, scale=abs(b.total))
        actions = ExactScorer(model).actions(words)
        example = model.encode(actions)
        direct = model.module.token_logprobs(tg_data.collate_sequences(
            [(example, segment(example, model.length, model.length, model.memory))]))
        assert b.total == close32(float(direct.double().sum()))
        assert b.end_logprob == close32(float(direct[0, len(example) - 2]))
        assert sum(b.word_logprobs) + b.end_logprob == pytest.approx(b.total, abs=1e-9)


def test_proposal_scores_are_batch_invariant(joint):
    trees = {tuple(w): enumerate_trees(w, LABELS, 1) for w in SENTENCES}
    source = lambda sentences: [trees[tuple(w)] for w in sentences]  # noqa: E731
    one = TreeScorer(joint, source, n=None, batch_size=1).score(SENTENCES)
    many = TreeScorer(joint, source, n=None, batch_size=32).score(SENTENCES)
    for a, b in zip(one, many):
        assert a.total == close32(b.total)
        assert a.word_logprobs == close32(b.word_logprobs, scale=abs(b.total))
        assert a.best_tree == b.best_tree


# -- SentencePiece: pieces summed into words, the boundary piece belongs to the word it starts ---------------
def test_sentencepiece_pieces_are_summed_into_words(shared_data):
    trees = [t for _, t in read_bracketed(shared_data / "ptb_nltk_sample" / "combined" / "wsj_0003.mrg")]
    model = make_model("txl-terminals", trees, terminals="sentencepiece", segment_length=16)
    words = ["A", "form", "of", "asbestos", "Lorillard", "\u03a9mega"]
    scorer = ExactScorer(model)
    actions = scorer.actions(words)
    pieces = [t for t, w in zip(actions.tokens, actions.word_index) if w >= 0]
    index = actions.word_index
    starts = [t for t, w, prev in zip(actions.tokens[1:], index[1:], index) if w != prev and w >= 0]
    assert len(pieces) > len(words) and all(p.startswith("\u2581") for p in starts)
    score = scorer.score([words])[0]
    example = model.encode(actions)
    direct = model.module.token_logprobs(tg_data.collate_sequences(
        [(example, segment(example, model.length, model.length, model.memory))]))[0].double().numpy()
    for i in range(len(words)):
        positions = [j for j, w in enumerate(actions.word_index) if w == i]
        assert score.word_logprobs[i] == close32(direct[[p - 1 for p in positions]].sum())
    assert score.unknown_words == 1  # "Ωmega": Ω is outside the model's alphabet (the <unk> piece)
    assert score.total == close32(direct.sum())


# -- files and errors ----------------------------------------------------------------------------------------
def test_proposal_files_both_formats(tmp_path, joint):
    jsonl = tmp_path / "p.jsonl"
    jsonl.write_text(json.dumps({"sentence": 0, "trees": ["(S (X (A a) (B b)))", "(S (A a) (B b))"]}) + "\n\n"
                     + json.dumps({"sentence": 1, "trees": ["(X (S (C c)) (A a))"]}) + "\n")
    tsv = tmp_path / "p.txt"
    tsv.write_text("0\t(S (X (A a) (B b)))\n1\t(X (S (C c)) (A a))\n0\t(S (A a) (B b))\n")
    sentences = [["c", "a"], ["a", "b"]]
    for path in (jsonl, tsv):
        source = ProposalFile(path)
        assert len(source) == 2 and source(sentences)[1] == [parse_tree("(S (X (A a) (B b)))"),
                                                           parse_tree("(S (A a) (B b))")]
        scores = TreeScorer(joint, source, n=None, pos_tags=True).score(sentences)
        assert [s.extra["trees"] for s in scores] == [1, 2]
        assert scores[1].best_tree in ("(S (X (A a) (B b)))", "(S (A a) (B b))")
        with pytest.raises(InputError, match="no proposal trees for sentence 0") as e:
            source([["b", "b"]])
        assert e.value.location == str(path)


@pytest.mark.parametrize("text, message, line", [
    ('{"sentence": 0, "trees": ["(S a"]}', "never closed", 1),
    ('\n{"sentence": 0}', "exactly the keys", 2),
    ('{"sentence": 0, "trees": ["(S a)"]}\n{"sentence": 0, "trees": ["(S a)"]}', "listed twice", 2),
    ('{"sentence": 0, "trees": ["(S a)", "(S b)"]}', "different words", 1),
    ('{"sentence": -1, "trees": ["(S a)"]}', "non-negative", 1),
    ("not json", "invalid JSON", 1),
])
def test_malformed_jsonl_proposals(tmp_path, text, message, line):
    path = tmp_path / "bad.jsonl"
    path.write_text(text)
    with pytest.raises(InputError, match=message) as e:
        ProposalFile(path)
    assert e.value.location == f"{path}:{line}"


def test_malformed_tsv_proposals_and_tree_mismatch(tmp_path, joint):
    path = tmp_path / "bad.txt"
    path.write_text("0\t(S a b)\nx\t(S a)\n")
    with pytest.raises(InputError, match="SENTENCE<TAB>") as e:
        ProposalFile(path)
    assert e.value.location == f"{path}:2"
    path.write_text("0\t(S a b)\n0\t(S a c)\n")
    with pytest.raises(InputError, match="different words") as e:
        ProposalFile(path)
    assert e.value.location == f"{path}:2"
    with pytest.raises(InputError, match="differ from the sentence") as e:
        TreeScorer(joint, all_trees([parse_tree("(S a b)")])).score([["a", "c"]])
    assert e.value.location == "sentence 0, tree 0"
    with pytest.raises(InputError, match="empty sentence"):
        TreeScorer(joint, all_trees([])).score([[]])


def test_gold_trees_from_a_treebank_and_method_errors(tmp_path, joint, grammar):
    path = tmp_path / "gold.mrg"
    path.write_text("".join(f"( {t} )\n" for t in GRAMMAR))
    gold = TreeScorer(joint, GoldTrees(path), method="gold", pos_tags=True)
    sentences = [clean(t).leaves() for t in grammar]
    scores = gold.score(sentences)
    assert gold.convention.method == "gold" and gold.convention.n_proposals == 1
    from lightning_modules.data.tree import drop_pos_tags

    for s, words in zip(scores, sentences):
        first = next(t for t in grammar if clean(t).leaves() == words)  # the same words: the first tree
        assert s.total == close32(reference_joint(joint, drop_pos_tags(first)))
    with pytest.raises(InputError, match="joint model"):
        ExactScorer(joint)
    with pytest.raises(InputError, match="string model"):
        BeamScorer(make_model("txl-terminals", grammar))


# -- end to end from checkpoints -----------------------------------------------------------------------------
@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory, shared_data):
    from experiments.config import resolve_train_config
    from experiments.train import train

    trees = [t for _, t in read_bracketed(shared_data / "ptb_nltk_sample" / "combined" / "wsj_0001.mrg")]
    root = tmp_path_factory.mktemp("ckpt")
    (root / "tb.mrg").write_text("".join(to_bracketed(t) + "\n" for t in trees))
    tiny = ["model.d_model=32", "model.n_layers=2", "model.n_heads=2", "model.d_ff=64", "train.batch_size=2",
            "train.max_steps=1", "train.val_every=1", "train.ckpt_every=1", "runtime.wandb=disabled",
            "runtime.progress=false", "runtime.threads=1", f"data.corpus={root / 'tb.mrg'}",
            "data.train_split=file", "data.valid_split=file"]
    out = {}
    for family in ("tg", "txl-terminals"):
        train(resolve_train_config(family, "cpu-small", tiny), seed=0, run_dir=root / family)
        out[family] = str(root / family / "checkpoints" / "best.ckpt")
    return out, root / "tb.mrg", trees


def test_load_scorer_every_method(checkpoints, tmp_path):
    paths, treebank, trees = checkpoints
    sentences = [clean(t).leaves() for t in trees]
    exact = load_scorer(paths["txl-terminals"], batch_size=1)
    assert exact.convention.method == "exact" and not exact.convention.bound
    batched = load_scorer(paths["txl-terminals"], batch_size=32).score(sentences)
    assert [s.total for s in exact.score(sentences)] == close32([s.total for s in batched])
    gold = load_scorer(paths["tg"], "gold", trees=treebank).score(sentences)
    proposals = tmp_path / "p.jsonl"
    proposals.write_text("".join(json.dumps({"sentence": k, "trees": [to_bracketed(t)]}) + "\n"
                                 for k, t in enumerate(trees)))
    scorer = load_scorer(paths["tg"], "proposals", proposals=proposals, n_proposals=5)
    assert scorer.convention.to_dict()["proposal_source"] == f"file:{proposals}"
    assert scorer.convention.incremental == "proposal-prefixes" and scorer.convention.n_proposals == 5
    assert [s.total for s in scorer.score(sentences)] == close32([s.total for s in gold])
    beam = load_scorer(paths["tg"], "beam", beam=4, word_beam=2, max_actions=3)
    short = [w[:4] for w in sentences[:1]]
    score = beam.score(short)[0]
    assert (beam.convention.beam, beam.convention.word_beam, beam.convention.incremental) == (4, 2, "beam")
    assert parse_tree(score.best_tree).leaves() == short[0] and score.total < 0
    with pytest.raises(InputError, match="needs proposals"):
        load_scorer(paths["tg"], "proposals")
    with pytest.raises(InputError, match="no exact"):
        load_scorer(paths["tg"])
    with pytest.raises(InputError, match="unknown method"):
        load_scorer(paths["tg"], "nope")
