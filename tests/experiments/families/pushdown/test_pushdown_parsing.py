"""``synbench eval parse``: beam-search parses of a Pushdown-LM scored against binarized gold trees (§5)."""

from __future__ import annotations

import json

import pytest

from experiments.cli import main
from experiments.config import resolve_train_config
from experiments.evaluate.evalb import UNLABELED, evaluate_files, evaluate_lines
from experiments.families.pushdown.parsing import binarized_gold, right_branching, tagged
from experiments.families.pushdown.scorers import BeamScorer, PushdownModel
from experiments.train import train
from lightning_modules.data.tree import clean, parse_tree, read_bracketed, to_bracketed

TINY = ["model.d_model=32", "model.n_layers=2", "model.n_heads=2", "model.d_ff=64", "model.attachment_depth_dim=8",
        "model.warmup_steps=2", "model.total_steps=20", "model.peak_lr=3e-3", "train.batch_size=4",
        "train.eval_batch_size=8", "train.log_every=1", "runtime.wandb=disabled", "runtime.progress=false",
        "runtime.threads=1", "train.max_steps=2", "train.val_every=2", "train.ckpt_every=2"]
FIG2 = "(S (NP (DT The) (NN dog)) (VP (VBZ is) (ADJP (JJ happy))))"


def test_gold_is_binarized_as_in_training_and_scores_100_against_itself():
    assert binarized_gold(parse_tree(FIG2)) == "(X (X (DT The) (NN dog)) (X (VBZ is) (JJ happy)))"
    # n-ary nodes are right-factored, unary chains collapsed, punctuation kept under its tag
    tree = parse_tree("(S (NP (DT The) (JJ big) (NN dog)) (VP (VBZ barks)) (. .))")
    line = binarized_gold(tree)
    assert line == "(X (X (DT The) (X (JJ big) (NN dog))) (X (VBZ barks) (. .)))"
    result = evaluate_lines([line], [line], UNLABELED, "g", "t").as_dict()
    assert result["all"]["bracket_f1"] == 100.0


def test_right_branching_and_lone_words():
    assert to_bracketed(right_branching(["a", "b", "c"])) == "(X a (X b c))"
    assert tagged(right_branching(["a"]), ["DT"]) == "(X (DT a))"


@pytest.fixture(scope="module")
def runs(tmp_path_factory, shared_data):
    trees = [t for _, t in read_bracketed(shared_data / "ptb_nltk_sample" / "combined" / "wsj_0003.mrg")]
    root = tmp_path_factory.mktemp("parse")
    treebank = root / "small.mrg"
    treebank.write_text("".join(to_bracketed(t) + "\n" for t in trees[:16]))
    out = {"treebank": treebank}
    for name, family, extra in (("pushdown", "pushdown", ["data.min_count=1"]), ("base-lm", "base-lm", []),
                                ("pieces", "pushdown", ["data.terminals=sentencepiece", "data.sp_vocab_size=150"])):
        cfg = resolve_train_config(family, "cpu-small", [*TINY, f"data.corpus={treebank}", "data.train_split=file",
                                                          "data.valid_split=file", *extra])
        train(cfg, seed=1, run_dir=root / name)
        out[name] = root / name / "checkpoints" / "best.ckpt"
    return out


