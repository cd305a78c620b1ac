"""Dyck data for the Pushdown Layers warm-up: sampler, silver parse vs the official labels, test sets,
closing-bracket accuracy, files.

``official_*`` below re-implement, step by step, the official ``data_utils/dyck_helpers.py`` procedures
``get_stack_info``, ``compute_stack_labels`` (with ``accomodate_sos`` and ``convert_to_softmax_labels``)
and ``compute_stack_tape``, to check ``encode_dyck`` against them on many sampled strings and prefixes.
"""

from __future__ import annotations

import re
from collections import Counter

import numpy as np
import pytest
from scipy.stats import chisquare

from lightning_modules.data.tree import Tree
from lightning_modules.errors import InputError
from lightning_modules.families.pushdown.dyck import (
    END,
    bracket_types,
    check_string,
    closing_bracket_accuracy,
    closing_prefixes,
    dependencies,
    depth_generalization_set,
    encode_dyck,
    held_out_sets,
    long_range_set,
    max_depth,
    next_closing,
    open_stack,
    pdfa_distribution,
    read_prefixes,
    read_strings,
    sample_strings,
    silver_parse,
    silver_stack,
    stack_paths,
    write_prefixes,
    write_strings,
)
from lightning_modules.families.pushdown.encoding import encode

# three short lines of the official data_utils/dyck_data/k-20_d-10_val.txt
VAL_LINES = [
    "(m (h (f f) h) m) END",
    "(h h) (n (i (m m) i) n) END",
    "(n n) (f f) (c (f f) c) END",
]


# -- the official procedures, re-implemented ----------------------------------------------------------
def _closes(item: object, word: str) -> bool:
    return isinstance(item, str) and "(" in item and ")" in word and item[-1] == word[0]


def official_merges_before(words: list[str]) -> list[int]:
    """``get_stack_info``: the running count of merges after each word."""
    stack: list[object] = []
    counts, merges = [], 0
    for word in words:
        if "(" in word:
            stack.append(word)
        else:
            merged = None
            while not _closes(stack[-1], word):  # completed constituents, joined right to left
                top = stack.pop()
                if merged is not None:
                    merges += 1
                merged = top if merged is None else (top, merged)
            opening = stack.pop()
            merges += 1 if merged is None else 2
            stack.append((opening, word) if merged is None else ((opening, merged), word))
        counts.append(merges)
    return counts


def official_labels(words: list[str]) -> np.ndarray:
    """``compute_stack_labels(s)[1]``: attachment per position of ``<s>`` + words (length n + 1)."""
    totals = official_merges_before(words)
    n = len(totals)
    groups: list[list[int]] = []
    done = 0
    available = set(range(n))
    attached_by = np.zeros(n)
    for idx, total in enumerate(totals):
        groups.append([idx])
        while done < total:
            below = groups[-2]
            if len(below) == 1 and below[0] in available:
                attached_by[below[0]] = idx
                available.remove(below[0])
            top = groups.pop()
            groups.append(groups.pop() + top)
            done += 1
    for elem in range(n - 1):
        if elem in available:
            attached_by[elem] = -1
    shifted = [0] + [p + 1 for p in attached_by[:-1]] + [0]  # accomodate_sos
    onehot = np.zeros((len(shifted), len(shifted)))  # convert_to_softmax_labels
    for col, row in enumerate(shifted):
        if int(row) != 0:
            onehot[int(row)][col] = 1.0
    for row in range(len(shifted)):
        if onehot[row].sum() == 0:
            onehot[row][row] = 1.0
    return onehot.argmax(axis=1)


def official_depths(targets: np.ndarray) -> np.ndarray:
    """``compute_stack_tape`` before its final ``> 0``: row i = reduce counts after positions 0..i."""
    size = 1 + len(targets)
    rows = np.zeros((size, size))
    depth = np.zeros(size)
    stack: list[object] = [0]
    for idx in range(1, size):
        rows[idx - 1] = depth
        label = targets[idx - 1]
        if label == idx:
            stack.append([idx])
            continue
        constituent = [idx]
        while len(stack) > 1 and label not in stack[-1]:
            constituent = stack.pop() + constituent
            depth[constituent] += 1
        constituent = stack.pop() + constituent
        depth[constituent] += 1
        stack.append(constituent)
    rows[size - 1] = depth
    return rows


