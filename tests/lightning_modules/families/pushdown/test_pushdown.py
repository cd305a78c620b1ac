"""Pushdown encoding against the golden vectors of reference-impls §2.2, the paper's worked examples and the
official preprocessing, plus invariants on random trees and the PTB sample.

Golden vectors: ``NOTES`` are the notes' (produced by running the official functions); ``OFFICIAL`` were
produced here by re-running the official pipeline (``post_process_op`` + nltk 3.9.1 ``chomsky_normal_form``
+ ``compute_attachment_labels_text`` + ``compute_stack_tape(with_depth_info=True)``) on hand-written trees.
Tape rows are written one digit per token.
"""

from __future__ import annotations

from math import comb
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lightning_modules.data.tree import Tree, clean, parse_tree, read_bracketed, to_bracketed
from lightning_modules.families.pushdown.encoding import (
    attachments_to_tree,
    encode,
    merge_pieces,
    pushdown_tree,
    stack_tape,
    unlabelled,
)
from lightning_modules.families.pushdown.stack_states import StackStates


def rows(text: str) -> list[list[int]]:
    return [[int(c) for c in row] for row in text.split()]


# (tree, attachment, tape rows)
NOTES = [
    ("(X (X a b) (X c d))", [0, 1, 1, 3, 2, 0], "000000 000000 011000 011000 022220 022220"),
    ("(X a (X b (X c d)))", [0, 1, 2, 3, 1, 0], "000000 000000 000000 000000 012330 012330"),
    ("(X (X (X a b) c) d)", [0, 1, 1, 2, 3, 0], "000000 000000 011000 022100 033210 033210"),
    ("(S (NP (DT The) (NN man)) (VP (VBZ likes) (NNS apples)))", [0, 1, 1, 3, 2, 0],
     "000000 000000 011000 011000 022220 022220"),
]
OFFICIAL = [
    ("(ROOT (S (NP (DT The) (NN dog)) (VP (VBZ is) (ADJP (JJ happy)))))", [0, 1, 1, 3, 2, 0],
     "000000 000000 011000 011000 022220 022220"),
    ("(S (NP (DT The) (NN dog)) (VP (IN in) (NP (DT the) (NN park))))", [0, 1, 1, 3, 4, 2, 0],
     "0000000 0000000 0110000 0110000 0110000 0222330 0222330"),
    ("( (S (NP (DT the) (JJ hungry) (NN cat)) (VP (VBZ meows)) (. .)) )", [0, 1, 2, 1, 4, 3, 0],
     "0000000 0000000 0000000 0122000 0122000 0233220 0233220"),
    ("(S (NP (NP (DT the) (NN cat)) (PP (IN on) (NP (DT the) (NN mat)))) (VP (VBD sat) (ADVP (RB quietly)))"
     " (. .))", [0, 1, 1, 3, 4, 2, 6, 6, 5, 0],
     "0000000000 0000000000 0110000000 0110000000 0110000000 0222330000 0222330000 0222331100 0333443320 "
     "0333443320"),
    ("(S (NP (NNP Pierre) (NNP Vinken) (, ,) (ADJP (NNS years) (JJ old)) (, ,)) (VP (MD will) (VP (VB join)))"
     " (. .))", [0, 1, 2, 3, 4, 4, 1, 7, 7, 6, 0],
     "00000000000 00000000000 00000000000 00000000000 00000000000 00001100000 01235540000 01235540000 "
     "01235541100 02346653320 02346653320"),
]


@pytest.mark.parametrize(("text", "attachment", "tape"), NOTES + OFFICIAL)
def test_golden_vectors(text: str, attachment: list[int], tape: str) -> None:
    example = encode(parse_tree(text))
    assert example.tokens == ["<s>", *parse_tree(text).leaves(), "<eos>"]
    assert example.attachment.tolist() == attachment
    assert example.stack_tape().tolist() == rows(tape)


def test_training_targets_of_the_notes() -> None:
    # the model predicts word t+1 and its attachment at input position t: targets are attachment[1:]
    assert encode(parse_tree(NOTES[0][0])).attachment[1:].tolist() == [1, 1, 3, 2, 0]


