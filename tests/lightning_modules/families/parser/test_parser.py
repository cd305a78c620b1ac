"""The proposal parser: forced-shift encoding and constraints, the network, and N-distinct-tree search."""

import math

import numpy as np
import pytest
import torch

from experiments.evaluate.proposal_files import with_tags
from experiments.families.parser.proposals import (
    ParserDecoder,
    conditional_gumbel,
    propose,
    search,
)
from lightning_modules.data.corpora import load_corpus
from lightning_modules.data.tree import parse_tree
from lightning_modules.data.treebank_sequences import sequences
from lightning_modules.data.vocab import WordVocab
from lightning_modules.errors import InputError
from lightning_modules.families.parser import data as parser_data
from lightning_modules.families.parser.encoding import (
    PAD,
    ParserVocab,
    ParseState,
    actions_to_tree,
    allowed_mask,
    constraint_fields,
    encode,
    tree_actions,
)
from lightning_modules.families.parser.model import build


@pytest.fixture(scope="module")
def ptb_trees(prepared_data_dir):
    corpus = load_corpus("ptb-sample", prepared_data_dir)
    return [seq[0] for seq in sequences(corpus.splits["valid"], "sentence", "none")]


def tiny_parser(labels=("NP", "S", "VP"), max_depth=8, seed=0, source_vocab=50):
    torch.manual_seed(seed)
    vocab = ParserVocab(tuple(labels))
    model = build({"source_vocab_size": source_vocab, "action_vocab_size": len(vocab), "d_model": 16,
                   "n_encoder_layers": 1, "n_decoder_layers": 1, "n_heads": 2, "d_ff": 32, "dropout": 0.0,
                   "max_depth": max_depth})
    model.eval()
    words = [f"w{i}" for i in range(source_vocab - 2)]
    payload = {"terminals": "words", "words": WordVocab.build(words, min_count=1).to_dict(),
               "parser_labels": vocab.to_json()}
    return model, payload, vocab


# -- encoding --------------------------------------------------------------------------------------------------
def test_actions_of_the_worked_example():
    vocab = ParserVocab(("NP", "S", "VP"))
    tree = parse_tree("(S (NP the cat) (VP meows))")
    actions = tree_actions(tree, vocab)
    assert [vocab.token(a) for a in actions] == ["(S", "(NP", "SHIFT", "SHIFT", "NP)", "(VP", "SHIFT", "VP)", "S)"]
    assert actions_to_tree(actions, ["the", "cat", "meows"], vocab) == tree
    example = encode(tree, [5, 6, 7], [0, 1, 2], vocab, max_depth=10)
    assert example.inputs.tolist() == [1, *actions[:-1]]
    assert example.front.tolist() == [0, 0, 0, 1, 2, 2, 2, 3, 3]
    # NP may close once it has a child; S (the root) only once every word is shifted
    np_, s_, vp = (vocab.first_close + i for i in range(3))
    assert example.close_id.tolist() == [0, 0, 0, np_, np_, 0, 0, vp, s_]
    assert example.can_open.tolist() == [True] * 7 + [False, False]
    assert example.can_shift.tolist() == [False, True, True, True, True, True, True, False, False]


def test_gold_trees_roundtrip_and_obey_the_constraints(ptb_trees):
    vocab = ParserVocab.build(ptb_trees)
    for tree in ptb_trees:
        actions = tree_actions(tree, vocab)
        assert actions_to_tree(actions, tree.leaves(), vocab) == tree
        constraint_fields(actions, len(tree.leaves()), vocab, max_depth=100)  # raises if a rule is broken
    with pytest.raises(InputError, match="max_depth"):
        deep = max(ptb_trees, key=lambda t: t.height())
        encode(deep, list(range(1, len(deep.leaves()) + 1)), list(range(len(deep.leaves()))), vocab, max_depth=3)


