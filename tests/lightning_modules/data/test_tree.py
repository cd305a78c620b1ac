"""Constituency trees: PTB reading/writing on the whole NLTK sample, cleaning, and malformed input."""

from __future__ import annotations

import gzip
import re
from collections.abc import Callable
from pathlib import Path

import pytest

from lightning_modules.data.tree import (
    Tree,
    clean,
    drop_pos_tags,
    overt_words,
    parse_bracketed,
    parse_tree,
    read_bracketed,
    strip_function_tags,
    to_bracketed,
    unwrap_root,
    write_bracketed,
)
from lightning_modules.errors import InputError


@pytest.fixture(scope="module")
def ptb_files(shared_data: Path) -> list[tuple[Path, list[tuple[int, Tree]]]]:
    files = sorted((shared_data / "ptb_nltk_sample" / "combined").glob("wsj_*.mrg"))
    assert len(files) == 199
    return [(f, read_bracketed(f)) for f in files]


# -- the whole PTB sample --------------------------------------------------------------------------------
def test_ptb_sample_counts(ptb_files: list[tuple[Path, list[tuple[int, Tree]]]]) -> None:
    trees = [t for _, ts in ptb_files for _, t in ts]
    assert len(trees) == 3914
    assert sum(len(overt_words(t)) for t in trees) == 94084
    assert sum(len(t.leaves()) for t in trees) == 94084 + 6592  # README: +6592 -NONE- elements
    assert sum(len(clean(t).leaves()) for t in trees) == 94084


def test_every_ptb_tree_round_trips(ptb_files: list[tuple[Path, list[tuple[int, Tree]]]]) -> None:
    for path, trees in ptb_files:
        for line, tree in trees:
            one_line = to_bracketed(tree)
            assert "\n" not in one_line
            assert parse_tree(one_line, f"{path}:{line}") == tree
            cleaned = clean(tree)
            assert parse_tree(to_bracketed(cleaned)) == cleaned


def test_ptb_file_round_trips_through_a_one_tree_per_line_file(
    ptb_files: list[tuple[Path, list[tuple[int, Tree]]]], tmp_path: Path
) -> None:
    trees = [t for _, ts in ptb_files[:20] for _, t in ts]
    out = tmp_path / "trees.txt"
    write_bracketed(trees, out)
    again = read_bracketed(out)
    assert [t for _, t in again] == trees
    assert [line for line, _ in again] == list(range(1, len(trees) + 1))
    gz = tmp_path / "trees.txt.gz"
    gz.write_bytes(gzip.compress(out.read_bytes()))
    assert [t for _, t in read_bracketed(gz)] == trees


def test_mrg_line_numbers_point_at_each_tree(ptb_files: list[tuple[Path, list[tuple[int, Tree]]]]) -> None:
    path, trees = ptb_files[0]  # wsj_0001.mrg: a blank first line, then two trees
    lines = path.read_text().split("\n")
    assert [line for line, _ in trees] == [2, 17]
    assert all(lines[line - 1].startswith("( (S") for line, _ in trees)


def test_cleaned_ptb_trees_have_no_empty_elements_or_function_tags(
    ptb_files: list[tuple[Path, list[tuple[int, Tree]]]],
) -> None:
    plain = re.compile(r"^([A-Z]+\$?|-LRB-|-RRB-|[#$,.:]|''|``)$")
    for _, trees in ptb_files:
        for _, tree in trees:
            cleaned = clean(tree)
            assert cleaned.label != ""
            assert cleaned.leaves() == overt_words(tree)
            for node in cleaned.subtrees():
                assert node.label != "-NONE-"
                assert plain.match(node.label), node.label
                assert node.children


def test_first_tree_of_wsj_0001_cleaned(ptb_files: list[tuple[Path, list[tuple[int, Tree]]]]) -> None:
    _, tree = ptb_files[0][1][0]
    assert to_bracketed(clean(tree)) == (
        "(S (NP (NP (NNP Pierre) (NNP Vinken)) (, ,) (ADJP (NP (CD 61) (NNS years)) (JJ old)) (, ,)) "
        "(VP (MD will) (VP (VB join) (NP (DT the) (NN board)) (PP (IN as) (NP (DT a) (JJ nonexecutive) "
        "(NN director))) (NP (NNP Nov.) (CD 29)))) (. .))"
    )


