"""``synbench eval ppl|sg|blimp|rerank|uas`` end to end on tiny checkpoints trained here, caching, bad input."""

from __future__ import annotations

import json
import math

import pytest

from experiments.cli import main
from experiments.config import resolve_train_config
from experiments.evaluate.cache import IDENTITY_FILE, ItemCache, task_hash
from experiments.evaluate.proposal_files import with_tags
from experiments.evaluate.scorers import load_scorer
from experiments.evaluate.sg import condition_text, load_suites, region_sums
from experiments.evaluate.tokenize import tokenize
from experiments.train import train
from lightning_modules.data.transforms import right_branching
from lightning_modules.data.tree import clean, drop_pos_tags, read_bracketed, to_bracketed
from lightning_modules.errors import InputError
from tests.experiments.families.parser.test_proposals import TINY as PARSER_TINY
from tests.experiments.test_train import config
from tests.tolerances import close32

SUITES = "number_prep,subordination"
PARADIGMS = "anaphor_number_agreement,regular_plural_subject_verb_agreement_1"
BEAM = ["--method", "beam", "--beam", "3", "--word-beam", "2", "--max-actions", "2"]


@pytest.fixture(scope="module")
def treebank(tmp_path_factory, shared_data):
    trees = [t for f in ("wsj_0001.mrg", "wsj_0002.mrg", "wsj_0003.mrg")
             for _, t in read_bracketed(shared_data / "ptb_nltk_sample" / "combined" / f)]
    trees = [t for t in trees if len(clean(t).leaves()) <= 20][:16]
    path = tmp_path_factory.mktemp("tb") / "small.mrg"
    path.write_text("".join(to_bracketed(t) + "\n" for t in trees))
    return path


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory, treebank):
    root = tmp_path_factory.mktemp("runs")
    out = {}
    steps = ["train.max_steps=4", "train.val_every=4", "train.ckpt_every=4", "data.min_count=1"]
    for family in ("tg", "txl-terminals"):
        train(config(family, treebank, *steps), seed=0, run_dir=root / family)
    parser = resolve_train_config("proposal-parser", "cpu-small", PARSER_TINY + steps + [
        f"data.corpus={treebank}", "data.train_split=file", "data.valid_split=file"])
    train(parser, seed=0, run_dir=root / "proposal-parser")
    for family in ("tg", "txl-terminals", "proposal-parser"):
        out[family] = root / family / "checkpoints" / "best.ckpt"
    return out


def run(capsys, *argv):
    code = main(["eval", *map(str, argv)])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def run_json(capsys, *argv):
    code, out, err = run(capsys, *argv, "--json")
    assert code == 0, err
    return json.loads(out), err


def computed(err: str) -> int:
    return int(err.split("computed ")[1].split(" ")[0])


# -- perplexity ----------------------------------------------------------------------------------------
def test_ppl_exact_equals_the_scorer_and_reruns_from_the_cache(capsys, checkpoints, treebank, tmp_path):
    ckpt = checkpoints["txl-terminals"]
    args = ["ppl", ckpt, "--corpus", treebank, "--split", "file", "--limit", "5"]
    first, err = run_json(capsys, *args)
    assert computed(err) == 5
    words = [clean(t).leaves() for _, t in read_bracketed(treebank)][:5]
    scores = load_scorer(ckpt, "exact").score(words)
    total, n = sum(s.total for s in scores), sum(len(w) for w in words)
    m = first["metrics"]
    assert m["words"] == n and m["sentences"] == 5
    assert m["word_ppl"] == pytest.approx(math.exp(-total / n), rel=1e-9)
    ends = sum(s.end_logprob for s in scores)
    assert m["word_ppl_without_end"] == pytest.approx(math.exp(-(total - ends) / n), rel=1e-9)
    assert first["settings"]["method"] == "exact" and first["settings"]["limit"] == 5
    assert "exact" in first["convention"] and "PPL" in first["headline"] and "5 sentences" in first["headline"]
    out_dir = ckpt.parent.parent / "eval"
    assert first["out"].startswith(str(out_dir)) and "ppl-" in first["out"]
    record = json.loads((out_dir.parent / first["out"] / "results.json").read_text())
    assert record["settings"] == first["settings"] and record["config"]["model_sha256"]

    again, err = run_json(capsys, *args)
    assert computed(err) == 0 and again == first  # cache hit: nothing computed, the same result

    items = out_dir.parent / first["out"] / "items.jsonl"
    lines = items.read_text().splitlines()
    items.write_text("\n".join([lines[0], "{not json", lines[2][:-5], *lines[3:]]) + "\n")
    repaired, err = run_json(capsys, *args)
    assert computed(err) == 2  # the corrupted line and the truncated one are recomputed, never trusted
    # recomputed in another batch: equal up to float32 batching noise
    assert repaired["metrics"]["word_ppl"] == pytest.approx(m["word_ppl"], rel=1e-5)

    other, err = run_json(capsys, *args[:-1], "4")
    assert other["out"] != first["out"] and computed(err) == 4  # another subset is another task