def test_vectorised_state_equals_the_encoding_along_gold_sequences(ptb_trees):
    """ParseState (search) and constraint_fields (training) give the same allowed sets."""
    vocab = ParserVocab.build(ptb_trees)
    trees = ptb_trees[:40]
    seqs = [tree_actions(t, vocab) for t in trees]
    expected = [constraint_fields(s, len(t.leaves()), vocab, 100) for s, t in zip(seqs, trees)]
    state = ParseState(np.array([len(t.leaves()) for t in trees]), vocab, 100)
    for step in range(max(len(s) for s in seqs)):
        can_open, can_shift, close_id = state.fields()
        actions = np.zeros(len(trees), dtype=np.int64)
        for r, (seq, (_, e_open, e_shift, e_close)) in enumerate(zip(seqs, expected)):
            if step < len(seq):
                assert (can_open[r], can_shift[r], close_id[r]) == (e_open[step], e_shift[step], e_close[step])
                actions[r] = seq[step]
            else:
                assert state.finished[r] and not can_open[r] and not can_shift[r] and close_id[r] == 0
        state.advance(actions)
    assert state.finished.all()


def test_random_allowed_actions_always_give_a_tree_over_exactly_the_words():
    vocab = ParserVocab(("A", "B", "C"))
    rng = np.random.default_rng(0)
    n_words = rng.integers(1, 9, size=300)
    state = ParseState(n_words, vocab, max_depth=4)
    history = [[] for _ in n_words]
    for _ in range(200):
        if state.finished.all():
            break
        mask = allowed_mask(*state.fields(), vocab)
        actions = np.zeros(len(n_words), dtype=np.int64)
        for r in np.flatnonzero(~state.finished):
            assert mask[r].any(), "an unfinished prefix always has an allowed action"
            actions[r] = rng.choice(np.flatnonzero(mask[r]))
            history[r].append(int(actions[r]))
        state.advance(actions)
    assert state.finished.all()
    for n, actions in zip(n_words, history):
        words = [f"x{i}" for i in range(n)]
        tree = actions_to_tree(actions, words, vocab)
        assert tree.leaves() == words
        assert all(node.children for node in tree.subtrees())
        assert tree_actions(tree, vocab) == actions


def test_with_tags_puts_preterminals_back():
    tree = parse_tree("(S (NP the cat) (VP meows) .)")
    assert str(with_tags(tree, ["DT", "NN", "VBZ", "."])) == "(S (NP (DT the) (NN cat)) (VP (VBZ meows)) (. .))"
    with pytest.raises(ValueError):
        with_tags(tree, ["DT"])


# -- search ----------------------------------------------------------------------------------------------------
def enumerate_trees(n_words, vocab, max_depth):
    """Every complete action sequence of the constraint system (depth-first)."""
    out = []

    def walk(prefix):
        state = ParseState(np.array([n_words]), vocab, max_depth)
        for a in prefix:
            state.advance(np.array([a]))
        if state.finished[0]:
            out.append(tuple(prefix))
            return
        for a in np.flatnonzero(allowed_mask(*state.fields(), vocab)[0]):
            walk(prefix + [int(a)])

    walk([])
    return out


@pytest.mark.parametrize("method", ["sample", "beam"])
def test_n_distinct_trees_or_all_of_them(method):
    model, payload, vocab = tiny_parser(labels=("A", "B"), max_depth=2)
    everything = enumerate_trees(2, vocab, 2)
    words_short = ["w1", "w2"]
    words_long = ["w1", "w2", "w3", "w4", "w5"]
    found = propose(model, payload, [words_short, words_long], n=len(everything) + 5, method=method, seed=3)
    short, long = found
    # fewer trees than N exist: all of them, each once
    assert len(short.trees) == len(everything)
    assert {tuple(tree_actions(t, vocab)) for t in short.trees} == set(everything)
    # more exist: exactly N distinct ones, each over exactly the words
    assert len(long.trees) == len(everything) + 5 == len(set(long.trees))
    assert all(t.leaves() == words_long for t in long.trees)
    assert long.logq == sorted(long.logq, reverse=True)
    # the probabilities of all trees of the short sentence sum to one (q is normalised over its trees)
    assert math.fsum(math.exp(x) for x in short.logq) == pytest.approx(1.0, abs=1e-5)


