"""The DTG encoding: the paper's Figures 1, 2, 4 and 5 for arc-standard, arc-eager and arc-swift, golden vectors
of the official masking library, the §3.5 constraints, and oracle → decode round trips on UD EWT test."""

from __future__ import annotations

from pathlib import Path

import pytest

from lightning_modules.data.dependency import DepTree, read_conllu
from lightning_modules.errors import InputError
from lightning_modules.families.dtg.encoding import (
    GEN,
    SYSTEMS,
    TYPE_NAMES,
    DTGState,
    DTGType,
    Transition,
    decode,
    encode,
    encode_transitions,
    oracle,
)

THERE = ("There", "is", "a", "difference")
THERE_HEADS = (2, 0, 4, 2)


def rows(seq) -> list[list[list[int]]]:
    out = []
    for i in range(len(seq)):
        keys, rel = seq.attend(i)
        out.append([[k, r] for k, r in zip(keys.tolist(), rel.tolist())])
    return out


def names(seq) -> list[str]:
    return [TYPE_NAMES[t] for t in seq.types.tolist()]


def inputs(seq) -> list[str]:
    """The paper's "Input" column: a token, or an arc token "+" the token at its head position."""
    return [tok if h < 0 else f"{tok} + {seq.tokens[h]}" for tok, h in zip(seq.tokens, seq.arc_heads.tolist())]


# -- arc-standard: DESIGN.md's contract example = the paper's Figure 2(a) with the official single pop_root ---
def test_arc_standard_contract_example() -> None:
    seq = encode(DepTree(THERE, THERE_HEADS, ("_",) * 4))
    assert seq.tokens == ["<s>", "There", "is", "left_arc", "left_arc", "a", "difference", "left_arc", "left_arc",
                          "right_arc", "right_arc", "pop_root"]
    assert names(seq) == ["SOS", "W", "W", "LA", "LA2", "W", "W", "LA", "LA2", "RA", "RA2", "POP"]
    assert seq.labels == ["There", "is", "left_arc", None, "a", "difference", "left_arc", None, "right_arc", None,
                          "pop_root", "</s>"]
    assert seq.arc_heads.tolist() == [-1, -1, -1, 2, 2, -1, -1, 6, 6, 2, 2, 0]
    attend = rows(seq)
    assert attend[3] == [[1, -1], [2, 0], [3, 0]]
    assert attend[4] == [[0, 1], [3, 0], [4, 0]]
    assert attend[6] == [[0, 3], [3, 2], [5, 1], [6, 0]]
    assert attend[11] == [[0, 0], [9, -1], [11, 0]]


def test_paper_figure_1_up_to_the_final_root_arc() -> None:
    # Figure 1 ends with RIGHTARC + <ROOT>, RIGHTARC2 + <ROOT>; the official code (and the contract) ends with
    # one pop_root that composes <s> with the last word and predicts </s>
    figure = ["<ROOT>", "There", "is", "LEFTARC + is", "LEFTARC2 + is", "a", "difference", "LEFTARC + difference",
              "LEFTARC2 + difference", "RIGHTARC + is", "RIGHTARC2 + is", "RIGHTARC + <ROOT>", "RIGHTARC2 + <ROOT>"]
    predictions = ["There", "is", "left_arc", None, "a", "difference", "left_arc", None, "right_arc", None,
                   "right_arc", None, "</s>"]
    seq = encode(DepTree(THERE, THERE_HEADS, ("_",) * 4))
    ours = [s.replace("left_arc", "LEFTARC").replace("right_arc", "RIGHTARC").replace("<s>", "<ROOT>")
            for s in inputs(seq)]
    for i, tok in enumerate(seq.types.tolist()):
        if tok in (DTGType.LA2, DTGType.RA2):
            ours[i] = ours[i].replace("ARC", "ARC2", 1)
    assert ours[:11] == figure[:11]
    assert seq.labels[:10] == predictions[:10]
    assert inputs(seq)[11] == "pop_root + <s>" and seq.labels[10:] == ["pop_root", "</s>"]


def test_official_golden_vectors_the_cat_sat() -> None:
    # reference-impls.md §3.2, from the official DTG C++ library (pos:relpos, cp = composed_position)
    seq = encode(DepTree(("The", "cat", "sat", "."), (2, 3, 0, 3), ("_",) * 4))
    assert " ".join(seq.tokens) == ("<s> The cat left_arc left_arc sat left_arc left_arc . right_arc right_arc "
                                    "pop_root")
    assert rows(seq) == [
        [[0, 0]], [[0, 1], [1, 0]], [[0, 2], [1, 1], [2, 0]], [[1, -1], [2, 0], [3, 0]], [[0, 1], [3, 0], [4, 0]],
        [[0, 2], [3, 1], [5, 0]], [[3, -1], [5, 0], [6, 0]], [[0, 1], [6, 0], [7, 0]], [[0, 2], [6, 1], [8, 0]],
        [[6, 0], [8, -1], [9, 0]], [[0, 1], [9, 0], [10, 0]], [[0, 0], [9, -1], [11, 0]],
    ]
    assert seq.arc_heads.tolist() == [-1, -1, -1, 2, 2, -1, 5, 5, -1, 5, 5, 0]