def test_ppl_joint_model_gold_and_beam_are_bounds(capsys, checkpoints, treebank):
    ckpt = checkpoints["tg"]
    common = ["ppl", ckpt, "--corpus", treebank, "--split", "file", "--limit", "2"]
    gold, _ = run_json(capsys, *common, "--method", "gold")
    words = [clean(t).leaves() for _, t in read_bracketed(treebank)][:2]
    scores = load_scorer(ckpt, "gold", trees=treebank).score(words)
    n = sum(len(w) for w in words)
    assert gold["metrics"]["word_ppl"] == pytest.approx(math.exp(-sum(s.total for s in scores) / n), rel=1e-6)
    assert "upper bound" in gold["convention"] and "<=" in gold["headline"]
    structure = sum(s.extra["structure_logprob"] for s in scores)
    m = gold["metrics"]
    assert m["structure_nll_per_word"] == pytest.approx(-structure / n, rel=1e-6)
    assert m["word_ppl_given_tree"] * math.exp(m["structure_nll_per_word"]) == pytest.approx(m["word_ppl"], rel=1e-9)
    beam, _ = run_json(capsys, *common, *BEAM)
    assert beam["settings"]["beam"] == 3 and beam["settings"]["word_beam"] == 2
    assert "beam 3/2" in beam["headline"] and "paper: 300" in beam["headline"]
    assert beam["settings"]["scorer_convention"]["bound"] is True


def test_ppl_of_an_ngram_model_file(capsys, treebank, tmp_path):
    from experiments.evaluate.scorers.ngram import build_ngram, save

    model = build_ngram(str(treebank), "file", order=3, min_count=1)
    path = tmp_path / "kn3.json"
    save(model, path)
    result, _ = run_json(capsys, "ppl", path, "--corpus", treebank, "--split", "file", "--out", tmp_path / "o")
    words = [clean(t).leaves() for _, t in read_bracketed(treebank)]
    total = sum(s.total for s in model.score(words))
    assert result["metrics"]["word_ppl"] == pytest.approx(math.exp(-total / sum(map(len, words))), rel=1e-9)
    assert result["settings"]["family"] == "kn3" and (tmp_path / "o" / "results.json").is_file()