# -- tokens and the sampler ---------------------------------------------------------------------------
def test_bracket_types_follow_the_official_identifier_iterator():
    assert bracket_types(3) == ["a", "b", "c"]
    names = bracket_types(28)
    assert names[19] == "t" and names[25:] == ["z", "aa", "bb"]


def test_sampler_is_deterministic_given_the_seed():
    assert sample_strings(30, seed=3) == sample_strings(30, seed=3)
    assert sample_strings(30, seed=3) != sample_strings(30, seed=4)


def test_samples_are_well_formed_within_depth_and_length():
    for k, m, min_length, max_length in [(20, 10, 6, None), (3, 2, 10, 40), (2, 1, 1, None)]:
        strings = sample_strings(300, k=k, m=m, min_length=min_length, max_length=max_length, seed=0)
        names = set(bracket_types(k))
        for s in strings:
            check_string(s)
            assert max_depth(s) <= m
            assert len(s) >= max(min_length, 2) and len(s) % 2 == 0
            assert max_length is None or len(s) <= max_length
            assert {tok.strip("()") for tok in s} <= names
        assert max(max_depth(s) for s in strings) == m  # the bound is reached, not just respected


def test_pdfa_distributions_sum_to_one():
    for stack, length in [((), 0), ((), 8), (("a",), 1), (("a", "b"), 2), (("a", "b", "c"), 3)]:
        dist = pdfa_distribution(stack, k=3, m=3, length=length, min_length=6)
        assert sum(dist.values()) == pytest.approx(1.0)
    assert pdfa_distribution(("a", "c", "b"), k=3, m=3, length=3, min_length=6) == {"b)": 1.0}


def test_empirical_next_token_distribution_matches_the_pdfa():
    k, m, min_length = 3, 3, 6
    strings = sample_strings(3000, k=k, m=m, min_length=min_length, seed=11)
    # (stack, at least min_length tokens so far: only told apart at the empty stack)
    watched = {((), False): Counter(), ((), True): Counter(), (("a",), None): Counter(),
               (("b", "c"), None): Counter(), (("a", "b", "a"), None): Counter()}
    for s in strings:
        stack: list[str] = []
        for i, token in enumerate([*s, END]):
            key = (tuple(stack), i >= min_length if not stack else None)
            if key in watched:
                watched[key][token] += 1
            if token != END:
                if token.startswith("("):
                    stack.append(token[1:])
                else:
                    stack.pop()
    for (stack, long_enough), counts in watched.items():
        dist = pdfa_distribution(stack, k, m, length=min_length if long_enough else 0, min_length=min_length)
        assert set(counts) <= set(dist), (stack, counts)
        total = sum(counts.values())
        assert total >= 200, (stack, total)
        if len(dist) > 1:
            observed = [counts[t] for t in dist]
            expected = [p * total for p in dist.values()]
            assert chisquare(observed, expected).pvalue > 1e-3, (stack, counts, dist)


def test_held_out_sets_split_on_seen_stack_paths():
    assert stack_paths("(a a) (b (c c) b) (d d)".split()) == [(1,), (1, 2, 1), (1,)]
    train = sample_strings(300, k=3, m=4, seed=12)
    seen = {path for s in train for path in stack_paths(s)}
    iid, ood = held_out_sets(train, 30, k=3, m=4, seed=13)
    assert len(iid) == len(ood) == 30
    assert all(set(stack_paths(s)) <= seen and s not in train for s in iid)
    assert all(not set(stack_paths(s)) <= seen for s in ood)
    assert held_out_sets(train, 30, k=3, m=4, seed=13) == (iid, ood)