def test_paper_figure_2() -> None:
    """[The dog] is -> [1, 1, 0]; happy attaches to dog, forming [[The dog] [is happy]]: [2, 2, 2, 2]."""
    example = encode(parse_tree("(S (NP (DT The) (NN dog)) (VP (VBZ is) (ADJP (JJ happy))))"))
    tape = example.stack_tape()
    assert tape[3, 1:4].tolist() == [1, 1, 0]
    assert example.attachment[4] == 2 and example.tokens[2] == "dog"
    assert tape[4, 1:5].tolist() == [2, 2, 2, 2]


def test_paper_stale_tape_example() -> None:
    """§3.4: in [[The dog] [in [the park]]], 'in' sees depths [1, 1, 0], 'park' sees them as [2, 2, 2]."""
    tape = encode(parse_tree("(S (NP The dog) (PP in (NP the park)))")).stack_tape()
    assert tape[3, 1:4].tolist() == [1, 1, 0]
    assert tape[5, 1:4].tolist() == [2, 2, 2]


def abracadabra(word: str, index: int) -> list[str]:
    return ["ab", "ra", "ca", "dabra"] if word == "abracadabra" else [word]


def test_appendix_c_subword_pieces() -> None:
    """A word of several pieces is a right-branching subtree of them: (ab (ra (ca dabra)))."""
    alone = encode(parse_tree("(S (NN abracadabra))"), abracadabra)
    assert alone.tokens == ["<s>", "ab", "ra", "ca", "dabra", "<eos>"]
    assert alone.attachment.tolist() == [0, 1, 2, 3, 1, 0]
    assert alone.stack_tape().tolist() == rows("000000 000000 000000 000000 012330 012330")
    assert to_bracketed(attachments_to_tree(alone.attachment, alone.leaves)) == "(X ab (X ra (X ca dabra)))"
    # official re-run: "(S (NP (DT an) (NN abracadabra)) (VP (VBZ works)))" with the same split
    inside = encode(parse_tree("(S (NP (DT an) (NN abracadabra)) (VP (VBZ works)))"), abracadabra)
    assert inside.tokens == ["<s>", "an", "ab", "ra", "ca", "dabra", "works", "<eos>"]
    assert inside.attachment.tolist() == [0, 1, 2, 3, 4, 1, 5, 0]
    assert inside.stack_tape().tolist() == rows("00000000 " * 5 + "01234400 02345510 02345510")


def test_split_sees_word_indices_and_rejects_empty_pieces() -> None:
    seen: list[tuple[str, int]] = []
    encode(parse_tree("(S (NP a b) c)"), lambda w, i: seen.append((w, i)) or [w])
    assert seen == [("a", 0), ("b", 1), ("c", 2)]
    with pytest.raises(ValueError, match="no pieces"):
        encode(parse_tree("(S a b)"), lambda w, i: [])


@pytest.mark.parametrize(("text", "expected"), [
    ("(X (X a b) (X c d))", "(X (X a b) (X c d))"),
    ("(X a (X b (X c d)))", "(X a (X b (X c d)))"),
    ("(X (X (X a b) c) d)", "(X (X (X a b) c) d)"),
])
def test_decoding_inverts_the_golden_labels(text: str, expected: str) -> None:
    example = encode(parse_tree(text))
    assert to_bracketed(attachments_to_tree(example.attachment, example.leaves)) == expected


def test_tree_is_collapsed_and_right_factored_as_nltk() -> None:
    tree = pushdown_tree(parse_tree("(ROOT (S (NP (DT a) (JJ b) (NN c) (NN d)) (VP (VBZ e))))"))
    assert to_bracketed(tree) == ("(ROOT+S (NP (DT a) (NP|<JJ-NN-NN> (JJ b) (NP|<NN-NN> (NN c) (NN d)))) "
                                  "(VP+VBZ e))")
    assert encode(parse_tree("(A a b c d)")).attachment.tolist() == [0, 1, 2, 3, 1, 0]  # (a (b (c d)))


def test_one_word() -> None:
    example = encode(parse_tree("(ROOT (S (NP (NN Yes))))"))
    assert example.tokens == ["<s>", "Yes", "<eos>"]
    assert example.attachment.tolist() == [0, 1, 0]
    assert example.stack_tape().tolist() == [[0, 0, 0]] * 3
    assert attachments_to_tree(example.attachment, example.leaves) == "Yes"