# -- SyntaxGym --------------------------------------------------------------------------------------------
def test_sg_from_a_string_model_equals_sg_from_its_surprisal_file(capsys, checkpoints, prepared_data_dir, tmp_path):
    ckpt = checkpoints["txl-terminals"]
    result, err = run_json(capsys, "sg", ckpt, "--suites", SUITES, "--items-per-suite", 3,
                           "--data-dir", prepared_data_dir)
    assert computed(err) == 6 and sorted(result["suites"]) == SUITES.split(",")
    assert all(len(s["items"]) == 3 for s in result["suites"].values())
    assert result["score"] is None  # 2 of the 31 suites: never an overall score
    assert result["settings"]["items_per_suite"] == 3 and "3 items per suite" in result["headline"]
    assert 0 <= result["oov_rate"] <= 1

    # the same per-word values, summed into regions here and written as a surprisal file
    suites = load_suites(prepared_data_dir / "syntaxgym_hu2020" / "json")
    scorer = load_scorer(ckpt, "exact")
    lines = []
    for name in SUITES.split(","):
        for item in suites[name].items[:3]:
            for condition, contents in item.conditions.items():
                text, spans = condition_text(contents)
                tokens = tokenize(text)
                (score,) = scorer.score([[t.text for t in tokens]])
                bits = [-lp / math.log(2) for lp in score.word_logprobs]
                sums = region_sums(spans, [(t.start, t.end) for t in tokens], bits)
                lines += [json.dumps({"suite": name, "item": item.number, "condition": condition, "region": r,
                                      "surprisal": v}) for r, v in enumerate(sums, start=1)]
    # the file route scores whole suites: cut the suites folder to the same 3 items
    cut = tmp_path / "suites"
    cut.mkdir()
    for name in SUITES.split(","):
        data = json.loads((prepared_data_dir / "syntaxgym_hu2020" / "json" / f"{name}.json").read_text())
        data["items"] = data["items"][:3]
        (cut / f"{name}.json").write_text(json.dumps(data))
    surprisals = tmp_path / "s.jsonl"
    surprisals.write_text("\n".join(lines) + "\n")
    _, from_file, _ = run(capsys, "sg", "--surprisals", surprisals, "--suites-dir", cut, "--json")
    expected = json.loads(from_file)
    keys = ("suites", "circuits", "score", "score_suite_set", "suite_set_scores")
    assert {k: result[k] for k in keys} == {k: expected[k] for k in keys}
    written_file = f"{result['out']}/surprisals.jsonl"
    _, written, _ = run(capsys, "sg", "--surprisals", written_file, "--suites-dir", cut, "--json")
    assert json.loads(written) == expected

    again, err = run_json(capsys, "sg", ckpt, "--suites", SUITES, "--items-per-suite", 3,
                          "--data-dir", prepared_data_dir)
    assert computed(err) == 0 and again == result


def test_sg_joint_model_with_the_beam(capsys, checkpoints, prepared_data_dir):
    result, err = run_json(capsys, "sg", checkpoints["tg"], *BEAM, "--suites", SUITES, "--items-per-suite", 3,
                           "--data-dir", prepared_data_dir)
    assert computed(err) == 6 and result["settings"]["method"] == "beam"
    assert all(len(s["items"]) == 3 for s in result["suites"].values())
    assert "beam 3/2" in result["headline"] and result["settings"]["scorer_convention"]["incremental"] == "beam"


def test_sg_joint_model_with_parser_proposals_drawn_per_sentence(capsys, checkpoints, prepared_data_dir):
    from experiments.evaluate.scorer_choice import SentenceSeededProposals

    source = SentenceSeededProposals(checkpoints["proposal-parser"], n=3, seed=1)
    a, b = ["The", "dog", "barks", "."], ["The", "cats", "sleep"]
    assert source([a, b]) == [*source([a]), *source([b])]  # the same trees whatever else is evaluated
    assert all(1 <= len(trees) <= 3 for trees in source([a, b]))
    result, err = run_json(capsys, "sg", checkpoints["tg"], "--method", "proposals", "--parser",
                           checkpoints["proposal-parser"], "-n", 3, "--suites", "number_prep",
                           "--items-per-suite", 2, "--data-dir", prepared_data_dir)
    assert computed(err) == 2 and result["settings"]["n_proposals"] == 3 and result["settings"]["parser_sha256"]
    assert result["settings"]["scorer_convention"]["incremental"] == "proposal-prefixes"
    assert "N = 3 proposals from parser:" in result["headline"]


def test_sg_joint_model_with_the_union_of_beam_trees_and_proposals(capsys, checkpoints, prepared_data_dir):
    """--method beam with --parser: the marginal over the beam's trees and the proposals together, no looser
    than the beam alone."""
    common = ["sg", checkpoints["tg"], *BEAM, "--suites", "number_prep", "--items-per-suite", 1, "--data-dir",
              prepared_data_dir]
    union, _ = run_json(capsys, *common, "--parser", checkpoints["proposal-parser"], "-n", 3)
    convention = union["settings"]["scorer_convention"]
    assert convention["method"] == "beam" and convention["incremental"] == "union-prefixes"
    assert convention["n_proposals"] == 3 and convention["proposal_source"].startswith("parser:")
    assert union["settings"]["n_proposals"] == 3 and union["settings"]["parser_sha256"]
    assert "union of the beam's trees (beam 3/2" in union["headline"]
    code, _, err = run(capsys, "sg", checkpoints["tg"], "--method", "gold", "--parser",
                       checkpoints["proposal-parser"], "--suites", "number_prep", "--data-dir", prepared_data_dir)
    assert code == 2 and "need --method proposals or beam" in err