def test_parse_scores_the_beam_best_trees_and_reruns_from_the_cache(runs, tmp_path, capsys):
    out = tmp_path / "ev"
    argv = ["eval", "parse", str(runs["pushdown"]), "--gold", str(runs["treebank"]), "--limit", "3", "--beam", "2",
            "--out", str(out), "--json"]
    assert main(argv) == 0
    captured = capsys.readouterr()
    result = json.loads(captured.out)
    assert "computed 3 of 3 items" in captured.err
    metrics, settings = result["metrics"], result["settings"]
    assert settings["sentences"] == 3 and settings["excluded_unknown"] == 0 and settings["beam"] == 2
    assert 0.0 <= metrics["parsed"]["all"]["bracket_f1"] <= 100.0
    assert metrics["right_branching"]["all"]["bracket_f1"] is not None
    assert "beam 2 over attachment decisions" in result["headline"]
    # the F1 is EVALB's on the two files written beside
    assert evaluate_files(out / "gold.txt", out / "parsed.txt", UNLABELED).as_dict()["all"] == metrics["parsed"]["all"]
    # each parse is the scorer's best tree with the gold tags, over the sentence's words
    gold = [clean(t) for _, t in read_bracketed(runs["treebank"])][:3]
    model = PushdownModel.load(str(runs["pushdown"]))
    scores = BeamScorer(model, beam=2).score([t.leaves() for t in gold])
    parsed = (out / "parsed.txt").read_text().splitlines()
    for line, score, tree in zip(parsed, scores, gold):
        assert parse_tree(line).leaves() == tree.leaves()
        assert line == tagged(parse_tree(score.best_tree), [t for _, t in tree.pos()])
    items = [json.loads(x) for x in (out / "items.jsonl").read_text().splitlines()]
    assert all(r["logprob"] <= r["marginal"] + 1e-9 for r in items)  # one tree's joint <= the beam's sum

    assert main(argv) == 0
    assert "computed 0 of 3 items (3 cached)" in capsys.readouterr().err


def test_parse_refuses_string_models_and_all_unknown_sentences(runs, tmp_path, capsys):
    argv = ["eval", "parse", str(runs["base-lm"]), "--gold", str(runs["treebank"]), "--limit", "2",
            "--out", str(tmp_path / "a")]
    assert main(argv) == 2
    assert "does not parse" in capsys.readouterr().err
    assert not (tmp_path / "a" / "results.json").exists()
    other = tmp_path / "other.mrg"
    other.write_text("(S (NP (NNP Zyxwv)) (VP (VBZ qwrtz)))\n")
    argv = ["eval", "parse", str(runs["pushdown"]), "--gold", str(other), "--unknown", "exclude",
            "--out", str(tmp_path / "b")]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--unknown" in err and "unknown words" in err


def test_sentencepiece_parses_are_over_words_and_unknown_pieces_are_left_out(runs, tmp_path, capsys):
    """Appendix C through the CLI: the beam runs over pieces, the parses are merged back into words."""
    argv = ["eval", "parse", str(runs["pieces"]), "--gold", str(runs["treebank"]), "--limit", "3", "--beam", "2",
            "--out", str(tmp_path / "p"), "--json"]
    assert main(argv) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["settings"]["sentences"] == 3 and result["settings"]["excluded_unknown"] == 0
    gold = [clean(t) for _, t in read_bracketed(runs["treebank"])][:3]
    model = PushdownModel.load(str(runs["pieces"]))
    assert any(len(model.encode(t.leaves()).ids) > len(t.leaves()) + 2 for t in gold)  # some words are split
    parsed = (tmp_path / "p" / "parsed.txt").read_text().splitlines()
    assert [parse_tree(line).leaves() for line in parsed] == [t.leaves() for t in gold]
    # "Zürich": "ü" is no piece of the vocabulary; left out by default for SentencePiece, kept on request
    other = tmp_path / "other.mrg"
    other.write_text("(S (NP (NNP Zürich)) (VP (VBZ is) (ADJP (JJ big))))\n(S (NP (PRP it)) (VP (VBZ is)))\n")
    assert model.is_unknown("Zürich") and not model.is_unknown("it")
    for unknown, kept in (("default", 1), ("keep", 2)):
        argv = ["eval", "parse", str(runs["pieces"]), "--gold", str(other), "--unknown", unknown, "--beam", "2",
                "--out", str(tmp_path / unknown), "--json"]
        assert main(argv) == 0
        settings = json.loads(capsys.readouterr().out)["settings"]
        assert settings["sentences"] == kept and settings["excluded_unknown"] == 2 - kept
