"""benchmarks/parity_evalb.py without the official program: the deterministic pair generator, EVALB's buffer
limits, the unlabeled parameter file, and the line-by-line comparison of the two outputs."""

from __future__ import annotations

import pytest

from benchmarks import parity_evalb as parity
from benchmarks.parity_common import Report, synbench_stdout
from experiments.evaluate.evalb import COLLINS, evaluate_lines, parse_line
from lightning_modules.data.tree import Tree, parse_tree, to_bracketed

RAW = [  # PTB-style: wrapper, -NONE- elements, function tags and indices, punctuation
    "( (S (NP-SBJ-1 (NNP Pierre) (NNP Vinken)) (, ,) (VP (MD will) (VP (VB join) (NP (DT the) (NN board)) "
    "(PP-CLR (IN as) (NP (DT a) (JJ nonexecutive) (NN director))) (NP-TMP (NNP Nov.) (CD 29)))) (. .)) )",
    "( (S (NP-SBJ (-NONE- *-1)) (VP (VBZ is) (ADJP-PRD (JJ happy)) (PRT (RP up))) (. .)) )",
    "( (SINV (`` ``) (S-TPC-2 (NP-SBJ (PRP We)) (VP (VBD did) (RB n't) (VP (VB know)))) (, ,) ('' '') "
    "(VP (VBD said) (S (-NONE- *T*-2))) (NP-SBJ (NNP Mr.) (NNP Smith)) (. .)) )",
    "( (INTJ (UH Yes) (. .)) )",
]
TREES = [parse_tree(t) for t in RAW * 3]


def test_pairs_are_deterministic_and_readable() -> None:
    pairs, left_out = parity.make_pairs(TREES)
    assert left_out == 0 and list(pairs) == list(parity.KINDS)
    assert pairs == parity.make_pairs(TREES)[0]
    assert all(len(v) == len(TREES) for v in pairs.values())
    assert all(g == to_bracketed(t) for v in pairs.values() for (g, _), t in zip(v, TREES))
    assert [t for _, t in pairs["identical"]] == [g for g, _ in pairs["identical"]]
    assert all(t != g for kind in ("relabel", "drop", "add", "branching") for g, t in pairs[kind])
    for _, test in (p for v in pairs.values() for p in v):
        parse_line(test, COLLINS, "test")  # well-formed: raises InputError otherwise


def test_pairs_reach_every_status() -> None:
    pairs, _ = parity.make_pairs(TREES)
    every = [p for v in pairs.values() for p in v]
    rows = evaluate_lines([g for g, _ in every], [t for _, t in every], COLLINS).as_dict()["per_sentence"]
    assert {r["status"] for r in rows} == {"ok", "error", "skip"}
    scores = {r["recall"] for r in rows if r["status"] == "ok"}
    assert 100.0 in scores and any(0 < s < 100 for s in scores)


def test_edits() -> None:
    tree = parse_tree("(S (NP (DT a) (NN b)) (VP (VB c) (NP (DT d) (NN e))))")
    assert to_bracketed(parity.replace(tree, (1, 1), lambda n: list(n.children))) == \
        "(S (NP (DT a) (NN b)) (VP (VB c) (DT d) (NN e)))"
    assert to_bracketed(parity.prune(parity.replace(tree, (0, 0), lambda n: []))) == \
        "(S (NP (NN b)) (VP (VB c) (NP (DT d) (NN e))))"
    emptied = Tree("S", (parse_tree("(NP (DT a))"), Tree("VP", (Tree("ADVP", ()),))))
    assert to_bracketed(parity.prune(emptied)) == "(S (NP (DT a)))"
    assert [p for p, _ in parity.phrases(tree)] == [(), (0,), (1,), (1, 1)]


def test_evalb_buffer_limits() -> None:
    assert parity.readable("(S " + " ".join(f"(NN w{i})" for i in range(200)) + ")")
    assert not parity.readable("(S " + " ".join(f"(NN w{i})" for i in range(201)) + ")")
    assert not parity.readable("(S (NN " + "w" * 100 + "))")
    assert not parity.readable("(S " + "(X " * 200 + "(NN w)" + ")" * 200 + ")")


def test_unlabeled_parameter_file(capsys) -> None:
    collins = "DEBUG 0\nLABELED 1                 \nDELETE_LABEL TOP\n"
    assert parity.unlabeled_prm(collins) == "DEBUG 0\nLABELED 0\nDELETE_LABEL TOP\n"
    with pytest.raises(SystemExit, match="^2$"):
        parity.unlabeled_prm("DEBUG 0\n")
    assert capsys.readouterr().err == "error: COLLINS.prm: expected one LABELED line\n"


def test_compare_reports_rows_and_summaries(capsys) -> None:
    pairs, _ = parity.make_pairs(TREES[:4])

    def official(param: str, gold, test) -> str:  # our own output, one row altered for identical/unlabeled
        text = synbench_stdout(["evalb", str(gold), str(test), "--param", param])
        if param == "unlabeled" and gold.name == "identical.gold":
            lines = text.splitlines(keepends=True)
            lines[4] = lines[4].replace("100.00", " 99.99", 1)
            text = "".join(lines)
        return text

    report = Report()
    parity.compare(pairs, official, report)
    n = 4 * len(parity.KINDS)
    assert report.compared == {"collins rows": n, "collins summaries": len(parity.KINDS),
                               "unlabeled rows": n, "unlabeled summaries": len(parity.KINDS),
                               "collins all kinds rows": n, "collins all kinds summaries": 1,
                               "unlabeled all kinds rows": n, "unlabeled all kinds summaries": 1}
    assert report.identical["unlabeled rows"] == n - 1 and report.identical["unlabeled summaries"] == len(parity.KINDS)
    assert report.finish("title") == 1
    out = capsys.readouterr().out
    assert "official:    2    " in out and " 99.99" in out and out.endswith("RESULT: DIFFERENT\n")