# -- silver parse vs the official labels --------------------------------------------------------------
def test_silver_parse_golden():
    s = "(m (h (f f) h) m)".split()
    assert silver_parse(s) == Tree("S", (Tree("m", ("(m", Tree("h", ("(h", Tree("f", ("(f", "f)")), "h)")),
                                                    "m)")),))
    example = encode_dyck(s)
    assert example.attachment.tolist() == [0, 1, 2, 3, 3, 2, 1, 0]
    assert example.stack_tape()[-2].tolist() == [0, 1, 3, 5, 5, 4, 2, 0]
    assert official_labels(s).tolist() == [0, 1, 2, 3, 3, 2, 1]
    assert silver_stack("(a (b b) (c".split()) == ["(a", Tree("b", ("(b", "b)")), "(c"]


def _check_against_official(words: list[str]) -> None:
    example = encode_dyck(words)
    labels = official_labels(words)
    assert example.attachment[:-1].tolist() == labels.tolist(), words
    depths = official_depths(labels[1:])
    tape = example.stack_tape()
    assert (tape[:-1, :-1] == depths).all(), words  # the depth counts, before the official "> 0"
    assert (tape[-1] == tape[-2]).all()  # the <eos> row repeats the last token's


def test_encode_dyck_equals_the_official_labels_and_tape():
    strings = sample_strings(150, k=20, m=10, seed=5) + sample_strings(30, k=4, m=25, seed=6)
    rng = np.random.default_rng(0)
    for s in strings:
        _check_against_official(s)
        for cut in rng.integers(1, len(s), size=3):  # prefixes, as the official evaluation encodes
            _check_against_official(s[:cut])


def test_encode_of_the_silver_tree_differs_only_by_joining_the_top_level():
    for s in sample_strings(100, k=20, m=10, seed=7):
        official = encode_dyck(s).attachment
        tree = silver_parse(s)
        mine = encode(tree).attachment
        if len(tree.children) == 1:
            assert (mine == official).all()
        else:  # the last bracket also closes the top level, down to the first constituent's end
            first_end = len(tree.children[0].leaves())
            assert (mine[:-2] == official[:-2]).all() and mine[-2] == first_end != official[-2]


# -- test sets ----------------------------------------------------------------------------------------
def test_closing_prefixes_follow_get_all_prefixes():
    s = "(a (b b) (c (a a) c) a)".split()
    assert dependencies(s) == [(1, 2), (4, 5), (3, 6), (0, 7)]
    assert [(len(p), t) for p, t in closing_prefixes(s)] == [(2, "b)"), (5, "a)"), (6, "c)"), (7, "a)")]
    assert [(len(p), t) for p, t in closing_prefixes(s, min_distance=3)] == [(6, "c)"), (7, "a)")]


def test_long_range_set_properties():
    strings = sample_strings(150, k=20, m=40, max_length=500, seed=8)
    for distance in (50, 100, 200, 300):
        prefixes, targets = long_range_set(strings, distance, size=20, max_prefix_length=400)
        assert prefixes
        for prefix, target in zip(prefixes, targets, strict=True):
            assert len(prefix) <= 400 and target == next_closing(prefix)
            assert len(prefix) - open_stack(prefix)[-1][1] >= distance
        # every qualifying prefix of the first strings, up to the one that brings the count to 20
        expected: list[list[str]] = []
        for s in strings:
            expected += [p for p, _ in closing_prefixes(s, distance) if len(p) <= 400]
            if len(expected) >= 20:
                break
        assert prefixes == expected