# -- BLiMP ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("family", ["txl-terminals", "tg"])
def test_blimp_pairs_compare_sentence_totals(capsys, checkpoints, prepared_data_dir, family):
    ckpt = checkpoints[family]
    extra = BEAM if family == "tg" else []
    args = ["blimp", ckpt, *extra, "--paradigms", PARADIGMS, "--pairs-per-paradigm", 5,
            "--data-dir", prepared_data_dir]
    result, err = run_json(capsys, *args)
    assert computed(err) == 10
    m = result["metrics"]
    assert sorted(m["paradigms"]) == sorted(PARADIGMS.split(",")) and m["pairs"] == 10
    items = [json.loads(x) for x in open(f"{result['out']}/items.jsonl")]
    assert len(items) == 10 and all(it["correct"] == (it["logprob_good"] > it["logprob_bad"]) for it in items)
    assert m["accuracy"] == pytest.approx(sum(
        sum(it["correct"] for it in items if it["uid"] == uid) / 5 for uid in PARADIGMS.split(",")) / 2)
    if family == "txl-terminals":  # the totals are the exact scorer's
        scorer = load_scorer(ckpt, "exact")
        first = json.loads(open(prepared_data_dir / "blimp" / "data" / "anaphor_number_agreement.jsonl").readline())
        (good,) = scorer.score([[t.text for t in tokenize(first["sentence_good"])]])
        assert items[0]["logprob_good"] == close32(good.total)
    assert "5 pairs per paradigm" in result["headline"]
    again, err = run_json(capsys, *args)
    assert computed(err) == 0 and again == result


# -- reranking --------------------------------------------------------------------------------------------
def test_rerank_picks_a_proposal_and_the_oracle_finds_gold(capsys, checkpoints, treebank, tmp_path):
    gold = [clean(t) for _, t in read_bracketed(treebank)][:3]
    wrong = [with_tags(right_branching(drop_pos_tags(t)), [tag for _, tag in t.pos()]) for t in gold]
    proposals, logq = tmp_path / "p.jsonl", tmp_path / "q.jsonl"
    proposals.write_text("".join(json.dumps({"sentence": k, "trees": [to_bracketed(w), to_bracketed(t)]}) + "\n"
                                 for k, (w, t) in enumerate(zip(wrong, gold))))
    logq.write_text("".join(json.dumps({"sentence": k, "logq": [-2.0, -1.0]}) + "\n" for k in range(3)))
    result, err = run_json(capsys, "rerank", checkpoints["tg"], "--proposals", proposals, "--logq", logq,
                           "--gold", treebank, "--limit", 3)
    m = result["metrics"]
    assert m["oracle"]["all"]["bracket_f1"] == 100.0 and m["parser_1best"]["all"]["bracket_f1"] == 100.0
    assert 0 <= m["reranked"]["all"]["bracket_f1"] <= 100.0 and m["proposals_per_sentence"] == 2
    reranked = open(f"{result['out']}/reranked.txt").read().splitlines()
    assert all(r in (to_bracketed(w), to_bracketed(t)) for r, w, t in zip(reranked, wrong, gold))
    assert "oracle 100.0" in result["headline"] and computed(err) == 3
    # perplexity over the same file without -n: the results name the file's N (2), not -n's default (300)
    result, _ = run_json(capsys, "ppl", checkpoints["tg"], "--proposals", proposals, "--corpus", treebank,
                         "--split", "file", "--limit", 3)
    assert result["settings"]["n_proposals"] == 2 and "N = 2 proposals" in result["headline"]
    assert result["settings"]["scorer_convention"]["n_proposals"] == 2
    # one --out folder (the evaluation plan's RUN/eval/ppl) scored again over other proposals (a retrained
    # parser's): none of the old items is reused
    fixed, others = tmp_path / "eval-ppl", tmp_path / "gold-only.jsonl"
    others.write_text("".join(json.dumps({"sentence": k, "trees": [to_bracketed(t)]}) + "\n"
                              for k, t in enumerate(gold)))
    args = ["ppl", checkpoints["tg"], "--method", "proposals", "--corpus", treebank, "--split", "file", "--limit", 3,
            "--out", fixed]
    both, err = run_json(capsys, *args, "--proposals", proposals)
    assert computed(err) == 3
    _, err = run_json(capsys, *args, "--proposals", proposals)
    assert computed(err) == 0  # the same evaluation: a cache hit
    one, err = run_json(capsys, *args, "--proposals", others)
    assert computed(err) == 3 and one["settings"]["proposals_sha256"] != both["settings"]["proposals_sha256"]
    assert one["metrics"]["word_ppl"] > both["metrics"]["word_ppl"]  # without the tree this model prefers
    fresh, _ = run_json(capsys, *args[:-2], "--proposals", others)  # the same evaluation in its own folder
    assert fresh["out"] != str(fixed) and fresh["metrics"] == one["metrics"]


