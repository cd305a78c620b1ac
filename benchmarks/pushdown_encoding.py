"""Speed of the Pushdown encoding and of the beam-search stack bookkeeping, against straightforward
implementations of the official procedure measured in the same run.

1. **Encoding** all PTB-sample trees (cleaned; 3,914 sentences): attachment labels + the dense depth tape.
   ``encode``: one iterative walk of the cleaned tree collecting the spans of the binarized tree's nodes
   (unary nodes transparent, right factoring implicit); the tape from a 2-D difference array and two
   cumulative sums. ``reference``: as the official code does it, build the collapsed, right-factored tree
   (``pushdown_tree``), derive its shift/reduce action list, simulate a stack for the labels, then run
   Algorithm 1 token by token with Python lists of constituents, copying each depth row into the tape.
   Also shown: the reference without its tree-building step, on the sentences and on documents of
   ``--doc-sentences`` consecutive trees under one root (Appendix B's multi-sentence windows, where the
   O(T^2) tape dominates). Outputs are checked equal on every tree.
2. **Beam bookkeeping** (word-synchronous beam of ``--beam`` hypotheses over the first ``--beam-sentences``
   sentences, a fixed random script of origins and legal labels): ``StackStates.select`` + ``attach``
   (vectorised over the beam) against the official search's per-hypothesis ``copy.deepcopy`` of stacks and
   depth rows followed by Algorithm 1 in Python. Final depth rows are checked equal.

Times are best of ``--repeats``. Run: ``PYTHONPATH=. python benchmarks/pushdown_encoding.py``.
"""

from __future__ import annotations

import argparse
import copy
import time
from pathlib import Path

import numpy as np

from lightning_modules.data.tree import Tree, clean, read_bracketed
from lightning_modules.families.pushdown.encoding import encode, pushdown_tree
from lightning_modules.families.pushdown.stack_states import StackStates

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "ptb_nltk_sample" / "combined"


# -- reference implementations (the official procedure, written plainly) -------------------------------
def reference_encode(binary: Tree) -> tuple[list[str], list[int], np.ndarray]:
    leaves: list[str] = []
    actions: list[str] = []

    def walk(node: Tree | str) -> None:
        if isinstance(node, str):
            leaves.append(node)
            actions.append("shift")
        elif len(node.children) == 1:
            walk(node.children[0])
        else:
            for child in node.children:
                walk(child)
            actions.append("reduce")

    walk(binary)
    labels, stack, a = [], [], 0
    for word in range(len(leaves)):  # actions[a] is this word's shift; the reduces after it pop the stack
        a += 1
        top = None
        while a < len(actions) and actions[a] == "reduce":
            top = stack.pop()
            a += 1
        labels.append(word + 1 if top is None else top + 1)
        stack.append(word)
    attachment = [0, *labels, 0]
    return leaves, attachment, reference_tape(attachment)


def reference_tape(attachment: list[int]) -> np.ndarray:
    n = len(attachment)
    tape = np.zeros((n, n), dtype=np.int64)
    depth = [0] * n
    stack: list[list[int]] = [[0]]
    for k in range(1, n - 1):
        algorithm_1(stack, depth, k, attachment[k])
        tape[k] = depth
    tape[n - 1] = tape[n - 2]
    return tape


def algorithm_1(stack: list[list[int]], depth: list[int], k: int, label: int) -> None:
    if label == k:
        stack.append([k])
        return
    constituent = [k]
    while True:
        top = stack.pop()
        constituent = top + constituent
        for c in constituent:
            depth[c] += 1
        if top[-1] == label:
            break
    stack.append(constituent)


def reference_beam(n: int, script: list[tuple[np.ndarray, np.ndarray]]) -> np.ndarray:
    stacks: list[list[list[int]]] = [[[0]]]
    depths = np.zeros((1, n + 2), dtype=np.int64)
    for k, (origins, labels) in enumerate(script, start=1):
        stacks = [copy.deepcopy(stacks[o]) for o in origins]
        depths = np.stack([copy.deepcopy(depths[o]) for o in origins])
        for b, label in enumerate(labels.tolist()):
            row = depths[b].tolist()
            algorithm_1(stacks[b], row, k, label)
            depths[b] = row
    return depths