# -- cleaning ----------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("label", "expected"),
    [
        ("NP-SBJ-1", "NP"),
        ("NP-SBJ", "NP"),
        ("NP=2", "NP"),
        ("PP-TMP=3", "PP"),
        ("ADVP-PRD-LOC=3", "ADVP"),
        ("ADVP|PRT", "ADVP"),
        ("-LRB-", "-LRB-"),
        ("-RRB-", "-RRB-"),
        ("-NONE-", "-NONE-"),
        ("PRP$", "PRP$"),
        ("S", "S"),
    ],
)
def test_strip_function_tags(label: str, expected: str) -> None:
    assert strip_function_tags(label) == expected


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        # function tags and co-indices stripped, the PTB wrapper unwrapped
        ("( (S (NP-SBJ-1 (NNP John)) (VP (VBD ran))) )", "(S (NP (NNP John)) (VP (VBD ran)))"),
        # -NONE- removed, and the constituents it leaves empty removed too
        ("( (S (NP-SBJ-1 (-NONE- *)) (VP (VBD ran) (NP (-NONE- *T*-2))) (. .)) )",
         "(S (VP (VBD ran)) (. .))"),
        ("(S (SBAR (-NONE- 0) (S (-NONE- *T*-1))) (NP (NN x)))", "(S (NP (NN x)))"),
        # brackets as POS tags are kept
        ("( (NP (-LRB- -LRB-) (NN x) (-RRB- -RRB-)) )", "(NP (-LRB- -LRB-) (NN x) (-RRB- -RRB-))"),
        # ROOT / TOP unary roots unwrapped as well
        ("(ROOT (S (NN x)))", "(S (NN x))"),
        ("(TOP (S (NN x)))", "(S (NN x))"),
    ],
)
def test_clean(raw: str, expected: str) -> None:
    assert to_bracketed(clean(parse_tree(raw))) == expected


def test_unwrap_root_keeps_a_non_unary_root() -> None:
    tree = parse_tree("(ROOT (S x) (S y))")
    assert unwrap_root(tree) == tree


def test_clean_rejects_a_tree_without_overt_words() -> None:
    with pytest.raises(InputError, match="no overt terminals"):
        clean(parse_tree("( (S (NP-SBJ (-NONE- *))) )"))


def test_drop_pos_tags_and_leaves() -> None:
    tree = parse_tree("(S (NP (DT the) (NN cat)) (VP (VBZ meows)))")
    assert to_bracketed(drop_pos_tags(tree)) == "(S (NP the cat) (VP meows))"
    assert tree.leaves() == ["the", "cat", "meows"]
    assert tree.pos() == [("the", "DT"), ("cat", "NN"), ("meows", "VBZ")]
    assert tree.height() == 4
    assert str(parse_tree("(A (B x))")) == "(A (B x))"


# -- malformed input: InputError with FILE:LINE --------------------------------------------------------------
MALFORMED = [
    # (name, text, line, message)
    ("missing-close", "(S (NP x))\n\n(S (NP y)\n  (VP z)\n", 3, "unbalanced brackets: '(' is never closed"),
    ("extra-close", "(S x)\n(S y))\n", 2, "unbalanced brackets: ')' without a matching '('"),
    ("empty-bracket", "(S x)\n(() )\n", 2, "bracket without a label: '()'"),
    ("unlabelled-bracket", "(S x)\n(S y)\n(S ( (NN dog)))\n", 3, "bracket without a label"),
    ("unlabelled-root-with-two-trees", "( (S x) (S y) )\n", 1, "bracket without a label"),
    ("empty-constituent", "(S\n  (NP )\n  (VP x))\n", 2, "constituent (NP ...) has no children"),
    ("text-before", "(S x)\nstray (S y)\n", 2, "text outside brackets: 'stray'"),
    ("text-after", "(S x)\n(S y) z\n", 2, "text outside brackets: 'z'"),
]


