"""Throughput of marginalisation for joint models: proposals batched vs one tree at a time, and the beam.

Model: a randomly initialised ``cpu-small`` TG (d_model 128, 4 layers, L = M = 128) with the vocabulary
training builds on the PTB sample's train split (words seen twice, Berkeley unknown classes); speed does not
depend on the weights. Sentences: the first ``--sentences`` validation sentences of 5 to ``--max-words``
words. Proposals: the gold tree plus random well-formed trees over the same words (uniform choices among
the allowed actions, at most 4 nonterminals before a word) until ``--proposals`` distinct trees.

- ``batched``: ``TreeScorer`` — all N proposals of a sentence in one forward pass (chunks collated together).
- ``one at a time``: the same trees, one forward pass per tree (a batch of one).
- ``beam``: ``BeamScorer`` with ``--beam``, ``--word-beam``, ``--max-actions`` (sentences per second).

Both proposal paths give the same totals (checked). Times are wall-clock, best of ``--repeats``.
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

from experiments.evaluate.scorers.tree_marginal import TreeScorer
from experiments.families.tg.beam import BeamScorer
from experiments.families.tg.scorers import TGModel
from experiments.presets import load_presets
from lightning_modules.data import treebank_sequences
from lightning_modules.data.corpora import load_corpus
from lightning_modules.data.encodings.choe_charniak import TokenType
from lightning_modules.data.tree import Tree, clean, drop_pos_tags
from lightning_modules.families.tg import data as tg_data
from lightning_modules.families.tg.cc_constraints import ActionMasks, CCState, build_tree
from lightning_modules.models.txl_lm import build

PRESETS = Path(__file__).resolve().parents[1] / "experiments" / "families" / "tg" / "presets" / "tg.yaml"


def cpu_small_model(preset: str = "cpu-small", device: str = "cpu") -> tuple[TGModel, list[Tree]]:
    """A random TG of the preset (default cpu-small) on ``device`` and the cleaned, POS-free validation trees
    of the PTB sample."""
    corpus = load_corpus("ptb-sample")
    train = treebank_sequences.sequences(corpus.splits["train"], "sentence", "none")
    words = [w for seq in train for t in seq for w in t.leaves()]
    data_cfg = {"terminals": "words", "min_count": 2}
    mapping, payload, tokens = treebank_sequences.terminal_mapping(data_cfg, words, train)
    vocab = tg_data.build_action_vocab(tokens, [tg_data.actions_function("tg", "sentence", mapping)(s)
                                                for s in train])
    model_cfg = load_presets(PRESETS)[preset]
    torch.manual_seed(0)
    module = build({**model_cfg, "vocab_size": len(vocab)})
    meta = {"family": "tg", "vocab": payload,
            "config": {"model": model_cfg, "data": {"memory": "smart", "tree_transform": "none"}}}
    valid = [drop_pos_tags(clean(t)) for doc in corpus.splits["valid"] for _, t in doc.sentences]
    return TGModel(module, meta, vocab, device), valid


def random_tree(words: list[str], masks: ActionMasks, rng: np.random.Generator, max_actions: int = 4) -> Tree:
    """A uniformly-chosen well-formed tree: before each word, random nonterminal actions, then the word."""
    vocab = masks.vocab
    state, tokens, types = CCState(), [], []
    for word in words:
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


def proposals(gold: Tree, n: int, masks: ActionMasks, rng: np.random.Generator) -> list[Tree]:
    trees = {gold: None}
    for _ in range(50 * n):
        if len(trees) == n:
            break
        trees.setdefault(random_tree(gold.leaves(), masks, rng), None)
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
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)

    if args.device == "cuda" and not torch.cuda.is_available():
        parser.error("--device cuda: CUDA is not available on this machine")
    model, valid = cpu_small_model(args.preset, args.device)
    masks = ActionMasks(model.vocab)
    rng = np.random.default_rng(0)
    golds = [t for t in valid if 5 <= len(t.leaves()) <= args.max_words][: args.sentences]
    sentences = [t.leaves() for t in golds]
    sets = [proposals(t, args.proposals, masks, rng) for t in golds]
    n_trees = sum(len(s) for s in sets)
    words = sum(len(s) for s in sentences)
    print(f"model: random {args.preset} TG, vocab {len(model.vocab)}; device {args.device}; torch threads "
          f"{torch.get_num_threads()}")
    print(f"{len(sentences)} sentences ({words} words, {words / len(sentences):.1f} per sentence), "
          f"{n_trees} proposal trees ({n_trees / len(sentences):.1f} per sentence)")
    lengths = [[len(c.example) for c in TreeScorer(model, None, n=None).candidates(k, s, ts, None)[0]]
               for k, (s, ts) in enumerate(zip(sentences, sets))]
    used = sum(sum(x) for x in lengths) / sum(len(x) * max(x) for x in lengths)
    print(f"encoded tree length {np.mean([v for x in lengths for v in x]):.1f} tokens on average; "
          f"{used:.0%} of a sentence's batch is not padding")

    batched = TreeScorer(model, None, n=None, batch_size=args.proposals)
    one = TreeScorer(model, None, method="gold", batch_size=1)
    t_batched, scores = best_time(lambda: batched.score_trees(sentences, sets), args.repeats)
    t_one, singles = best_time(lambda: [one.score_trees([s] * len(ts), [[t] for t in ts])
                                        for s, ts in zip(sentences, sets)], args.repeats)
    for score, single in zip(scores, singles):
        totals = torch.tensor([s.total for s in single], dtype=torch.float64)
        assert abs(score.total - float(torch.logsumexp(totals, 0))) < 1e-4
    print(f"proposals batched:        {n_trees / t_batched:8.1f} trees/s  ({t_batched:.2f} s)")
    print(f"proposals one at a time:  {n_trees / t_one:8.1f} trees/s  ({t_one:.2f} s)")
    print(f"sentences/s (N = {n_trees / len(sentences):.0f} trees each): batched {len(sentences) / t_batched:.2f}, "
          f"one at a time {len(sentences) / t_one:.2f}")
    print(f"batched / one-at-a-time speed-up: {t_one / t_batched:.1f}x")

    beam = BeamScorer(model, args.beam, args.word_beam, args.max_actions)
    subset = sentences[: args.beam_sentences]
    t_beam, _ = best_time(lambda: beam.score(subset), 1)
    beam_words = sum(len(s) for s in subset)
    print(f"beam (K={args.beam}, K_w={args.word_beam}, max_actions={args.max_actions}): "
          f"{len(subset) / t_beam:.3f} sentences/s, {beam_words / t_beam:.2f} words/s "
          f"({len(subset)} sentences, {beam_words} words, {t_beam:.1f} s)")


if __name__ == "__main__":
    main()