def test_official_golden_vectors_delayed_right_arc() -> None:
    # "man" waits for "telescope" before attaching to "saw"; rows and composed positions from the official
    # DTG C++ library (masking_bllip, built locally) on the official oracle's sequence
    words = ("I", "saw", "the", "man", "with", "a", "telescope", ".")
    seq = encode(DepTree(words, (2, 0, 4, 2, 7, 7, 4, 2), ("_",) * 8))
    assert " ".join(seq.tokens) == ("<s> I saw left_arc left_arc the man left_arc left_arc with a telescope "
                                    "left_arc left_arc left_arc left_arc right_arc right_arc right_arc right_arc . "
                                    "right_arc right_arc pop_root")
    assert rows(seq) == [
        [[0, 0]], [[0, 1], [1, 0]], [[0, 2], [1, 1], [2, 0]], [[1, -1], [2, 0], [3, 0]], [[0, 1], [3, 0], [4, 0]],
        [[0, 2], [3, 1], [5, 0]], [[0, 3], [3, 2], [5, 1], [6, 0]], [[5, -1], [6, 0], [7, 0]],
        [[0, 2], [3, 1], [7, 0], [8, 0]], [[0, 3], [3, 2], [7, 1], [9, 0]], [[0, 4], [3, 3], [7, 2], [9, 1], [10, 0]],
        [[0, 5], [3, 4], [7, 3], [9, 2], [10, 1], [11, 0]], [[10, -1], [11, 0], [12, 0]],
        [[0, 4], [3, 3], [7, 2], [9, 1], [12, 0], [13, 0]], [[9, -1], [12, 0], [14, 0]],
        [[0, 3], [3, 2], [7, 1], [14, 0], [15, 0]], [[7, 0], [14, -1], [16, 0]], [[0, 2], [3, 1], [16, 0], [17, 0]],
        [[3, 0], [16, -1], [18, 0]], [[0, 1], [18, 0], [19, 0]], [[0, 2], [18, 1], [20, 0]],
        [[18, 0], [20, -1], [21, 0]], [[0, 1], [21, 0], [22, 0]], [[0, 0], [21, -1], [23, 0]],
    ]
    arcs = {i: h for i, h in enumerate(seq.arc_heads.tolist()) if h >= 0}
    assert arcs == {3: 2, 4: 2, 7: 6, 8: 6, 12: 11, 13: 11, 14: 11, 15: 11, 16: 6, 17: 6, 18: 2, 19: 2, 21: 2,
                    22: 2, 23: 0}


def test_official_oracle_examples() -> None:
    # reference-impls.md §3.2 (data_scripts/conll_to_dep.py)
    def sequence(words, heads):
        it = iter(words)
        return " ".join(next(it) if t is GEN else t.token() for t in oracle(heads))

    assert sequence(("The", "cat", "sat", "."), (2, 3, 0, 3)) == "The cat left_arc sat left_arc . right_arc pop_root"
    assert sequence(("She", "eats", "fresh", "apples"), (2, 0, 4, 2)) == (
        "She eats left_arc fresh apples left_arc right_arc pop_root")
    assert sequence(("Yes",), (0,)) == "Yes pop_root"


# -- arc-eager: Figure 4 ---------------------------------------------------------------------------------------
def test_arc_eager_figure_4() -> None:
    seq = encode(DepTree(THERE, THERE_HEADS, ("_",) * 4), "eager")
    assert inputs(seq) == ["<s>", "There", "is", "left_arc + is", "left_arc + is", "right_arc + <s>",
                           "right_arc + <s>", "a", "difference", "left_arc + difference", "left_arc + difference",
                           "right_arc + is", "right_arc + is", "pop", "pop", "pop"]
    compose = [TYPE_NAMES[t] in ("LA", "RA") for t in seq.types.tolist()]
    assert [i for i, c in enumerate(compose) if c] == [3, 5, 9, 11]  # the figure's COMPOSE rows; the rest STACK
    assert seq.labels == ["There", "is", "left_arc", None, "right_arc", None, "a", "difference", "left_arc", None,
                          "right_arc", None, "pop", "pop", "pop", "</s>"]
    attend = rows(seq)
    assert attend[5] == [[0, 0], [3, -1], [5, 0]]  # RIGHTARC + <ROOT>: head <s> 0, dependent "is" -1
    assert attend[6] == [[3, 0], [5, 1], [6, 0]]  # "is" stays unmasked, above its composed head
    assert attend[11] == [[3, 0], [9, -1], [11, 0]]  # RIGHTARC + is over is (3) and difference (9)
    assert attend[12] == [[5, 2], [9, 0], [11, 1], [12, 0]]
    # POPSTACK pops the logical top (difference, then is, then <ROOT>) and attends to the rest
    assert attend[13:] == [[[5, 1], [11, 0], [13, 0]], [[5, 0], [14, 0]], [[15, 0]]]