def vectorised_beam(n: int, script: list[tuple[np.ndarray, np.ndarray]]) -> np.ndarray:
    states = StackStates(n)
    for origins, labels in script:
        states = states.select(origins)
        states.attach(labels)
    return states.depth


def beam_script(n: int, beam: int, rng: np.random.Generator) -> list[tuple[np.ndarray, np.ndarray]]:
    """Per token: which hypotheses survive (origins) and a random legal label for each."""
    states, script = StackStates(n), []
    for _ in range(n):
        origins = rng.integers(0, len(states), size=beam)
        legal = states.legal()[origins]
        labels = np.array([rng.choice(np.flatnonzero(row)) for row in legal])
        script.append((origins, labels))
        states = states.select(origins)
        states.attach(labels)
    return script


def best_of(repeats: int, fn, *args) -> float:
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn(*args)
        times.append(time.perf_counter() - t0)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--beam", type=int, default=300)
    parser.add_argument("--beam-sentences", type=int, default=40)
    parser.add_argument("--doc-sentences", type=int, default=20)
    args = parser.parse_args()
    files = sorted(DATA.glob("wsj_*.mrg"))
    trees = [clean(t) for f in files for _, t in read_bracketed(f)]
    binary = [pushdown_tree(t) for t in trees]
    words = sum(len(t.leaves()) for t in trees)
    for t, b in zip(trees, binary):  # same output before timing anything
        example, (leaves, attachment, tape) = encode(t), reference_encode(b)
        assert list(example.leaves) == leaves and example.attachment.tolist() == attachment
        assert np.array_equal(example.stack_tape(), tape)

    print(f"1. encoding {len(trees)} cleaned PTB-sample trees ({words} words), best of {args.repeats}")
    t_fast = best_of(args.repeats, lambda: [encode(t).stack_tape() for t in trees])
    t_ref = best_of(args.repeats, lambda: [reference_encode(pushdown_tree(t)) for t in trees])
    t_ref_only = best_of(args.repeats, lambda: [reference_encode(b) for b in binary])
    print(f"   encode + stack_tape: {t_fast:.3f} s   reference: {t_ref:.3f} s   ratio: {t_ref / t_fast:.1f}x")
    print(f"   reference from prebuilt binarized trees (labels + tape only): {t_ref_only:.3f} s   ratio: "
          f"{t_ref_only / t_fast:.1f}x")
    size = args.doc_sentences
    docs = [Tree("DOC", tuple(trees[i : i + size])) for i in range(0, len(trees), size)]
    binary_docs = [pushdown_tree(d) for d in docs]
    for d, b in zip(docs, binary_docs):
        assert np.array_equal(encode(d).stack_tape(), reference_encode(b)[2])
    t_fast = best_of(args.repeats, lambda: [encode(d).stack_tape() for d in docs])
    t_ref_only = best_of(args.repeats, lambda: [reference_encode(b) for b in binary_docs])
    print(f"   {len(docs)} documents of {size} trees ({words / len(docs):.0f} words each): encode + "
          f"stack_tape {t_fast:.3f} s   reference from prebuilt trees: {t_ref_only:.3f} s   ratio: "
          f"{t_ref_only / t_fast:.1f}x")

    rng = np.random.default_rng(0)
    sentences = [len(t.leaves()) for t in trees[: args.beam_sentences]]
    scripts = [beam_script(n, args.beam, rng) for n in sentences]
    for n, script in zip(sentences, scripts):
        assert np.array_equal(vectorised_beam(n, script), reference_beam(n, script))
    steps = sum(sentences)
    print(f"2. beam bookkeeping: beam {args.beam}, {len(sentences)} sentences, {steps} word steps, "
          f"best of {args.repeats}")
    t_vec = best_of(args.repeats, lambda: [vectorised_beam(n, s) for n, s in zip(sentences, scripts)])
    t_copy = best_of(args.repeats, lambda: [reference_beam(n, s) for n, s in zip(sentences, scripts)])
    print(f"   StackStates: {t_vec:.3f} s ({t_vec / steps * 1e6:.0f} us/step)   deepcopy + Algorithm 1: "
          f"{t_copy:.3f} s ({t_copy / steps * 1e6:.0f} us/step)   ratio: {t_copy / t_vec:.1f}x")


if __name__ == "__main__":
    main()
