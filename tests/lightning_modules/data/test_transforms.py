"""Tree transforms: TG §4.1.1 examples, random-tree properties, binarization, dependency -> constituency."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lightning_modules.data.dependency import DepTree, read_conllu
from lightning_modules.data.transforms import (
    binarize,
    collapse_unary,
    dependency_to_constituency,
    left_branching,
    reverse_structure,
    right_branching,
)
from lightning_modules.data.tree import Tree, drop_pos_tags, parse_tree, to_bracketed
from lightning_modules.errors import InputError


def t(text: str) -> Tree:
    return parse_tree(text)


def s(tree: Tree) -> str:
    return to_bracketed(tree)


# -- TG examples (transformer_grammars transforms_test.py and the paper, §4.1.1) --------------------------
def test_reverse_structure_examples() -> None:
    assert s(reverse_structure(t("(A x (B y))"))) == "(A (B x) y)"
    assert s(reverse_structure(t("(A x (B y (C z)))"))) == "(A (B (C x) y) z)"


def test_drop_pos_tags_example() -> None:
    assert s(drop_pos_tags(t("(A (B x))"))) == "(A x)"


def test_left_branching_examples() -> None:
    assert s(left_branching(t("(S (NP the hungry cat) (VP meows))"))) == "(S (NP (VP the hungry) cat) meows)"
    assert s(left_branching(t("(S (NP the hungry cat) (VP meows loudly))"))) == (
        "(S (NP (VP the hungry) cat) meows loudly)"
    )


def test_right_branching_examples() -> None:
    assert s(right_branching(t("(S (NP the hungry cat) (VP meows))"))) == "(S the (NP hungry (VP cat meows)))"
    assert s(right_branching(t("(S (NP the hungry cat) (VP meows loudly))"))) == (
        "(S the hungry (NP cat (VP meows loudly)))"
    )


def test_paper_section_4_1_1_examples() -> None:
    # "(S (NP the blue bird NP) (VP sings VP) S)" in Choe-Charniak form, transformed three ways
    bird = t("(S (NP the blue bird) (VP sings))")
    assert s(left_branching(bird)) == "(S (NP (VP the blue) bird) sings)"
    assert s(right_branching(bird)) == "(S the (NP blue (VP bird sings)))"
    assert s(reverse_structure(bird)) == "(S (VP the) (NP blue bird sings))"


def test_more_labels_than_a_binary_spine_can_hold() -> None:
    # 4 labels, 2 leaves: the spine takes one label, the first labels become a unary chain on top (as TG)
    tree = t("(S (NP (NN a)) (VP (VB b)))")
    assert s(left_branching(tree)) == "(S (NP (NN (VP (VB a b)))))"
    assert s(right_branching(tree)) == "(S (NP (NN (VP (VB a b)))))"
    assert s(left_branching(t("(S (NP x))"))) == "(S (NP x))"


# -- random trees --------------------------------------------------------------------------------------------
LABELS = st.sampled_from(["S", "NP", "VP", "PP", "SBAR", "ADJP"])
TAGS = st.sampled_from(["DT", "NN", "VBZ", "IN", "-LRB-"])
WORDS = st.sampled_from(["the", "cat", "sat", "on", "a", "mat", "-LRB-", "3\\/4"])  # repeats on purpose


def _node(children: st.SearchStrategy) -> st.SearchStrategy[Tree]:
    return st.builds(Tree, LABELS, st.lists(children, min_size=1, max_size=4).map(tuple))


# PTB-style: every terminal under a POS preterminal, phrases contain only trees
PREterminal = st.builds(lambda tag, word: Tree(tag, (word,)), TAGS, WORDS)
POS_TREES = st.recursive(PREterminal, _node, max_leaves=24)
# POS-free (as TG uses them): phrases mix terminals and phrases
POS_FREE_TREES = _node(st.recursive(WORDS, _node, max_leaves=24))
TREES = st.one_of(POS_TREES, POS_FREE_TREES)

PROPERTY = settings(max_examples=100, deadline=None)


def _postorder(tree: Tree) -> list[str]:
    out: list[str] = []
    for c in tree.children:
        if isinstance(c, Tree):
            out.extend(_postorder(c))
    return [*out, tree.label]


def _binarize_right(tree: Tree) -> Tree:
    return binarize(tree, "right")


def _binarize_left(tree: Tree) -> Tree:
    return binarize(tree, "left")


def _collapse_all(tree: Tree) -> Tree:
    return collapse_unary(tree, collapse_pos=True, collapse_root=True)


TRANSFORMS: dict[str, Callable[[Tree], Tree]] = {
    "reverse_structure": reverse_structure,
    "left_branching": left_branching,
    "right_branching": right_branching,
    "binarize_right": _binarize_right,
    "binarize_left": _binarize_left,
    "collapse_unary": collapse_unary,
    "collapse_unary_all": _collapse_all,
    "drop_pos_tags": drop_pos_tags,
}


@pytest.mark.parametrize("name", list(TRANSFORMS))
@PROPERTY
@given(tree=TREES)
def test_terminal_order_is_preserved(name: str, tree: Tree) -> None:
    assert TRANSFORMS[name](tree).leaves() == tree.leaves()


@pytest.mark.parametrize("name", list(TRANSFORMS))
@PROPERTY
@given(tree=TREES)
def test_written_form_is_balanced_and_reads_back(name: str, tree: Tree) -> None:
    out = TRANSFORMS[name](tree)
    text = to_bracketed(out)
    depth = 0
    for ch in text:
        depth += {"(": 1, ")": -1}.get(ch, 0)
        assert depth >= 0
    assert depth == 0
    assert parse_tree(text) == out


@PROPERTY
@given(tree=TREES)
def test_tg_ablations_keep_labels(tree: Tree) -> None:
    labels = tree.labels()
    assert left_branching(tree).labels() == labels  # same labels, same pre-order
    assert right_branching(tree).labels() == labels
    reversed_tree = reverse_structure(tree)
    assert Counter(reversed_tree.labels()) == Counter(labels)
    # mirroring turns the post-order into a reversed pre-order
    assert reversed_tree.labels() == list(reversed(_postorder(tree)))


@PROPERTY
@given(tree=TREES)
def test_tg_ablation_algebra(tree: Tree) -> None:
    left, right = left_branching(tree), right_branching(tree)
    assert left_branching(left) == left  # idempotent
    assert right_branching(right) == right  # idempotent
    assert reverse_structure(reverse_structure(tree)) == tree  # an involution, not idempotent
    # left/right branching depend only on (pre-order labels, terminals), which both preserve
    assert left_branching(right) == left
    assert right_branching(left) == right


def test_reverse_structure_is_not_idempotent() -> None:
    tree = t("(A x (B y))")
    assert reverse_structure(tree) != tree
    assert reverse_structure(reverse_structure(tree)) == tree


@PROPERTY
@given(tree=TREES)
def test_branching_shapes(tree: Tree) -> None:
    # left: only the first child of a node may be a constituent; right: only the last
    for node in left_branching(tree).subtrees():
        assert all(isinstance(c, str) for c in node.children[1:])
    for node in right_branching(tree).subtrees():
        assert all(isinstance(c, str) for c in node.children[:-1])


def _unbinarize(node: Tree | str) -> list[Tree | str]:
    """Splice out the intermediate ``X|<...>`` nodes."""
    if isinstance(node, str):
        return [node]
    kids = [k for c in node.children for k in _unbinarize(c)]
    return kids if "|<" in node.label else [Tree(node.label, tuple(kids))]


@pytest.mark.parametrize("factor", ["right", "left"])
@PROPERTY
@given(tree=TREES)
def test_binarize_is_binary_idempotent_and_invertible(factor: str, tree: Tree) -> None:
    out = binarize(tree, factor)
    assert all(len(node.children) <= 2 for node in out.subtrees())
    assert binarize(out, factor) == out
    assert _unbinarize(out) == [tree]
    # nodes with at most two children are untouched
    if all(len(node.children) <= 2 for node in tree.subtrees()):
        assert out == tree


@pytest.mark.parametrize(
    ("flags", "name"),
    [({}, "default"), ({"collapse_pos": True}, "pos"), ({"collapse_root": True}, "root"),
     ({"collapse_pos": True, "collapse_root": True}, "all")],
)
@PROPERTY
@given(tree=TREES)
def test_collapse_unary_is_idempotent(flags: dict, name: str, tree: Tree) -> None:
    out = collapse_unary(tree, **flags)
    assert collapse_unary(out, **flags) == out
    for node in out.subtrees():
        if node is out and not flags.get("collapse_root"):
            continue
        only = node.children[0] if len(node.children) == 1 else None
        if isinstance(only, Tree):  # a remaining unary link must end in a preterminal that was kept
            assert only.is_preterminal and not flags.get("collapse_pos")


@PROPERTY
@given(tree=POS_TREES)
def test_drop_pos_tags_removes_exactly_the_preterminals(tree: Tree) -> None:
    out = drop_pos_tags(tree)
    if tree.is_preterminal:
        assert out == tree
    else:
        assert out.labels() == [n.label for n in tree.subtrees() if not n.is_preterminal]


def test_drop_pos_tags_is_not_idempotent() -> None:
    # a phrase over a single word becomes a preterminal itself, so a second pass would drop it too
    once = drop_pos_tags(t("(S (NP (DT the)) (VP (VBZ sits)))"))
    assert s(once) == "(S (NP the) (VP sits))"
    assert s(drop_pos_tags(once)) == "(S the sits)"


# -- binarization as nltk's chomsky_normal_form ------------------------------------------------------------
@pytest.mark.parametrize(
    ("tree", "factor", "expected"),
    [
        ("(A a b c d)", "right", "(A a (A|<b-c-d> b (A|<c-d> c d)))"),
        ("(A a b c d)", "left", "(A (A|<a-b-c> (A|<a-b> a b) c) d)"),
        ("(A (B b) (C c) (D d))", "right", "(A (B b) (A|<C-D> (C c) (D d)))"),
        ("(A (B b) (C c) (D d))", "left", "(A (A|<B-C> (B b) (C c)) (D d))"),
        ("(S (NP (DT the) (JJ big) (NN cat)) (VP (VBZ sits)))", "right",
         "(S (NP (DT the) (NP|<JJ-NN> (JJ big) (NN cat))) (VP (VBZ sits)))"),
        ("(A a b)", "right", "(A a b)"),
    ],
)
def test_binarize_matches_nltk_chomsky_normal_form(tree: str, factor: str, expected: str) -> None:
    assert s(binarize(t(tree), factor)) == expected


def test_binarize_rejects_unknown_factor() -> None:
    with pytest.raises(ValueError):
        binarize(t("(A a b c)"), "middle")


def test_collapse_unary_examples() -> None:
    tree = t("(S (NP (NP (NN cat))) (VP (VBZ sits)))")
    assert s(collapse_unary(tree)) == "(S (NP+NP (NN cat)) (VP (VBZ sits)))"
    assert s(collapse_unary(tree, collapse_pos=True)) == "(S (NP+NP+NN cat) (VP+VBZ sits))"
    assert s(collapse_unary(t("(ROOT (S (NN x) (NN y)))"), collapse_root=True)) == "(ROOT+S (NN x) (NN y))"
    assert s(collapse_unary(t("(ROOT (S (NN x) (NN y)))"))) == "(ROOT (S (NN x) (NN y)))"


# -- dependency -> constituency (SOM Fig. 4) ---------------------------------------------------------------
def _dep(forms: str, heads: list[int], deprels: str, upos: str) -> DepTree:
    return DepTree(forms=tuple(forms.split()), heads=tuple(heads), deprels=tuple(deprels.split()),
                   upos=tuple(upos.split()))


SHE_ATE = _dep("She ate the red apple quickly .", [2, 0, 5, 5, 2, 2, 2],
               "nsubj root det amod obj advmod punct", "PRON VERB DET ADJ NOUN ADV PUNCT")


def test_dependency_to_constituency_hand_example() -> None:
    # every head merges with its dependents into one constituent labelled with its relation, left-binarized
    assert s(dependency_to_constituency(SHE_ATE)) == (
        "(root (root (root (root (PRON She) (VERB ate)) (obj (obj (DET the) (ADJ red)) (NOUN apple)))"
        " (ADV quickly)) (PUNCT .))"
    )
    assert s(dependency_to_constituency(SHE_ATE, binarize_left=False)) == (
        "(root (PRON She) (VERB ate) (obj (DET the) (ADJ red) (NOUN apple)) (ADV quickly) (PUNCT .))"
    )


def test_dependency_to_constituency_small_cases() -> None:
    one = _dep("Hi", [0], "root", "INTJ")
    assert s(dependency_to_constituency(one)) == "(root (INTJ Hi))"
    subtyped = _dep("Monday we met", [3, 3, 0], "obl:tmod nsubj root", "PROPN PRON VERB")
    assert s(dependency_to_constituency(subtyped)) == "(root (root (PROPN Monday) (PRON we)) (VERB met))"
    crossing = _dep("a b c d", [3, 4, 0, 3], "x x root x", "X X X X")
    with pytest.raises(InputError, match="non-projective"):
        dependency_to_constituency(crossing)


def test_dependency_to_constituency_on_ewt_dev(shared_data: Path) -> None:
    converted = 0
    for _, dep in read_conllu(shared_data / "ud" / "UD_English-EWT" / "en_ewt-ud-dev.conllu.gz"):
        if not dep.is_projective():
            with pytest.raises(InputError):
                dependency_to_constituency(dep)
            continue
        tree = dependency_to_constituency(dep)
        converted += 1
        assert tree.leaves() == list(dep.forms)
        assert [tag for _, tag in tree.pos()] == list(dep.upos)
        phrases = [n for n in tree.subtrees() if not n.is_preterminal]
        if len(dep) == 1:
            assert len(phrases) == 1 and len(phrases[0].children) == 1
            continue
        # binary: n words need n - 1 binary merges, one per dependency arc below the root
        assert all(len(n.children) == 2 for n in phrases)
        assert len(phrases) == len(dep) - 1
        assert tree.label == "root"
    assert converted == 2001 - 31