# -- arc-swift: Figure 5 ---------------------------------------------------------------------------------------
def test_arc_swift_figure_5() -> None:
    words = (*THERE, ".")
    seq = encode(DepTree(words, (*THERE_HEADS, 2), ("_",) * 5), "swift")
    assert inputs(seq) == ["<s>", "There", "is", "left_arc[1] + is", "left_arc[1] + is", "right_arc[1] + <s>",
                           "right_arc[1] + <s>", "a", "difference", "left_arc[1] + difference",
                           "left_arc[1] + difference", "right_arc[1] + is", "right_arc[1] + is", ".",
                           "right_arc[2] + is", "right_arc[2] + is"]
    assert seq.labels == ["There", "is", "left_arc[1]", None, "right_arc[1]", None, "a", "difference", "left_arc[1]",
                          None, "right_arc[1]", None, ".", "right_arc[2]", None, "</s>"]
    attend = rows(seq)
    # RIGHTARC[2] + is: attends is (11), the token between (difference, 9) and "." (13), and masks difference
    assert attend[14] == [[9, 0], [11, 0], [13, -1], [14, 0]]
    assert attend[15] == [[5, 2], [13, 0], [14, 1], [15, 0]]


def test_arc_swift_left_arc_over_a_reduced_word() -> None:
    # x y b with b -> x and x -> y: LEFTARC[2] pops y (already attached, unit 2) with x (its unit is the
    # RIGHTARC at 3); both get the dependent's -1
    state = DTGState("swift")
    for t in (GEN, GEN, Transition("right_arc", 1), GEN):
        state.apply(t)
    assert state.check(Transition("left_arc", 1)) == "the dependent of a left arc already has a head"
    compose, second = state.apply(Transition("left_arc", 2))
    assert (compose.keys, compose.relpos) == ([2, 3, 5, 6], [-1, -1, 0, 0])
    assert state.heads == {2: 1, 1: 3} and state.stack == [0] and state.buffer == 3
    assert decode([GEN, GEN, Transition("right_arc", 1), GEN, Transition("left_arc", 2), Transition("right_arc", 1)],
                  "swift") == (3, 1, 0)


# -- §3.5 constraints ------------------------------------------------------------------------------------------
def test_constraints_of_each_system() -> None:
    standard = DTGState("standard")
    standard.apply(GEN)
    assert standard.check(Transition("left_arc")) == "an arc needs two words on the stack"
    assert standard.check(Transition("pop")) == "pop is not a transition of arc-standard"
    assert standard.check(Transition("left_arc", 1)) == "left_arc[1] is not a transition of arc-standard"
    standard.apply(GEN)
    assert standard.check(Transition("pop_root")) == "pop_root needs exactly one word on the stack"
    eager = DTGState("eager")
    assert eager.check(Transition("left_arc")) == "an arc needs a generated word in the buffer"
    assert eager.check(Transition("pop")) == "the root is popped last, after every word"
    eager.apply(GEN)
    assert eager.check(Transition("left_arc")) == "left_arc reaches beyond the stack"  # s0 is the root
    eager.apply(GEN)
    assert eager.check(Transition("pop")) == "pop needs a stack top that has its head"
    swift = DTGState("swift")
    swift.apply(GEN)
    assert swift.check(Transition("right_arc", 2)) == "right_arc[2] reaches beyond the stack"
    assert swift.check(Transition("right_arc", 1)) is None
    swift.apply(GEN)
    assert swift.check(Transition("right_arc", 2)) == "right_arc[2] would pop a word that has no head"
    assert not swift.can_end()
    with pytest.raises(ValueError, match="position 3: right_arc.2. would pop"):
        swift.apply(Transition("right_arc", 2))


