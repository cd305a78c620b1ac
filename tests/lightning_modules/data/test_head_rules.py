"""Constituency → dependency conversion (Collins 1999 head table as Stanford's CollinsHeadFinder): hand-checked
trees, the coordination fix and its exceptions, the fallbacks, errors, and every PTB sample tree."""

from __future__ import annotations

from pathlib import Path

import pytest

from lightning_modules.data.dependency import to_conllu
from lightning_modules.data.head_rules import HEAD_RULES, head_child, to_dependency
from lightning_modules.data.tree import clean, parse_tree, read_bracketed
from lightning_modules.errors import InputError


def heads(text: str) -> tuple[int, ...]:
    return to_dependency(parse_tree(text)).heads


def test_simple_clause_hand_checked() -> None:
    # NP -> rightmost noun; PP -> IN; VP -> the verb; S -> VP
    dep = to_dependency(parse_tree(
        "(S (NP (DT The) (NN cat)) (VP (VBD sat) (PP (IN on) (NP (DT the) (NN mat)))) (. .))"))
    assert dep.forms == ("The", "cat", "sat", "on", "the", "mat", ".")
    assert dep.heads == (2, 3, 0, 3, 6, 4, 3)
    assert dep.xpos == ("DT", "NN", "VBD", "IN", "DT", "NN", ".")
    assert dep.upos == ("_", "_", "_", "_", "_", "_", "PUNCT")  # what attachment scores leave out
    assert dep.deprels == ("dep", "dep", "root", "dep", "dep", "dep", "dep")
    assert dep.is_projective()


def test_first_ptb_sentence_hand_checked(shared_data: Path) -> None:
    # Pierre Vinken , 61 years old , will join the board as a nonexecutive director Nov. 29 .
    # NP(Pierre Vinken) -> Vinken; ADJP(NP old) -> old (JJ; NP is not NNS); NP-SBJ -> its first NP;
    # NP-TMP(Nov. 29) -> Nov. (rightdis skips CD); VP(will VP) -> will (MD before VP); S -> VP.
    (_, tree), *_ = read_bracketed(shared_data / "ptb_nltk_sample/combined/wsj_0001.mrg")
    dep = to_dependency(tree)
    assert dep.forms[:8] == ("Pierre", "Vinken", ",", "61", "years", "old", ",", "will")
    assert dep.heads == (2, 8, 2, 5, 6, 2, 2, 0, 8, 11, 9, 9, 15, 15, 12, 9, 16, 8)


def test_possessive_np_is_headed_by_pos() -> None:
    # inner NP: rightdis finds POS first; outer NP: the noun
    assert heads("(NP (NP (NNP John) (POS 's)) (NN dog))") == (2, 3, 0)


def test_np_without_nominal_head_takes_its_first_np() -> None:
    assert heads("(NP (NP (NNS cats)) (CC and) (NP (NNS dogs)))") == (0, 1, 1)


def test_category_first_versus_position_first() -> None:
    # ADJP is "left" category-first: NNS outranks JJ wherever it is; NP is "rightdis": the rightmost of the list
    assert heads("(ADJP (JJ big) (NNS years))") == (2, 0)
    assert heads("(NP (NNS sales) (NN growth))") == (2, 0)
    assert heads("(NP (NN growth) (NNS sales))") == (2, 0)


def test_coordination_fix_moves_the_head_before_cc() -> None:
    # NP rightdis picks "oranges"; a CC just before it moves the head two children left
    assert heads("(NP (NN apples) (CC and) (NNS oranges))") == (0, 1, 1)
    assert heads("(ADVP (RB slowly) (CONJP (CC and) (RB also)) (RB carefully))") == (0, 1, 2, 1)


def test_coordination_fix_never_lands_on_punctuation() -> None:
    # the child two before the head is a comma: Stanford keeps the head where the rule found it
    assert heads("(ADVP (, ,) (CC and) (RB now))") == (3, 3, 0)


def test_fallback_uses_the_last_rules_direction_without_the_coordination_fix() -> None:
    # no NP rule matches: the last rule is rightdis -> the rightmost child, and the CC fix does not apply
    assert heads("(NP (DT this) (CC and) (DT that))") == (3, 3, 0)
    # FRAG is "right" with no categories, INTJ "left"
    assert heads("(FRAG (NP (NN nothing)) (ADVP (RB more)))") == (2, 0)
    assert heads("(INTJ (UH oh) (UH well))") == (0, 1)


def test_head_child_on_unaries_and_function_tags() -> None:
    assert head_child(parse_tree("(S (VP (VB Go)))")) == 0
    assert head_child(parse_tree("(SBAR (IN that) (S-TPC (NP (PRP it)) (VP (VBZ is))))")) == 0
    assert head_child(parse_tree("(S (NP-SBJ (PRP it)) (VP-PRD (VBZ is)))")) == 1


def test_empty_elements_and_wrapper_are_removed_first() -> None:
    dep = to_dependency(parse_tree("( (S (NP-SBJ (-NONE- *)) (VP (VBZ runs) (ADVP (RB fast)))) )"))
    assert dep.forms == ("runs", "fast")
    assert dep.heads == (0, 1)


def test_single_word_tree() -> None:
    assert heads("(NN yes)") == (0,)


def test_conllu_output_round_trips_through_the_reader() -> None:
    from lightning_modules.data.dependency import parse_conllu

    dep = to_dependency(parse_tree("(S (NP (PRP We)) (VP (VBP agree)) (. .))"))
    ((_, back),) = parse_conllu(to_conllu(dep))
    assert back.forms == dep.forms and back.heads == dep.heads and back.xpos == dep.xpos


def test_label_without_a_rule_is_an_input_error() -> None:
    with pytest.raises(InputError, match="no head rule for constituent label 'FOO'"):
        to_dependency(parse_tree("(FOO (NN a) (NN b))"))


def test_word_without_pos_tag_is_an_input_error() -> None:
    with pytest.raises(InputError, match="without a POS tag"):
        to_dependency(parse_tree("(S (NP the dogs) (VP (VBP bark)))"))


def test_every_ptb_sample_tree_converts_to_a_projective_tree(shared_data: Path) -> None:
    files = sorted((shared_data / "ptb_nltk_sample/combined").glob("wsj_*.mrg"))
    assert len(files) == 199
    count = 0
    for path in files:
        for _, tree in read_bracketed(path):
            dep = to_dependency(tree)
            cleaned = clean(tree)
            assert list(dep.forms) == cleaned.leaves()
            assert dep.heads.count(0) == 1
            assert dep.is_projective()
            count += 1
    assert count == 3914


def test_the_table_uses_only_known_directions() -> None:
    assert {d for rules in HEAD_RULES.values() for d, _ in rules} == {"left", "right", "rightdis"}


def test_attachment_scores_skip_the_ptb_punctuation(tmp_path: Path) -> None:
    from experiments.evaluate.uas import attachment_scores

    dep = to_dependency(parse_tree("(S (`` ``) (NP (PRP We)) (VP (VBP agree) (PRN (-LRB- -LRB-) (ADVP (RB so)) "
                                   "(-RRB- -RRB-))) (. .))"))
    path = tmp_path / "gold.conllu"
    path.write_text(to_conllu(dep))
    scores = attachment_scores(path, path)
    assert scores["uas"] == 100.0 and scores["words"] == 5  # `` and . skipped; brackets scored (not in the set)