# -- UAS --------------------------------------------------------------------------------------------------
CONLLU = """# sent_id = 1
1\tThe\tthe\tDET\tDT\t_\t2\tdet\t_\t_
2\tdog\tdog\tNOUN\tNN\t_\t3\tnsubj\t_\t_
3\tbarks\tbark\tVERB\tVBZ\t_\t0\troot\t_\t_
4\t.\t.\tPUNCT\t.\t_\t3\tpunct\t_\t_

"""


def test_uas_excludes_punctuation_and_reports_mismatches(capsys, tmp_path):
    gold, test = tmp_path / "g.conllu", tmp_path / "t.conllu"
    gold.write_text(CONLLU)
    # "The" attached to "barks" (wrong head), "dog" right head with subtype label, "." wrong head
    test.write_text(CONLLU.replace("2\tdet", "3\tdet").replace("3\tnsubj\t", "3\tnsubj:pass\t")
                    .replace("3\tpunct", "2\tpunct"))
    code, out, _ = run(capsys, "uas", gold, test, "--json")
    scores = json.loads(out)
    assert code == 0 and scores["words"] == 3 and scores["uas"] == pytest.approx(200 / 3)
    assert scores["las"] == pytest.approx(200 / 3) and scores["punctuation"] == "ptb-tags"
    code, out, _ = run(capsys, "uas", gold, test, "--json", "--punct")
    assert json.loads(out)["uas"] == 50.0 and json.loads(out)["words"] == 4
    # ptb-tags reads the gold XPOS (`` '' . , :), upos the gold UPOS: a bracket CoreNLP tags PUNCT is scored
    # by the first and skipped by the second
    bracket = CONLLU.replace("4\t.\t.\tPUNCT\t.", "4\t-RRB-\t-rrb-\tPUNCT\t-RRB-")
    gold.write_text(bracket)
    test.write_text(bracket)
    for rule, words in (("ptb-tags", 4), ("upos", 3), ("none", 4)):
        code, out, _ = run(capsys, "uas", gold, test, "--json", "--punctuation", rule)
        assert code == 0 and json.loads(out)["words"] == words and json.loads(out)["punctuation"] == rule
    gold.write_text(CONLLU)
    test.write_text(CONLLU.replace("2\tdog\tdog", "2\tcat\tcat"))
    code, _, err = run(capsys, "uas", gold, test)
    assert code == 2 and err.strip() == f"synbench: error: {test}:3: word 2 is 'cat' but the gold word is 'dog'"
    test.write_text(CONLLU + CONLLU.replace("sent_id = 1", "sent_id = 2"))
    code, _, err = run(capsys, "uas", gold, test)
    assert code == 2 and "2 sentences but the gold file" in err and err.count("\n") == 1


