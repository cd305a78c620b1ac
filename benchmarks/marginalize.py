"""Throughput of marginalisation for joint models: proposals batched vs one tree at a time, and the beam.

Model: a randomly initialised ``cpu-small`` TG (d_model 128, 4 layers, L = M = 128) with the vocabulary
training builds on the PTB sample's train split (words seen twice, Berkeley unknown classes); speed does not
depend on the weights. Sentences: the first ``--sentences`` validation sentences of 5 to ``--max-words``
words. Proposals: the gold tree plus random well-formed trees over the same words (uniform choices among
the allowed actions, at most 4 nonterminals before a word) until ``--proposals`` distinct trees.

- ``batched``: ``TreeScorer`` with ``prefix_sharing="off"`` — all N proposals of a sentence in one forward pass
  (chunks collated together), every tree's whole sequence computed.
- ``trie``: ``TreeScorer``'s default ``prefix_sharing="trie"`` (``experiments/evaluate/scorers/trie.py``) — the
  same batches, each sentence's distinct prefixes computed once (packed rows of at most ``--max-nodes`` nodes).
  Timed interleaved with ``batched`` (one run of each per repeat); also printed: distinct trie nodes over the
  proposals' total tokens.
- ``one at a time``: the same trees, one forward pass per tree (a batch of one).
- ``beam``: ``BeamScorer`` with ``--beam``, ``--word-beam``, ``--max-actions`` (sentences per second).
- ``--bf16``: also the trie path at ``--inference-dtype bfloat16`` (``evaluate/scorers/autocast.py``: bf16
  autocast, log-softmax and sums in float32), timed interleaved with the float32 trie (the reference: what
  scoring does by default); prints trees/s, bf16 / float32 speed and the largest |log p_bf16 - log p_fp32| of a
  sentence (random weights: the gap of trained models is in docs/cli.md).

``--proposal-kind k-best`` makes proposals that share prefixes as a parser's k-best list does: the gold tree's
actions up to a uniformly chosen word, then random.

All proposal paths give the same totals (checked). ``--family txl-trees`` scores the same trees with a
TXL (trees) network of the preset (relpos linear). Times are wall-clock, best of ``--repeats``.
Run: ``PYTHONPATH=. python benchmarks/marginalize.py [--threads 1]``. On a GPU, at the paper's N = 300 and the
16-layer PTB model (``--preset ptb``; random weights, same speed), sentences/s of N trees per sentence batched
vs one tree at a time:
``python benchmarks/marginalize.py --device cuda --preset ptb --proposals 300 --sentences 20 --beam 300``.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
import torch

from experiments.evaluate.scorers import trie
from experiments.evaluate.scorers.tree_marginal import TreeScorer
from experiments.families.tg.beam import BeamScorer
from experiments.families.tg.scorers import TGModel
from experiments.presets import load_presets
from lightning_modules.data import treebank_sequences
from lightning_modules.data.corpora import load_corpus
from lightning_modules.data.encodings.choe_charniak import TokenType, choe_charniak
from lightning_modules.data.tree import Tree, clean, drop_pos_tags
from lightning_modules.families.tg import data as tg_data
from lightning_modules.families.tg.cc_constraints import ActionMasks, CCState, build_tree
from lightning_modules.models.txl_lm import build

PRESETS = Path(__file__).resolve().parents[1] / "experiments" / "families" / "tg" / "presets" / "tg.yaml"


def cpu_small_model(preset: str = "cpu-small", device: str = "cpu", family: str = "tg"
                    ) -> tuple[TGModel, list[Tree]]:
    """A random TG (or TXL (trees): ``family``) of the preset (default cpu-small) on ``device`` and the
    cleaned, POS-free validation trees of the PTB sample."""
    corpus = load_corpus("ptb-sample")
    train = treebank_sequences.sequences(corpus.splits["train"], "sentence", "none")
    words = [w for seq in train for t in seq for w in t.leaves()]
    data_cfg = {"terminals": "words", "min_count": 2}
    mapping, payload, tokens = treebank_sequences.terminal_mapping(data_cfg, words, train)
    vocab = tg_data.build_action_vocab(tokens, [tg_data.actions_function("tg", "sentence", mapping)(s)
                                                for s in train])
    model_cfg = load_presets(PRESETS)[preset]
    if family != "tg":
        model_cfg = {**model_cfg, "relpos": "linear", "use_different_attn_fns": False}
    torch.manual_seed(0)
    module = build({**model_cfg, "vocab_size": len(vocab)})
    meta = {"family": family, "vocab": payload,
            "config": {"model": model_cfg, "data": {"memory": "smart", "tree_transform": "none"}}}
    valid = [drop_pos_tags(clean(t)) for doc in corpus.splits["valid"] for _, t in doc.sentences]
    return TGModel(module, meta, vocab, device), valid


def random_tree(words: list[str], masks: ActionMasks, rng: np.random.Generator, max_actions: int = 4,
                prefix: Tree | None = None, keep: int = 0) -> Tree:
    """A uniformly-chosen well-formed tree: before each word, random nonterminal actions, then the word. With
    ``prefix``: that tree's actions up to its ``keep``-th word, then random (a parser's k-best list shares
    such prefixes)."""
    vocab = masks.vocab
    state, tokens, types = CCState(), [], []
    if prefix is not None and keep:
        actions = choe_charniak(prefix, lambda w: (w,))
        for token, ttype, w in zip(actions.tokens[1:], actions.types[1:], actions.word_index[1:]):
            state = state.advance(ttype, token)
            tokens.append(token)
            types.append(ttype)
            if w == keep - 1:
                break
    for word in words[keep:]:
        for step in range(max_actions):
            allowed = np.flatnonzero(masks.allowed(state, terminal=False, close_root=False))
            word_ok = bool(state.open)
            if word_ok and (step == max_actions - 1 or rng.random() < 0.5):
                break
            action = int(rng.choice(allowed))
            ttype = int(vocab.token_types(np.array([action]))[0])
            state = state.advance(ttype, vocab.tokens[action])
            tokens.append(vocab.tokens[action])
            types.append(ttype)
        if not state.open:  # the root must be open before the first word
            action = int(rng.choice(masks.opening_ids))
            state = state.advance(TokenType.ONT, vocab.tokens[action])
            tokens.append(vocab.tokens[action])
            types.append(TokenType.ONT)
        state = state.advance(TokenType.T, word)
        tokens.append(word)
        types.append(TokenType.T)
    closing = [f"{label})" for label in reversed(state.open)]
    return build_tree(tokens + closing, types + [TokenType.CNT] * len(closing))


def proposals(gold: Tree, n: int, masks: ActionMasks, rng: np.random.Generator, kind: str = "random"
              ) -> list[Tree]:
    """The gold tree and distinct random trees over its words until ``n``: ``random`` uniform, ``k-best`` the
    gold tree's actions up to a uniformly chosen word, then random (proposals that share prefixes)."""
    trees = {gold: None}
    words = gold.leaves()
    for _ in range(50 * n):
        if len(trees) == n:
            break
        keep = int(rng.integers(len(words))) if kind == "k-best" else 0
        trees.setdefault(random_tree(words, masks, rng, prefix=gold, keep=keep), None)
    return list(trees)


