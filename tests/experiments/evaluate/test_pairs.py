"""``synbench eval pairs FILE.jsonl MODEL...`` end to end: scored as BLiMP scores its pairs, grouped, cached, a changed
file scored again, several models, and bad files as one error line with nothing written."""

from __future__ import annotations

import json

import pytest

from experiments.cli import main
from experiments.evaluate.scorers.ngram import build_ngram, save
from lightning_modules.data.checksums import file_sha256

PARADIGMS = ("anaphor_number_agreement", "regular_plural_subject_verb_agreement_1")


def run(capsys, *argv):
    code = main(["eval", *map(str, argv)])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def computed(err: str) -> int:
    return int(err.split("computed ")[1].split(" ")[0])


def blimp_lines(data_dir, k: int = 3) -> list[str]:
    """The first ``k`` pairs of each of two staged BLiMP paradigms, as lines of a pairs file."""
    return [line for uid in PARADIGMS
            for line in (data_dir / "blimp" / "data" / f"{uid}.jsonl").read_text().splitlines()[:k]]


def test_a_blimp_file_scores_as_blimp_and_a_changed_file_is_scored_again(capsys, tiny_lm, prepared_data_dir,
                                                                          tmp_path):
    path = tmp_path / "pairs.jsonl"
    path.write_text("\n".join(blimp_lines(prepared_data_dir)[:3]) + "\n\n" + "\n".join(
        blimp_lines(prepared_data_dir)[3:]) + "\n")  # a blank line is skipped
    code, out, err = run(capsys, "pairs", path, tiny_lm, "--json")
    assert code == 0 and computed(err) == 6
    result = json.loads(out)
    code, out, _ = run(capsys, "blimp", tiny_lm, "--paradigms", ",".join(PARADIGMS), "--pairs-per-paradigm", 3,
                       "--data-dir", prepared_data_dir, "--json")
    blimp = json.loads(out)
    m = result["metrics"]
    # the same pairs, the same log-probabilities and verdicts as the built-in task
    pairs_items = [json.loads(x) for x in open(f"{result['out']}/items.jsonl")]
    blimp_items = [json.loads(x) for x in open(f"{blimp['out']}/items.jsonl")]
    assert [(i["logprob_good"], i["logprob_bad"], i["correct"]) for i in pairs_items] == [
        (i["logprob_good"], i["logprob_bad"], i["correct"]) for i in blimp_items]
    assert m["groups"]["UID"] == blimp["metrics"]["paradigms"] and m["group_means"]["UID"] == pytest.approx(
        blimp["metrics"]["accuracy"])
    assert m["groups"]["linguistics_term"] == blimp["metrics"]["phenomena"] and set(m["groups"]) == {
        "UID", "field", "linguistics_term"}
    assert m["accuracy"] == sum(i["correct"] for i in pairs_items) / 6 and m["pairs"] == 6
    assert [i["line"] for i in pairs_items] == [1, 2, 3, 5, 6, 7]
    assert result["settings"]["file_sha256"] == file_sha256(path)
    record = json.loads(open(f"{result['out']}/results.json").read())
    assert record["data"]["pairs"] == {"path": str(path), "sha256": file_sha256(path)}
    assert "ties wrong" in result["convention"] and "end of the sentence" in result["convention"]

    code, out, err = run(capsys, "pairs", path, tiny_lm, "--json")
    assert code == 0 and computed(err) == 0 and json.loads(out) == result  # served from the cache

    fixed = tmp_path / "out"
    assert run(capsys, "pairs", path, tiny_lm, "--out", fixed)[0] == 0
    path.write_text(path.read_text() + blimp_lines(prepared_data_dir, 4)[3] + "\n")  # the file changes
    code, out, err = run(capsys, "pairs", path, tiny_lm, "--out", fixed, "--json")
    assert code == 0 and computed(err) == 7  # every pair again: never the old file's cache
    assert json.loads(out)["settings"]["file_sha256"] == file_sha256(path)
    code, out, err = run(capsys, "pairs", path, tiny_lm, "--json")
    assert json.loads(out)["out"] != result["out"]  # another file, another task

    code, out, err = run(capsys, "pairs", "--file", path, tiny_lm, "--sha256", "0" * 64)  # the plan's form
    assert code == 2 and not out and err.count("\n") == 1
    assert err.startswith(f"synbench: error: {path}: changed since the evaluation was planned")


def test_several_models_and_any_grouping_field(capsys, tiny_lm, tiny_treebank, tmp_path):
    bigram = tmp_path / "bigram.json"
    save(build_ngram(str(tiny_treebank), "file", 2, min_count=1), bigram)
    path = tmp_path / "mine.jsonl"
    pairs = [("the dogs bark .", "the dogs barks .", 1), ("a dog barks .", "a dog bark .", 1),
             ("who did you see ?", "who did you see him ?", 2)]
    path.write_text("".join(json.dumps({"sentence_good": g, "sentence_bad": b, "set": s, "note": [1]}) + "\n"
                            for g, b, s in pairs))
    code, out, err = run(capsys, "pairs", path, tiny_lm, bigram, "--group-by", "set", "--json")
    assert code == 0 and err.count("computed 3 of 3") == 2
    first, second = (json.loads(line) for line in out.splitlines())  # one result per model, in order
    assert first["settings"]["family"] != second["settings"]["family"] and first["out"] != second["out"]
    for result in (first, second):
        items = [json.loads(x) for x in open(f"{result['out']}/items.jsonl")]
        assert result["metrics"]["groups"] == {"set": {
            "1": (items[0]["correct"] + items[1]["correct"]) / 2, "2": float(items[2]["correct"])}}
        assert [i["groups"] for i in items] == [{"set": "1"}, {"set": "1"}, {"set": "2"}]
    code, out, err = run(capsys, "pairs", path, tiny_lm, bigram, "--out", tmp_path / "o")
    assert code == 2 and "--out names the results folder of one MODEL" in err and not (tmp_path / "o").exists()


GOOD = json.dumps({"sentence_good": "the dog barks .", "sentence_bad": "the dog bark .", "UID": "a"})


@pytest.mark.parametrize(("lines", "extra", "where", "message"), [
    ([GOOD, "{not json"], [], 2, "invalid JSON"),
    ([GOOD, json.dumps({"sentence_good": "a b ."})], [], 2, "missing field 'sentence_bad'"),
    ([], [], 1, "no pairs (the file is empty)"),
    ([GOOD, json.dumps({"sentence_good": "a .", "sentence_bad": "b ."})], [], 2, "missing field 'UID'"),
    ([GOOD], ["--group-by", "UID,phenomenon"], 1, "missing field 'phenomenon'"),
    ([GOOD, json.dumps({"sentence_good": "a .", "sentence_bad": 3, "UID": "a"})], [], 2, "must be a string"),
    ([GOOD, json.dumps(["a", "b"])], [], 2, "expected a JSON object"),
    ([json.dumps({"sentence_good": "", "sentence_bad": "b .", "UID": "a"})], [], 1, "good: empty sentence"),
])
def test_bad_pairs_files_are_one_error_line_and_nothing_written(capsys, tiny_lm, tmp_path, lines, extra, where,
                                                                 message):
    path = tmp_path / "bad.jsonl"
    path.write_text("".join(line + "\n" for line in lines))
    code, out, err = run(capsys, "pairs", path, tiny_lm, "--out", tmp_path / "out", *extra)
    assert code == 2 and not out and err.count("\n") == 1, err
    assert err.startswith(f"synbench: error: {path}:{where}") and message in err, err
    assert not (tmp_path / "out").exists()