def test_search_logq_equals_teacher_forced_logq():
    model, payload, vocab = tiny_parser(seed=1)
    words = ["w3", "w7", "w1", "w9"]
    found = propose(model, payload, [words], n=6, method="beam")[0]
    source = parser_data.source_mapping(payload)
    ids, first = source(words)
    examples = [encode(t, ids, first, vocab, 8) for t in found.trees]
    with torch.no_grad():
        nll = [float(model.loss_terms(parser_data.collate([e], vocab))[0]) for e in examples]
    assert [-x for x in nll] == pytest.approx(found.logq, abs=1e-4)


def test_greedy_is_stepwise_argmax_and_results_do_not_depend_on_batching():
    model, payload, vocab = tiny_parser(seed=2, max_depth=4)
    sentences = [["w1", "w2", "w3"], ["w4"], ["w5", "w6", "w7", "w8", "w9"], ["w2", "w2"]]
    greedy = propose(model, payload, sentences, n=1, method="beam")
    for words, p in zip(sentences, greedy):
        batch = parser_data.collate_source([parser_data.source_mapping(payload)(words)])
        decoder = ParserDecoder(model, batch, 1, vocab)
        actions = []
        while not decoder.finished()[0]:
            a = int(decoder.logprobs()[0, 0].argmax())
            actions.append(a)
            decoder.advance(torch.tensor([0]), torch.tensor([a]))
        assert actions_to_tree(actions, words, vocab) == p.trees[0]
    one_by_one = propose(model, payload, sentences, n=4, method="sample", seed=5, max_rows=4)
    together = propose(model, payload, sentences, n=4, method="sample", seed=5, max_rows=16)
    for a, b in zip(one_by_one, together):
        assert a.trees == b.trees
    seeds = {tuple(propose(model, payload, sentences[2:3], n=4, method="sample", seed=s)[0].trees) for s in (6, 7)}
    assert len(seeds) == 2  # another seed, another sample (a collision is astronomically unlikely here)


class ToyDecoder:
    """A fixed distribution over sequences: first action a in {1, 2, 3}; after 1 the sequence ends (the next
    action is PAD-like 'finished'), after 2 or 3 one more action in {1, 2} with probabilities depending on a."""

    first = np.array([-np.inf, *np.log([0.5, 0.3, 0.2])])  # index 0 is PAD
    second = {2: np.array([-np.inf, *np.log([0.9, 0.1]), -np.inf]),
              3: np.array([-np.inf, *np.log([0.4, 0.6]), -np.inf])}

    def __init__(self, items, k):
        self.items, self.k = items, k
        self.seqs = [[] for _ in range(items * k)]

    def finished(self):
        return np.array([len(s) == 2 or s == [1] for s in self.seqs])

    def logprobs(self):
        out = np.full((self.items * self.k, 4), -np.inf)
        for r, s in enumerate(self.seqs):
            if not s:
                out[r] = self.first
            elif len(s) == 1 and s[0] != 1:
                out[r] = self.second[s[0]]
        return torch.from_numpy(out).view(self.items, self.k, 4)

    def advance(self, rows, actions):
        self.seqs = [list(self.seqs[r]) + ([int(a)] if a != PAD else []) for r, a in zip(rows.tolist(), actions)]

    @classmethod
    def exact(cls):
        p = {(1,): 0.5}
        for a in (2, 3):
            for b in (1, 2):
                p[(a, b)] = math.exp(cls.first[a] + cls.second[a][b])
        return p


def test_gumbel_top_1_is_ancestral_sampling():
    items = 20000
    generators = [torch.Generator().manual_seed(i) for i in range(items)]
    found = search(ToyDecoder(items, 1), items, 1, True, generators)
    exact = ToyDecoder.exact()
    counts = {y: 0 for y in exact}
    for hyps in found:
        assert len(hyps) == 1
        counts[tuple(hyps[0].actions)] += 1
        assert hyps[0].logprob == pytest.approx(math.log(exact[tuple(hyps[0].actions)]))
    for y, p in exact.items():
        se = math.sqrt(p * (1 - p) / items)
        assert abs(counts[y] / items - p) < 4 * se, (y, counts[y] / items, p)