def best_time(fn, repeats: int) -> tuple[float, object]:
    best, result = float("inf"), None
    for _ in range(repeats):
        start = time.perf_counter()
        result = fn()
        if torch.cuda.is_available():
            torch.cuda.synchronize()
        best = min(best, time.perf_counter() - start)
    return best, result


def bf16_scoring(scorer: TreeScorer, sentences: list[list[str]], sets: list[list[Tree]], repeats: int, device: str,
                 reference: list) -> None:
    """Trees/s of ``scorer`` at float32 and under bf16 autocast, interleaved, and the largest gap of a sentence's
    log p between the two (``reference``: its float32 scores)."""
    from experiments.evaluate.scorers.autocast import AutocastScorer

    bf16 = AutocastScorer(scorer, device)
    bf16.score_trees(sentences[:1], sets[:1])  # the first bf16 call's kernel set-up is not timed
    t_fp32 = t_bf16 = float("inf")
    for _ in range(repeats):
        t, _ = best_time(lambda: scorer.score_trees(sentences, sets), 1)
        t_fp32 = min(t_fp32, t)
        t, scores = best_time(lambda: bf16.score_trees(sentences, sets), 1)
        t_bf16 = min(t_bf16, t)
    n_trees = sum(len(s) for s in sets)
    gap = max(abs(a.total - b.total) for a, b in zip(reference, scores, strict=True))
    print(f"proposals trie bfloat16:  {n_trees / t_bf16:8.1f} trees/s  ({t_bf16:.2f} s); float32 "
          f"{n_trees / t_fp32:.1f} trees/s ({t_fp32:.2f} s); bf16 / fp32 speed {t_fp32 / t_bf16:.2f}x; "
          f"max |log p_bf16 - log p_fp32| per sentence {gap:.3g} nats")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sentences", type=int, default=8)
    parser.add_argument("--max-words", type=int, default=20)
    parser.add_argument("--proposals", type=int, default=32)
    parser.add_argument("--beam", type=int, default=20)
    parser.add_argument("--word-beam", type=int, default=5)
    parser.add_argument("--max-actions", type=int, default=6)
    parser.add_argument("--beam-sentences", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    parser.add_argument("--preset", default="cpu-small", help="TG model preset (cpu-small | ptb | bllip)")
    parser.add_argument("--family", choices=("tg", "txl-trees"), default="tg")
    parser.add_argument("--proposal-kind", choices=("random", "k-best"), default="random",
                        help="uniform random trees, or the gold tree's prefix up to a random word then random")
    parser.add_argument("--max-nodes", type=int, default=trie.DEFAULT_MAX_NODES,
                        help="longest packed trie row (nodes)")
    parser.add_argument("--skip-one", action="store_true", help="skip the one-tree-at-a-time timing")
    parser.add_argument("--skip-beam", action="store_true", help="skip the beam timing")
    parser.add_argument("--bf16", action="store_true",
                        help="also time the trie path under bf16 autocast against float32 (interleaved)")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)

    if args.device == "cuda" and not torch.cuda.is_available():
        parser.error("--device cuda: CUDA is not available on this machine")
    model, valid = cpu_small_model(args.preset, args.device, args.family)
    masks = ActionMasks(model.vocab)
    rng = np.random.default_rng(0)
    golds = [t for t in valid if 5 <= len(t.leaves()) <= args.max_words][: args.sentences]
    sentences = [t.leaves() for t in golds]
    sets = [proposals(t, args.proposals, masks, rng, args.proposal_kind) for t in golds]
    n_trees = sum(len(s) for s in sets)
    words = sum(len(s) for s in sentences)
    print(f"model: random {args.preset} {args.family}, vocab {len(model.vocab)}; device {args.device}; torch threads "
          f"{torch.get_num_threads()}")
    print(f"{len(sentences)} sentences ({words} words, {words / len(sentences):.1f} per sentence), "
          f"{n_trees} proposal trees ({n_trees / len(sentences):.1f} per sentence)")
    lengths = [[len(c.example) for c in TreeScorer(model, None, n=None).candidates(k, s, ts, None)[0]]
               for k, (s, ts) in enumerate(zip(sentences, sets))]
    used = sum(sum(x) for x in lengths) / sum(len(x) * max(x) for x in lengths)
    print(f"encoded tree length {np.mean([v for x in lengths for v in x]):.1f} tokens on average; "
          f"{used:.0%} of a sentence's batch is not padding")

    batched = TreeScorer(model, None, n=None, batch_size=args.proposals, prefix_sharing="off")
    shared = TreeScorer(model, None, n=None, batch_size=args.proposals)
    model.trie_max_nodes = args.max_nodes
    one = TreeScorer(model, None, method="gold", batch_size=1, prefix_sharing="off")
    t_batched = t_trie = float("inf")
    for _ in range(args.repeats):  # interleaved: a drift of the machine's speed hits both paths alike
        t, scores = best_time(lambda: batched.score_trees(sentences, sets), 1)
        t_batched = min(t_batched, t)
        t, trie_scores = best_time(lambda: shared.score_trees(sentences, sets), 1)
        t_trie = min(t_trie, t)
    for a, b in zip(scores, trie_scores):
        assert abs(a.total - b.total) <= 1e-5 * abs(a.total), (a.total, b.total)
    model.trie_stats = stats = trie.TrieStats()
    shared.score_trees(sentences, sets)
    model.trie_stats = None
    print(f"proposals batched:        {n_trees / t_batched:8.1f} trees/s  ({t_batched:.2f} s)")
    print(f"proposals trie:           {n_trees / t_trie:8.1f} trees/s  ({t_trie:.2f} s)")
    print(f"trie / batched speed-up: {t_batched / t_trie:.2f}x; distinct trie nodes / proposal tokens: "
          f"{stats.nodes} / {stats.positions} = {stats.nodes / stats.positions:.3f} ({stats.rows} packed rows, "
          f"max {args.max_nodes} nodes)")
    if args.bf16:
        bf16_scoring(shared, sentences, sets, args.repeats, args.device, trie_scores)
    if not args.skip_one:
        t_one, singles = best_time(lambda: [one.score_trees([s] * len(ts), [[t] for t in ts])
                                            for s, ts in zip(sentences, sets)], args.repeats)
        for score, single in zip(scores, singles):
            totals = torch.tensor([s.total for s in single], dtype=torch.float64)
            assert abs(score.total - float(torch.logsumexp(totals, 0))) < 1e-4
        print(f"proposals one at a time:  {n_trees / t_one:8.1f} trees/s  ({t_one:.2f} s)")
        print(f"sentences/s (N = {n_trees / len(sentences):.0f} trees each): batched "
              f"{len(sentences) / t_batched:.2f}, trie {len(sentences) / t_trie:.2f}, one at a time "
              f"{len(sentences) / t_one:.2f}")
        print(f"batched / one-at-a-time speed-up: {t_one / t_batched:.1f}x")
    if args.skip_beam:
        return

    beam = BeamScorer(model, args.beam, args.word_beam, args.max_actions)
    subset = sentences[: args.beam_sentences]
    t_beam, _ = best_time(lambda: beam.score(subset), 1)
    beam_words = sum(len(s) for s in subset)
    print(f"beam (K={args.beam}, K_w={args.word_beam}, max_actions={args.max_actions}): "
          f"{len(subset) / t_beam:.3f} sentences/s, {beam_words / t_beam:.2f} words/s "
          f"({len(subset)} sentences, {beam_words} words, {t_beam:.1f} s)")


if __name__ == "__main__":
    main()