def test_decoding_rejects_labels_off_the_stack() -> None:
    with pytest.raises(ValueError, match="not the end of a constituent"):
        attachments_to_tree([0, 1, 1, 1, 0], ["a", "b", "c"])  # b closed (a b): 1 is no longer an end
    with pytest.raises(ValueError, match="expected"):
        attachments_to_tree([0, 1, 1], ["a", "b"])


def test_eos_closes_what_the_last_token_left_open() -> None:
    # the official decoder's behaviour on a model's labels: a last token that shifts is closed by <eos>
    assert to_bracketed(attachments_to_tree([0, 1, 2, 3, 0], ["a", "b", "c"])) == "(X a (X b c))"
    assert to_bracketed(attachments_to_tree([0, 1, 1, 3, 0], ["a", "b", "c"])) == "(X (X a b) c)"


# -- StackStates ----------------------------------------------------------------------------------------
def replay(example) -> list[np.ndarray]:
    """Tape rows from StackStates fed the gold labels, checking each label is legal (both modes)."""
    n = len(example.leaves)
    states = StackStates(n)
    out = [states.depth[0].copy()]
    for k in range(1, n + 1):
        label = int(example.attachment[k])
        assert states.legal()[0, label] and states.legal(close_at_last=True)[0, label]
        states.attach([label])
        out.append(states.depth[0].copy())
    assert states.attachment[0].tolist() == example.attachment.tolist()
    return [*out, out[-1]]  # the <eos> row is the last token's


@pytest.mark.parametrize("text", [t for t, _, _ in NOTES + OFFICIAL])
def test_stack_states_replay_the_golden_tapes(text: str) -> None:
    example = encode(parse_tree(text))
    assert np.array_equal(np.stack(replay(example)), example.stack_tape())


def test_legal_attachments_are_the_official_unreduced_positions() -> None:
    states = StackStates(4)
    assert states.legal().tolist() == [[False, True]]  # the first token can only shift
    states.attach([1])
    states.attach([2])  # a b
    assert states.legal().tolist() == [[False, True, True, True]]
    states.attach([1])  # (a b c): official reduced set {1, 2}
    assert states.legal().tolist() == [[False, False, False, True, True]]
    assert states.legal(close_at_last=True).tolist() == [[False, False, False, True, False]]
    states.attach([3])
    assert states.depth.tolist() == [[0, 2, 3, 3, 1, 0]]  # ((a (b c)) d)
    with pytest.raises(ValueError, match="all 4 tokens are in"):
        states.legal()


def test_illegal_attachments_raise() -> None:
    states = StackStates(3, size=2)
    states.attach([1, 1])
    states.attach([1, 2])
    for labels in ([1, 2], [0, 3], [4, 3], [-1, 3], [3, 0]):  # (a b) and a, b so far
        with pytest.raises(ValueError, match="cannot attach"):
            states.attach(labels)
    with pytest.raises(ValueError, match="expected 2 labels"):
        states.attach([3])
    states.attach([3, 2])
    assert states.depth.tolist() == [[0, 1, 1, 0, 0], [0, 0, 1, 1, 0]]
    with pytest.raises(ValueError, match="at least one token"):
        StackStates(0)


def test_select_copies_so_extensions_stay_independent() -> None:
    states = StackStates(3)
    states.attach([1])
    states.attach([2])
    beam = states.select([0, 0, 0])
    beam.attach([1, 2, 3])
    assert states.position == 2 and states.depth.tolist() == [[0, 0, 0, 0, 0]]
    assert beam.depth.tolist() == [[0, 1, 2, 2, 0], [0, 0, 1, 1, 0], [0, 0, 0, 0, 0]]
    again = beam.select([2, 0])
    again.depth[:] = 7
    assert beam.depth[2].tolist() == [0, 0, 0, 0, 0]
    assert beam.attachment.tolist() == [[0, 1, 2, 1, 0], [0, 1, 2, 2, 0], [0, 1, 2, 3, 0]]


def enumerate_all(n: int, close_at_last: bool) -> StackStates:
    """Every legal label sequence for n tokens, expanded breadth-first as a beam without pruning."""
    states = StackStates(n)
    for _ in range(n):
        origin, label = np.nonzero(states.legal(close_at_last))
        states = states.select(origin)
        states.attach(label)
    return states