# -- bad input and the cache ------------------------------------------------------------------------------
def test_bad_input_is_one_error_line(capsys, checkpoints, treebank, tmp_path, prepared_data_dir):
    suites = tmp_path / "suites"
    suites.mkdir()
    (suites / "bad.json").write_text('{"meta": {"name": "bad"}, "region_meta": {"1": "a"}, "predictions": '
                                     '[{"type": "formula", "formula": "(1;%x%) >"}], "items": []}')
    cases = [
        (["sg", checkpoints["txl-terminals"], "--suites-dir", suites], "bad.json"),
        (["ppl", tmp_path / "missing.ckpt", "--corpus", treebank, "--split", "file"], "model file not found"),
        (["ppl", checkpoints["tg"], "--method", "exact", "--corpus", treebank, "--split", "file"], "joint model"),
        (["sg", checkpoints["txl-terminals"], "--suites", "nope", "--data-dir", prepared_data_dir], "unknown suite"),
        (["blimp", checkpoints["txl-terminals"], "--pairs-per-paradigm", 0, "--data-dir", prepared_data_dir],
         "argument --pairs-per-paradigm: expected an integer >= 1, got '0'"),
        (["sg"], "either a CHECKPOINT or --surprisals"),
    ]
    bad_proposals = tmp_path / "p.jsonl"
    bad_proposals.write_text('{"sentence": 0, "trees": ["(S (NP a)"]}\n')
    cases.append((["rerank", checkpoints["tg"], "--proposals", bad_proposals, "--gold", treebank],
                  f"{bad_proposals}:1"))
    for argv, expected in cases:
        code, out, err = run(capsys, *argv)
        assert code == 2 and err.startswith("synbench: error: ") and err.count("\n") == 1, (argv, err)
        assert expected in err and not out, (argv, err)
    assert not (checkpoints["tg"].parent.parent / "eval" / "rerank").exists()


def test_item_cache_ignores_corrupt_lines_and_completes_a_truncated_one(tmp_path):
    path = tmp_path / "items.jsonl"
    identity = {"task": "t", "proposals_sha256": "a"}
    (tmp_path / IDENTITY_FILE).write_text(task_hash(identity) + "\n")
    path.write_text('{"id": "a", "x": 1}\n[1, 2]\n{"id": "b", "x": "no"}\n{"id": "c", "x"')
    cache = ItemCache(tmp_path, lambda r: isinstance(r["x"], int), identity)
    assert list(cache.records) == ["a"] and cache.missing(["a", "b", "c"]) == ["b", "c"]
    cache.fill(["a", "b", "c"], lambda ids: [{"id": i, "x": 2} for i in ids])
    assert cache.computed == 2
    reread = ItemCache(tmp_path, lambda r: isinstance(r["x"], int), identity)
    assert reread.records == {"a": {"id": "a", "x": 1}, "b": {"id": "b", "x": 2}, "c": {"id": "c", "x": 2}}


def test_item_cache_never_reuses_the_items_of_another_evaluation_in_its_folder(tmp_path):
    """A fixed --out folder (the plan's RUN/eval/ppl) scored again with other proposals: the old items and
    results go, every item is computed again; a folder from before items.identity is judged by its results'
    config_hash."""
    old, new = {"task": "ppl", "proposals_sha256": "old"}, {"task": "ppl", "proposals_sha256": "new"}
    ItemCache(tmp_path, lambda r: True, old).add([{"id": "0", "x": 1}])
    (tmp_path / "results.json").write_text(json.dumps({"config_hash": task_hash(old), "metrics": {}}))
    cache = ItemCache(tmp_path, lambda r: True, new)
    assert cache.records == {} and not (tmp_path / "results.json").exists()
    assert (tmp_path / IDENTITY_FILE).read_text().strip() == task_hash(new)
    cache.add([{"id": "0", "x": 2}])
    (tmp_path / IDENTITY_FILE).unlink()  # an older folder: only results.json says whose items these are
    (tmp_path / "results.json").write_text(json.dumps({"config_hash": task_hash(new), "metrics": {}}))
    assert ItemCache(tmp_path, lambda r: True, new).records == {"0": {"id": "0", "x": 2}}
    (tmp_path / "results.json").unlink()  # nothing says: not trusted
    assert ItemCache(tmp_path, lambda r: True, new).records == {}
    (tmp_path / "a-file").write_text("x")
    with pytest.raises(InputError, match="cannot use as a results folder") as error:  # --out names a file
        ItemCache(tmp_path / "a-file", lambda r: True, new)
    assert error.value.location == str(tmp_path / "a-file")
