"""The RNNG family end to end: ``synbench train rnng --preset cpu-small`` on the PTB sample, its checkpoint
scored on gold trees (the tree-marginal scorer: log p(x, y_gold) = the sum of the model's per-action values)
and over proposals, and bad input as one ``InputError`` naming where."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
import torch

from experiments.config import resolve_train_config
from experiments.families import get_family
from experiments.train import train
from lightning_modules.data.tree import parse_tree
from lightning_modules.errors import InputError
from tests.experiments.families.rnng.leaderboard_check import check_on_the_leaderboard

TINY = ["train.batch_size=8", "train.eval_batch_size=64", "train.max_steps=6", "train.val_every=6",
        "train.ckpt_every=6", "train.log_every=1", "runtime.wandb=disabled",
        "runtime.progress=false", "runtime.threads=1"]


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory, prepared_data_dir) -> Path:
    threads = torch.get_num_threads()
    run = tmp_path_factory.mktemp("rnng") / "run"
    cfg = resolve_train_config("rnng", "cpu-small", [*TINY, f"runtime.data_dir={prepared_data_dir}"])
    metrics = train(cfg, seed=1, run_dir=run)
    torch.set_num_threads(threads)
    assert metrics["global_step"] == 6 and metrics["family"] == "rnng"
    assert metrics["val_ppl"] < metrics["vocab_size"] and metrics["nonterminals"] > 20
    assert json.loads((run / "DONE").read_text()) == metrics
    return run / "checkpoints" / "best.ckpt"


def test_gold_scores_are_the_sum_of_the_action_logprobs(checkpoint):
    from experiments.families.adapter import ScoringRequest

    trees = [parse_tree("(S (NP (DT The) (NN market)) (VP (VBD fell)) (. .))"),
             parse_tree("(S (NP (PRP It)) (VP (VBD rose) (ADVP (RB sharply))) (. .))")]
    sentences = [t.leaves() for t in trees]
    family = get_family("rnng")
    scoring = family.scoring(checkpoint, {}, ScoringRequest("gold", gold=lambda s: [[t] for t in trees]))
    scores = scoring.scorer.score(sentences)
    model = family.load(checkpoint)
    for tree, score in zip(trees, scores, strict=True):
        view = model.model_tree(tree, True, "test")
        expected = float(model.label_logprobs([model.encode_tree(view)])[0].sum())
        assert math.isclose(score.total, expected, rel_tol=1e-6)  # float32, batched with the other tree
        assert math.isclose(sum(score.word_logprobs) + score.end_logprob, score.total, rel_tol=1e-9)
        assert all(v < 0 for v in score.word_logprobs) and score.end_logprob < 0
        assert score.best_tree == str(tree)  # as given
    # over proposals (the gold tree and a flat one), the marginal is at least the gold tree's value
    flat = [parse_tree("(S (XX " + ") (XX ".join(s) + "))") for s in sentences]
    bound = family.scoring(checkpoint, {}, ScoringRequest("proposals", {"n": 300},
                                                          proposals=lambda s: [[t, f] for t, f in zip(trees, flat)],
                                                          source_name="test"))
    for gold, marginal in zip(scores, bound.scorer.score(sentences), strict=True):
        assert marginal.total >= gold.total and marginal.extra["trees"] == 2


def test_eval_ppl_gold_on_the_ptb_sample(checkpoint, tmp_path, capsys):
    from experiments.cli import main

    assert main(["eval", "ppl", str(checkpoint), "--method", "gold", "--corpus", "ptb-sample", "--split", "test",
                 "--limit", "4", "--json", "--out", str(tmp_path / "gold")]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["metrics"]["sentences"] == 4 and result["settings"]["scorer_convention"]["bound"]
    assert 1 < result["metrics"]["word_ppl"] < math.inf


def test_eval_ppl_beam_is_the_default_method(checkpoint, tmp_path, capsys):
    from experiments.cli import main

    assert get_family("rnng").methods()[0].name == "beam"
    assert main(["eval", "ppl", str(checkpoint), "--beam", "4", "--word-beam", "2", "--corpus", "ptb-sample",
                 "--split", "test", "--limit", "2", "--json", "--out", str(tmp_path / "beam")]) == 0
    result = json.loads(capsys.readouterr().out)
    settings = result["settings"]
    assert settings["scorer_convention"]["method"] == "beam" and settings["scorer_convention"]["word_beam"] == 2
    assert settings["scorer_convention"]["fast_track"] == 1 and result["metrics"]["sentences"] == 2


def test_bad_trees_and_checkpoints_are_input_errors(checkpoint, tmp_path):
    model = get_family("rnng").load(checkpoint)
    with pytest.raises(InputError, match="unknown action 'NT\\(NOPE\\)'") as e:
        model.model_tree(parse_tree("(NOPE (NN a))"), False, "file.txt:3")
    assert e.value.location == "file.txt:3"
    with pytest.raises(InputError, match="constituency"):
        model.model_tree("(S a)", False, "x")
    other = tmp_path / "other.ckpt"
    ckpt = torch.load(checkpoint, map_location="cpu", weights_only=True)
    ckpt["synbench"]["family"] = "tg"
    torch.save(ckpt, other)
    with pytest.raises(InputError) as e:
        get_family("rnng").load(other)
    assert e.value.location == str(other)


def test_a_tree_deeper_than_the_beams_stack_is_scored(checkpoint):
    """The stack of a scored batch is sized to its deepest tree (the official ``forward`` is given the batch's
    ``max_stack_size``); ``model.stack_size`` (100) bounds only the beam. A 122-element tree scores the same
    alone as beside a shallow one."""
    model = get_family("rnng").load(checkpoint)
    deep = "(NP (NN a))"
    for _ in range(120):
        deep = f"(NP {deep})"
    trees = [model.model_tree(parse_tree(t), True, "x") for t in (f"(S {deep})", "(S (NP (NN a)) (VP (VBD fell)))")]
    examples = [model.encode_tree(t) for t in trees]
    assert examples[0].example.stack_size > model.module.config.stack_size
    alone, beside = model.label_logprobs(examples[:1])[0], model.label_logprobs(examples)[0]
    assert np.isfinite(alone).all() and np.allclose(alone, beside, rtol=1e-5, atol=1e-6)


def test_sentencepiece_terminals_are_refused(prepared_data_dir):
    cfg = resolve_train_config("rnng", "cpu-small", [*TINY, f"runtime.data_dir={prepared_data_dir}",
                                                     "data.terminals=sentencepiece"])
    with pytest.raises(InputError) as e:
        get_family("rnng").build_data(cfg)
    assert e.value.location == "data.terminals"


def test_in_order_data_ends_with_finish(prepared_data_dir):
    cfg = resolve_train_config("rnng", "ptb-in-order", [*TINY, f"runtime.data_dir={prepared_data_dir}"])
    assert cfg["model"]["strategy"] == "in_order" and cfg["model"]["max_cons_nts"] == 3
    data = get_family("rnng").build_data(cfg)
    assert data.vocab["actions"]["strategy"] == "in_order"
    assert all(e.action_ids[-1] == 3 and e.action_ids[0] == 1 for e in data.train[:50])  # SHIFT first, FINISH last
    module = get_family("rnng").build_module(cfg, data)
    with torch.no_grad():
        terms = module.loss_terms(data.collate(list(data.valid[:4])))
    assert int(terms["words"]) == sum(len(e.token_ids) for e in data.valid[:4]) and float(terms["action_nll"]) > 0


def _cli(capsys, *argv) -> tuple[int, str]:
    from experiments.cli import main

    code = main([str(a) for a in argv])
    return code, capsys.readouterr().err


def test_bad_input_on_the_command_line_is_one_located_error_line(checkpoint, tmp_path, capsys):
    """A tree with an unknown nonterminal, a checkpoint of another family, a checkpoint labelled rnng holding
    other weights, corrected word probabilities (one token per word): exit 2, one ``synbench: error: WHERE: ...``
    line."""
    good = "(S (NP (DT The) (NN market)) (VP (VBD fell)) (. .))"
    unknown = tmp_path / "unknown.mrg"
    unknown.write_text(f"{good}\n(S (NOPE (DT A) (NN stock)) (VP (VBD rose)) (. .))\n")  # other words: the
    # gold trees are looked up by their words
    relabelled = tmp_path / "tg-label.ckpt"
    ckpt = torch.load(checkpoint, map_location="cpu", weights_only=True)
    ckpt["synbench"]["family"] = "tg"
    torch.save(ckpt, relabelled)
    foreign = tmp_path / "foreign.ckpt"
    ckpt = torch.load(checkpoint, map_location="cpu", weights_only=True)
    ckpt["state_dict"] = {"embedding.weight": torch.zeros(3, 4)}
    torch.save(ckpt, foreign)
    gold = ["--method", "gold", "--split", "file", "--json"]
    cases = [
        ([checkpoint, "--corpus", unknown, *gold], "sentence 1, tree 0: ", "unknown action 'NT(NOPE)'"),
        ([relabelled, "--corpus", unknown, *gold], f"{relabelled}: ", ""),  # what tg's loader finds missing
        ([foreign, "--corpus", unknown, *gold], f"{foreign}: ", "not an RNNG of its recorded config: 23 of"),
        ([checkpoint, "--corpus", unknown, *gold, "--word-prob", "corrected"], "--word-prob: ", "no --word-prob"),
    ]
    for argv, where, what in cases:
        code, err = _cli(capsys, "eval", "ppl", *argv, "--out", tmp_path / "out")
        assert code == 2 and err.count("\n") == 1 and err.startswith(f"synbench: error: {where}"), (argv, err)
        assert what in err, (argv, err)


def test_seed_groups_are_refused_with_the_reason(prepared_data_dir, tmp_path, capsys):
    """``train rnng --seeds``: refused, saying why (the adapter's ``seed_stack_refusal``)."""
    code, err = _cli(capsys, "train", "rnng", "--preset", "cpu-small", "--seeds", "0-1", "--runs-dir", tmp_path,
                     *TINY, f"runtime.data_dir={prepared_data_dir}")
    assert code == 2 and err.strip().splitlines()[-1] == (
        "synbench: error: --seeds: rnng cannot train seeds as a group (its LSTM cells have no vmap rule and its "
        "fixed-stack step selects rows by action, shapes that differ between seeds): train one seed per process "
        "(--seed)")
    # the first reason, as it stands (a torch that adds the rule makes this fail: then look again)
    cell = torch.nn.LSTMCell(2, 2)
    with pytest.raises(RuntimeError, match="Batching rule not implemented for aten::lstm_cell"):
        torch.func.vmap(lambda x: cell(x)[0])(torch.zeros(2, 1, 2))


def test_an_rnng_run_is_evaluated_aggregated_and_on_the_leaderboard(checkpoint, tmp_path, capsys):
    """The trained run as a spec's model (its folder): its beam perplexity through the evaluation plan equals
    ``synbench eval``'s, and ``aggregate`` and ``leaderboard`` show it as an rnng row."""
    check_on_the_leaderboard(checkpoint, "rnng", tmp_path, capsys)