def test_pop_root_rules() -> None:
    """single-word (the encoder's): pop_root on a one-word stack, nothing after it. official (the official beam's):
    pop_root on any stack with a word, composing the top two units as a right arc (as the official TGAgent), then
    arcs over the top two units (the root's included; the root never a dependent) and </s> at any point."""
    pop, left, right = Transition("pop_root"), Transition("left_arc"), Transition("right_arc")
    single, official = DTGState("standard"), DTGState("standard", "official")
    for state in (single, official):
        state.apply(GEN)
        state.apply(GEN)  # <s> 0, w1 1, w2 2
    assert single.check(pop) == "pop_root needs exactly one word on the stack"
    (token,) = official.apply(pop)  # w2 under w1: w1's unit at relpos 0, w2's at -1, itself 0
    assert (TYPE_NAMES[token.type], token.keys, token.relpos, token.arc_head) == ("POP", [1, 2, 3], [0, -1, 0], 1)
    assert official.heads == {2: 1} and official.stack == [0, 1] and official.can_end() and not official.complete()
    assert official.check(GEN) == "no word follows pop_root" and official.check(pop) == "pop_root comes once"
    assert official.check(left) == "the root is never a dependent"
    compose, second = official.apply(right)  # w1 (its unit: the pop_root token) under the root
    assert (compose.keys, compose.relpos, compose.arc_head) == ([0, 3, 4], [0, -1, 0], 0)
    assert official.heads == {2: 1, 1: 0} and official.complete()
    assert official.check(right) == "an arc needs two units on the stack"
    with pytest.raises(ValueError, match="pop_root must be one of"):
        DTGState("standard", "any")
    # one word: both rules pop the root alike, and only the single-word rule ends the sequence there
    for rule in ("single-word", "official"):
        state = DTGState("standard", rule)
        state.apply(GEN)
        assert [(t.keys, t.relpos, t.arc_head) for t in state.apply(pop)] == [([0, 1, 2], [0, -1, 0], 0)]
        assert state.complete() and state.check(right) == ("the sequence has ended" if rule == "single-word"
                                                            else "an arc needs two units on the stack")


def test_decode_refuses_incomplete_sequences() -> None:
    with pytest.raises(ValueError, match="does not end in a complete tree"):
        decode([GEN, GEN, Transition("left_arc")])
    with pytest.raises(ValueError, match="do not generate the 3 words"):
        encode_transitions(("a", "b", "c"), [GEN, GEN, Transition("left_arc"), Transition("pop_root")])


def test_non_projective_tree_is_an_input_error() -> None:
    tree = DepTree(("a", "b", "c", "d"), (3, 4, 0, 3), ("_",) * 4)  # 3 -> 1 crosses 4 -> 2
    with pytest.raises(InputError, match=r"non-projective dependency tree: arc 3 -> 1 \('a'\)") as info:
        encode(tree, location="f.conllu:7")
    assert info.value.location == "f.conllu:7"
    for system in SYSTEMS:
        with pytest.raises(ValueError, match="not projective"):
            oracle(tree.heads, system)


# -- every projective UD EWT test sentence -----------------------------------------------------------------------
@pytest.fixture(scope="module")
def ewt_test(shared_data: Path) -> list[DepTree]:
    return [t for _, t in read_conllu(shared_data / "ud/UD_English-EWT/en_ewt-ud-test.conllu.gz")]


@pytest.mark.parametrize("system", SYSTEMS)
def test_every_projective_ewt_test_sentence_round_trips(ewt_test: list[DepTree], system: str) -> None:
    projective = [t for t in ewt_test if t.is_projective()]
    assert (len(ewt_test), len(projective)) == (2077, 2051)
    for tree in projective:
        transitions = oracle(tree.heads, system)
        assert decode(transitions, system) == tree.heads
        seq = encode_transitions(tree.forms, transitions, system)
        types = seq.types.tolist()
        if system == "standard":
            assert len(seq) == 3 * len(tree)
        assert [tok for tok, t in zip(seq.tokens, types) if t == DTGType.W] == list(tree.forms)
        assert [i for i, lab in enumerate(seq.labels) if lab is None] == [
            i for i, t in enumerate(types) if t in (DTGType.LA, DTGType.RA)]
        for i, t in enumerate(types):
            keys, rel = seq.attend(i)
            assert keys[-1] == i and rel[-1] == 0 and list(keys) == sorted(keys)
            if t in (DTGType.LA, DTGType.RA, DTGType.POP):  # COMPOSE: one dependent side, head and self at 0
                assert -1 in rel.tolist() and set(rel.tolist()) <= {-1, 0}
            else:  # STACK: depths count down to the top (the token itself when it is pushed), self 0
                top = 1 if t in (DTGType.SOS, DTGType.W) else 0
                assert sorted(rel[:-1].tolist(), reverse=True) == list(range(len(rel) - 2 + top, top - 1, -1))


def test_non_projective_ewt_sentences_never_reduce(ewt_test: list[DepTree]) -> None:
    crossing = [t for t in ewt_test if not t.is_projective()]
    assert len(crossing) == 26
    for tree in crossing:
        for system in SYSTEMS:
            with pytest.raises(ValueError):
                oracle(tree.heads, system)