def test_depth_generalization_set_structure():
    prefixes, targets = depth_generalization_set([["(k", "k)"]], seed=0)
    assert len(prefixes) == 105
    depths = [(len(p) - 1) // 2 for p in prefixes]
    assert depths == list(range(15, 50)) * 3
    alphabet = {"(" + c for c in "abcdefghij"}
    for prefix, target, d in zip(prefixes, targets, depths, strict=True):
        assert len(open_stack(prefix)) == 1 and target == next_closing(prefix)
        assert max_depth(prefix) in (d, d + 1)
        assert {t for t in prefix if t.startswith("(")} - {"(k"} <= alphabet
        start = prefix.index("(k")
        assert prefix[start + 1] == "k)"
        assert len(prefix) - open_stack(prefix)[0][1] in (2 * d - 1 + 2, 2 * d - 1)
    assert depth_generalization_set([["(k", "k)"]], seed=0) == (prefixes, targets)


def test_depth_generalization_set_with_sampled_fillers():
    fillers = sample_strings(40, k=20, m=10, max_length=500, seed=9)
    prefixes, targets = depth_generalization_set(fillers, seed=1)
    for prefix, target in zip(prefixes, targets, strict=True):
        assert 15 <= max_depth(prefix) <= 49 + 10
        assert len(open_stack(prefix)) == 1 and target == next_closing(prefix)


# -- metric -------------------------------------------------------------------------------------------
def test_closing_bracket_accuracy_oracle_and_constant():
    prefixes, targets = depth_generalization_set(sample_strings(10, seed=2), seed=3, size=10)
    vocab = [*(f"({c}" for c in bracket_types(20)), *(f"{c})" for c in bracket_types(20))]

    def oracle(batch):
        return [{t: float(t == next_closing(p)) for t in vocab} for p in batch]

    assert closing_bracket_accuracy(oracle, prefixes, targets, batch_size=4) == 1.0

    # the opening bracket scores highest overall but only closing brackets compete; b) and a) tie, and
    # the first in mapping order wins, so the prediction is always b)
    def constant(batch):
        return [{"(a": 5.0, "b)": 0.3, "a)": 0.3, "c)": 0.1} for _ in batch]

    small = [["(a"], ["(b"], ["(b", "(a", "a)"], ["(c"]]
    assert closing_bracket_accuracy(constant, small, ["a)", "b)", "b)", "c)"], batch_size=3) == 0.5
    with pytest.raises(ValueError, match="no entry for the target"):
        closing_bracket_accuracy(constant, [["(d"]], ["d)"])


# -- files --------------------------------------------------------------------------------------------
def test_official_validation_lines_parse(tmp_path):
    path = tmp_path / "k-20_d-10_val.txt"
    path.write_text("\n".join(VAL_LINES) + "\n")
    strings = read_strings(path)
    assert strings == [line.split()[:-1] for line in VAL_LINES]
    assert [max_depth(s) for s in strings] == [3, 3, 2]
    for s in strings:
        _check_against_official(s)


def test_round_trips(tmp_path):
    strings = sample_strings(20, seed=1)
    write_strings(tmp_path / "d.txt", strings)
    assert (tmp_path / "d.txt").read_text().splitlines()[0].endswith(" END")
    assert read_strings(tmp_path / "d.txt") == strings
    prefixes, targets = long_range_set(sample_strings(20, m=40, seed=2), 30, size=5)
    write_prefixes(tmp_path / "p.txt", prefixes, targets)
    assert read_prefixes(tmp_path / "p.txt") == (prefixes, targets)


@pytest.mark.parametrize("line, message", [
    ("(a b) END", "unbalanced bracket 'b)' at token 2: expected 'a)'"),
    ("a) (a a) END", "unbalanced bracket 'a)' at token 1: nothing is open"),
    ("(a (b b) END", "unbalanced brackets: 1 left open ((a)"),
    ("(a x a) END", "not a bracket: 'x'"),
    ("(a a) END (b b)", "END before the end of the line"),
    ("", "empty line"),
    ("END", "empty string"),
])
def test_malformed_strings(tmp_path, line, message):
    path = tmp_path / "bad.txt"
    path.write_text(f"(a a) END\n{line}\n")
    with pytest.raises(InputError, match=re.escape(message)) as err:
        read_strings(path)
    assert err.value.location == f"{path}:2"


@pytest.mark.parametrize("line, message", [
    ("(a (b b) b)", "unbalanced bracket 'b)' at token 4: expected 'a)'"),
    ("(a (b a)", "unbalanced bracket 'a)' at token 3: expected 'b)'"),
    ("(a a) b)", "nothing is open"),
    ("(a (b", "the target '(b' is not a closing bracket"),
    ("(a", "the target '(a' is not a closing bracket"),
    ("(a a) END", "not a bracket: 'END'"),
])
def test_malformed_prefixes(tmp_path, line, message):
    path = tmp_path / "bad.txt"
    path.write_text(f"(a (b b) a)\n{line}\n")
    with pytest.raises(InputError, match=re.escape(message)) as err:
        read_prefixes(path)
    assert err.value.location == f"{path}:2"