@pytest.mark.parametrize(("name", "text", "line", "message"), MALFORMED, ids=[m[0] for m in MALFORMED])
def test_malformed_trees_report_file_and_line(
    tmp_path: Path, name: str, text: str, line: int, message: str
) -> None:
    path = tmp_path / f"{name}.mrg"
    path.write_text(text)
    with pytest.raises(InputError) as err:
        read_bracketed(path)
    assert err.value.location == f"{path}:{line}"
    assert err.value.message == message
    with pytest.raises(InputError) as err:
        parse_bracketed(text, "x.txt")
    assert err.value.location == f"x.txt:{line}"


@pytest.mark.parametrize("text", ["", "\n\n  \n"])
def test_empty_file(tmp_path: Path, text: str) -> None:
    path = tmp_path / "empty.mrg"
    path.write_text(text)
    with pytest.raises(InputError) as err:
        read_bracketed(path)
    assert err.value.location == f"{path}:1"
    assert err.value.message == "no trees found (empty file)"


def test_parse_tree_wants_exactly_one_tree() -> None:
    with pytest.raises(InputError, match="expected one tree, found 2"):
        parse_tree("(S x) (S y)")


def test_unreadable_file(tmp_path: Path) -> None:
    path = tmp_path / "bad.mrg"
    path.write_bytes(b"(S \xff)")
    with pytest.raises(InputError) as err:
        read_bracketed(path)
    assert err.value.location == str(path)
    with pytest.raises(InputError):
        read_bracketed(tmp_path / "missing.mrg")


# -- the same errors through the CLI (`synbench data stats FILE`) -------------------------------------------
Synbench = Callable[..., tuple[int, str, str]]


@pytest.fixture
def synbench(capsys: pytest.CaptureFixture[str]) -> Synbench:
    from experiments import cli


    def run(*argv: str) -> tuple[int, str, str]:
        code = cli.main(list(argv))
        out, err = capsys.readouterr()
        return code, out, err

    return run


@pytest.mark.parametrize(("name", "text", "line", "message"), MALFORMED, ids=[m[0] for m in MALFORMED])
def test_cli_reports_malformed_trees(
    synbench: Synbench, tmp_path: Path, name: str, text: str, line: int, message: str
) -> None:
    path = tmp_path / f"{name}.mrg"
    path.write_text(text)
    code, out, err = synbench("data", "stats", str(path))
    assert code == 2
    assert out == ""
    assert err == f"synbench: error: {path}:{line}: {message}\n"


def test_cli_reports_an_empty_tree_file(synbench: Synbench, tmp_path: Path) -> None:
    path = tmp_path / "empty.mrg"
    path.write_text("")
    code, _, err = synbench("data", "stats", str(path))
    assert code == 2
    assert err.startswith(f"synbench: error: {path}:1: ")
    assert err.count("\n") == 1


def test_cli_stats_of_a_good_tree_file(synbench: Synbench, tmp_path: Path) -> None:
    import json

    path = tmp_path / "good.mrg"
    path.write_text("( (S (NP-SBJ (-NONE- *)) (NP (DT the) (NN cat)) (VP (VBZ meows))) )\n(S (NN x))\n")
    code, out, err = synbench("data", "stats", str(path), "--json")
    assert (code, err) == (0, "")
    stats = json.loads(out)
    assert stats["file"]["sentences"] == 2
    assert stats["file"]["words"] == 4  # -NONE- is not a word


def test_label_inventory_of_the_ptb_sample(ptb_files: list[tuple[Path, list[tuple[int, Tree]]]]) -> None:
    phrasal, pos = set(), set()
    for _, trees in ptb_files:
        for _, tree in trees:
            for node in clean(tree).subtrees():
                (pos if node.is_preterminal else phrasal).add(node.label)
    assert sorted(phrasal) == [
        "ADJP", "ADVP", "CONJP", "FRAG", "INTJ", "LST", "NAC", "NP", "NX", "PP", "PRN", "PRT", "QP",
        "RRC", "S", "SBAR", "SBARQ", "SINV", "SQ", "UCP", "VP", "WHADJP", "WHADVP", "WHNP", "WHPP", "X",
    ]
    assert len(pos) == 45 and {"-LRB-", "-RRB-", "PRP$", "WP$", "``", "''", "#", "$"} <= pos
