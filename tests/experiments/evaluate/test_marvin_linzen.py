"""Marvin & Linzen (2018): the staged templates as 15 constructions, subsets taken in turn from their conditions,
``synbench eval marvin-linzen`` per construction end to end, and a malformed template as one error line."""

from __future__ import annotations

import json

from experiments.cli import main
from experiments.evaluate.marvin_linzen import CONSTRUCTIONS, default_data_dir, load_cases
from experiments.evaluate.scorers import load_scorer
from experiments.evaluate.tokenize import tokenize
from tests.tolerances import close32


def test_the_staged_templates_are_the_papers_15_constructions(prepared_data_dir):
    folder = default_data_dir(str(prepared_data_dir))
    every = load_cases(folder)
    assert list(every) == list(CONSTRUCTIONS)  # the paper's rows, animacy variants joined
    assert sum(len(cases) for cases in every.values()) == 163124  # the release's tuples (SOURCE.md)
    assert len(every["simple_agrmt"]) == 140 and len(every["simple_npi"]) == 120 + 144  # anim + inanim
    two = load_cases(folder, ["simple_agrmt", "prep", "simple_npi"], per_construction=2)
    # a subset takes the first case of every (template, condition) cell in turn: singular and plural
    assert [(c.template, c.condition, c.index) for c in two["simple_agrmt"]] == [
        ("simple_agrmt", "sing_MS_MV", 0), ("simple_agrmt", "plur_MS_MV", 0)]
    assert two["simple_agrmt"][0].sentences == ("the author laughs", "the author laugh")
    assert {c.template for c in load_cases(folder, ["prep"], per_construction=8)["prep"]} == {
        "prep_anim", "prep_inanim"}
    npi = two["simple_npi"][0]
    assert npi.sentences[0].startswith("no ") and npi.sentences[2].startswith("most ")
    assert [i.rsplit("/", 1)[1] for i in npi.pairs()] == ["intrusive", "ungrammatical"]


def test_eval_scores_each_construction_and_reruns_from_the_cache(capsys, tiny_lm, prepared_data_dir):
    args = ["eval", "marvin-linzen", str(tiny_lm), "--constructions", "simple_agrmt,prep,simple_npi",
            "--pairs-per-construction", "2", "--data-dir", str(prepared_data_dir), "--json"]
    assert main(args) == 0
    captured = capsys.readouterr()
    result = json.loads(captured.out)
    assert "computed 8 of 8 items" in captured.err  # 2 + 2 pairs, and 2 NPI triples of 2 pairs each
    m = result["metrics"]
    items = [json.loads(x) for x in open(f"{result['out']}/items.jsonl")]
    assert len(items) == m["pairs"] == 8
    for name in ("simple_agrmt", "prep", "simple_npi"):
        mine = [i["correct"] for i in items if i["construction"] == name]
        assert m["constructions"][name] == sum(mine) / len(mine)
    assert m["phenomena"] == {"agreement": (m["constructions"]["simple_agrmt"] + m["constructions"]["prep"]) / 2,
                              "npi": m["constructions"]["simple_npi"]}
    assert m["accuracy"] == sum(m["constructions"].values()) / 3
    assert list(m["comparisons"]) == ["simple_npi"] and set(m["comparisons"]["simple_npi"]) == {
        "intrusive", "ungrammatical"}
    scorer = load_scorer(tiny_lm, "exact")  # whole sentences, as BLiMP: the exact scorer's totals
    (good,) = scorer.score([[t.text for t in tokenize("the author laughs")]])
    assert items[0]["id"] == "simple_agrmt/sing_MS_MV/0/ungrammatical" and items[0]["logprob_good"] == close32(
        good.total)
    assert "3 constructions, 2 cases per construction (8 pairs)" in result["headline"]
    assert main(args) == 0
    captured = capsys.readouterr()
    assert "computed 0 of 8 items" in captured.err and json.loads(captured.out) == result


def test_a_malformed_template_is_one_error_line(capsys, tiny_lm, tmp_path):
    (tmp_path / "simple_agrmt.json").write_text('{\n "sing_MS_MV": [\n  ["the author laughs", "the author laugh"],\n'
                                                '  ["the author swims"]\n ]\n}\n')
    code = main(["eval", "marvin-linzen", str(tiny_lm), "--templates-dir", str(tmp_path), "--out",
                 str(tmp_path / "out")])
    captured = capsys.readouterr()
    assert code == 2 and not captured.out and captured.err.count("\n") == 1
    assert captured.err.startswith(f"synbench: error: {tmp_path / 'simple_agrmt.json'}:4: condition 'sing_MS_MV'")
    assert not (tmp_path / "out").exists()