@pytest.mark.parametrize("n", [1, 2, 3, 4, 5, 6])
def test_label_sequences_and_binary_trees(n: int) -> None:
    leaves = [f"w{i}" for i in range(n)]
    closing = enumerate_all(n, close_at_last=True)
    trees = [to_bracketed(attachments_to_tree(a, leaves)) for a in closing.attachment.tolist()]
    catalan = comb(2 * (n - 1), n - 1) // n
    assert len(trees) == len(set(trees)) == catalan  # one-to-one with the binary trees
    for b, tree in enumerate(trees):
        example = encode(parse_tree(tree) if n > 1 else Tree("X", (tree,)))
        assert example.attachment.tolist() == closing.attachment[b].tolist()
        assert np.array_equal(closing.depth[b], example.stack_tape()[-1])
    official = enumerate_all(n, close_at_last=False)  # the last token may also leave the stack open
    assert {to_bracketed(attachments_to_tree(a, leaves)) for a in official.attachment.tolist()} == set(trees)
    assert len(official) >= catalan


# -- properties on random trees -------------------------------------------------------------------------
LABELS = st.sampled_from(["S", "NP", "VP", "PP", "-NONE-"])
WORDS = st.sampled_from(["the", "cat", "sat", "on", "a", "mat", "-LRB-"])
PRETERMINAL = st.builds(lambda tag, word: Tree(tag, (word,)), st.sampled_from(["DT", "NN", "IN"]), WORDS)


def _node(children: st.SearchStrategy) -> st.SearchStrategy[Tree]:
    return st.builds(Tree, LABELS, st.lists(children, min_size=1, max_size=5).map(tuple))


TREES = st.one_of(st.recursive(PRETERMINAL, _node, max_leaves=30),  # PTB style, with unary chains
                  _node(st.recursive(WORDS, _node, max_leaves=30)))  # words directly under phrases
PROPERTY = settings(max_examples=150, deadline=None)


def algorithm_1(attachment: np.ndarray) -> np.ndarray:
    """The paper's Algorithm 1 literally: a stack of constituents (lists of positions), a row per prefix."""
    n = len(attachment) - 2
    tape = np.zeros((n + 2, n + 2), dtype=np.int64)
    stack: list[list[int]] = []
    for k in range(1, n + 1):
        tape[k] = tape[k - 1]
        constituent, r = [k], int(attachment[k])
        if r != k:
            while True:
                top = stack.pop()
                constituent = top + constituent
                tape[k, constituent] += 1
                if top[-1] == r:
                    break
        stack.append(constituent)
    tape[n + 1] = tape[n]
    return tape


def leaf_depths(tree: Tree | str, depth: int = 0) -> list[int]:
    if isinstance(tree, str):
        return [depth]
    return [d for c in tree.children for d in leaf_depths(c, depth + 1)]


def check(tree: Tree) -> None:
    example = encode(tree)
    n = len(example.leaves)
    tape = example.stack_tape()
    assert example.tokens[1:-1] == tree.leaves()
    assert tape.shape == (n + 2, n + 2)
    # consistent with the attachments: Algorithm 1, and StackStates one token at a time
    assert np.array_equal(tape, algorithm_1(example.attachment))
    assert np.array_equal(tape, np.stack(replay(example)))
    # a row changes exactly when its token reduces, on a span ending at the token
    for k in range(1, n + 1):
        changed = np.flatnonzero(tape[k] != tape[k - 1])
        if example.attachment[k] == k:
            assert changed.size == 0
        else:
            assert changed.tolist() == list(range(changed[0], k + 1)) and changed[0] <= example.attachment[k]
    # decoding gives back the binarized tree
    binary = unlabelled(pushdown_tree(tree))
    assert attachments_to_tree(example.attachment, example.leaves) == binary
    # bounds: depths only grow, never exceed prefix length - 1, and <s>, <eos>, future tokens stay 0
    assert (np.diff(tape, axis=0) >= 0).all()
    assert (tape[:, 0] == 0).all() and (tape[:, -1] == 0).all()
    assert (np.triu(tape, 1) == 0).all()
    assert (tape.max(axis=1) <= np.maximum(np.arange(n + 2) - 1, 0)).all()
    assert (tape[-1] == tape[-2]).all() and (tape[0] == 0).all()
    # after the last token, each token's depth is its depth in the binary tree
    assert tape[-1, 1:-1].tolist() == leaf_depths(binary)
    labels = example.attachment[1:-1]
    assert ((labels >= 1) & (labels <= np.arange(1, n + 1))).all()