def test_gumbel_top_2_inclusion_probabilities_are_those_of_sampling_without_replacement():
    items = 20000
    generators = [torch.Generator().manual_seed(100 + i) for i in range(items)]
    found = search(ToyDecoder(items, 2), items, 2, True, generators)
    exact = ToyDecoder.exact()
    included = {y: 0 for y in exact}
    for hyps in found:
        assert len(hyps) == 2 and hyps[0].actions != hyps[1].actions
        assert hyps[0].key >= hyps[1].key
        for h in hyps:
            included[tuple(h.actions)] += 1
    for y, p in exact.items():
        inclusion = p + sum(q * p / (1 - q) for z, q in exact.items() if z != y)
        se = math.sqrt(inclusion * (1 - inclusion) / items)
        assert abs(included[y] / items - inclusion) < 4 * se, (y, included[y] / items, inclusion)


def test_beam_over_the_toy_finds_the_top_sequences_in_order():
    found = search(ToyDecoder(1, 3), 1, 3, False)[0]
    exact = sorted(ToyDecoder.exact().items(), key=lambda kv: -kv[1])
    assert [tuple(h.actions) for h in found] == [y for y, _ in exact[:3]]
    assert [h.logprob for h in found] == pytest.approx([math.log(p) for _, p in exact[:3]])


def test_conditional_gumbel_keeps_the_max_and_is_exact():
    torch.manual_seed(0)
    parent = torch.tensor([[1.5]], dtype=torch.float64)
    g = torch.tensor([[0.3, -2.0, 0.9, -math.inf]], dtype=torch.float64)
    out = conditional_gumbel(parent, g)
    z = 0.9
    direct = [-math.log(math.exp(-1.5) - math.exp(-z) + math.exp(-x)) for x in (0.3, -2.0)]
    assert out[0, :2].tolist() == pytest.approx(direct, abs=1e-12)
    assert out[0, 2] == 1.5 and out[0, 3] == -math.inf
    assert (conditional_gumbel(torch.tensor([[-math.inf]], dtype=torch.float64), g) == -math.inf).all()


# -- training --------------------------------------------------------------------------------------------------
def test_tiny_parser_loss_decreases(ptb_trees):
    trees = ptb_trees[:8]
    vocab = ParserVocab.build(trees)
    words = WordVocab.build([w for t in trees for w in t.leaves()], min_count=1)
    examples = [encode(t, [words.id(w) + 1 for w in t.leaves()], list(range(len(t.leaves()))), vocab, 100)
                for t in trees]
    batch = parser_data.collate(examples, vocab)
    assert batch["mask"].gather(-1, batch["actions"][..., None]).all()  # gold actions are always allowed
    torch.manual_seed(0)
    model = build({"source_vocab_size": len(words) + 1, "action_vocab_size": len(vocab), "d_model": 32,
                   "n_encoder_layers": 1, "n_decoder_layers": 1, "n_heads": 2, "d_ff": 64, "dropout": 0.0})
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    losses = []
    for _ in range(25):
        nll, count, _ = model.loss_terms(batch)
        loss = nll / count
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(float(loss))
    assert losses[-1] < 0.6 * losses[0]
    assert losses[0] < math.log(len(vocab))  # the constrained softmax starts below uniform over all actions


def test_bad_configs_are_input_errors():
    with pytest.raises(InputError, match="model.n_heads"):
        build({"d_model": 30, "n_heads": 4})
    with pytest.raises(InputError, match="model.widht"):
        build({"widht": 3})
    with pytest.raises(InputError, match="model.dropout"):
        build({"dropout": 1.5})
    with pytest.raises(InputError):
        propose(*tiny_parser()[:2], [["w1"], []], n=2)