@PROPERTY
@given(tree=TREES)
def test_random_trees(tree: Tree) -> None:
    check(tree)


def chunks(word: str, index: int) -> list[str]:
    """A deterministic stand-in for BPE: pieces of at most 2 characters (odd-numbered words only)."""
    return [word[i : i + 2] for i in range(0, len(word), 2)] if index % 2 else [word]


@PROPERTY
@given(tree=TREES)
def test_random_trees_with_pieces(tree: Tree) -> None:
    example = encode(tree, chunks)
    binary = unlabelled(pushdown_tree(tree, chunks))
    assert list(example.leaves) == (binary.leaves() if isinstance(binary, Tree) else [binary])
    assert attachments_to_tree(example.attachment, example.leaves) == binary
    assert np.array_equal(example.stack_tape(), algorithm_1(example.attachment))
    # Appendix C: merging the pieces of the decoded tree gives the binarized tree over words
    words = tree.leaves()
    word_of = [i for i, w in enumerate(words) for _ in chunks(w, i)]
    assert merge_pieces(attachments_to_tree(example.attachment, example.leaves), word_of, words) == \
        unlabelled(pushdown_tree(tree))


def test_appendix_c_merge_and_pieces_that_are_no_constituent() -> None:
    x = lambda a, b: Tree("X", (a, b))  # noqa: E731
    assert merge_pieces(x("ab", x("ra", x("ca", "dabra"))), [0, 0, 0, 0], ["abracadabra"]) == "abracadabra"
    assert merge_pieces(x("an", x(x("ab", "ra"), "works")), [0, 1, 1, 2], ["an", "abra", "works"]) == \
        x("an", x("abra", "works"))
    with pytest.raises(ValueError, match="word 1 .'abra'. do not form a constituent"):
        merge_pieces(x(x("an", "ab"), x("ra", "works")), [0, 1, 1, 2], ["an", "abra", "works"])


@settings(max_examples=60, deadline=None)
@given(tree=TREES, data=st.data())
def test_beam_of_random_decisions_matches_single_hypotheses(tree: Tree, data: st.DataObject) -> None:
    """Batched states equal the same label sequences run one hypothesis at a time (Algorithm 1)."""
    n = len(tree.leaves())
    close_at_last = data.draw(st.booleans())
    beam = StackStates(n, size=3)
    for _ in range(n):
        legal = beam.legal(close_at_last)
        origins = [data.draw(st.integers(0, len(beam) - 1)) for _ in range(3)]
        beam = beam.select(origins)
        labels = [data.draw(st.sampled_from(np.flatnonzero(legal[o]).tolist())) for o in origins]
        beam.attach(labels)
    for b in range(3):
        labels = beam.attachment[b]
        assert np.array_equal(beam.depth[b], algorithm_1(labels)[-1])
        decoded = attachments_to_tree(labels, [f"w{i}" for i in range(n)])  # legal labels always decode
        if close_at_last:  # the labels are then exactly the gold labels of the decoded tree
            assert encode(decoded if n > 1 else Tree("X", (decoded,))).attachment.tolist() == labels.tolist()


def test_stack_tape_of_no_spans() -> None:
    assert stack_tape(np.zeros((0, 2), dtype=np.int64), 3).tolist() == [[0] * 3] * 3


# -- real data ------------------------------------------------------------------------------------------
def test_ptb_sample(shared_data: Path) -> None:
    """The invariants of ``check`` on every fifth tree of the PTB sample (about 780 trees, ~2 s)."""
    files = sorted((shared_data / "ptb_nltk_sample" / "combined").glob("wsj_*.mrg"))
    trees = [clean(t) for f in files for _, t in read_bracketed(f)][::5]
    assert len(trees) > 700
    for tree in trees:
        check(tree)
