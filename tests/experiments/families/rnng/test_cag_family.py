"""The CAG family end to end: ``synbench train cag --preset cpu-small`` on the PTB sample; its checkpoint
scores gold trees (the sum of the model's per-action values) and runs the word-synchronous beam through the
evaluators (ppl, SyntaxGym, BLiMP, EVALB parsing); bad input is one located error line, exit 2."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch

from experiments.cli import main
from experiments.config import resolve_train_config
from experiments.families import get_family
from experiments.train import train
from lightning_modules.data.corpora import load_corpus
from lightning_modules.data.tree import parse_tree, to_bracketed
from lightning_modules.errors import InputError
from tests.experiments.families.rnng.leaderboard_check import check_on_the_leaderboard

TINY = ["train.batch_size=8", "train.eval_batch_size=64", "train.max_steps=4", "train.val_every=4",
        "train.ckpt_every=4", "train.log_every=1", "runtime.wandb=disabled",
        "runtime.progress=false", "runtime.threads=1"]
BEAM = ["--beam", "4", "--word-beam", "2", "--json"]


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory, prepared_data_dir) -> Path:
    threads = torch.get_num_threads()
    run = tmp_path_factory.mktemp("cag") / "run"
    cfg = resolve_train_config("cag", "cpu-small", [*TINY, f"runtime.data_dir={prepared_data_dir}"])
    assert (cfg["model"]["num_layers"], cfg["model"]["num_heads"], cfg["model"]["w_dim"]) == (1, 2, 32)
    metrics = train(cfg, seed=1, run_dir=run)
    torch.set_num_threads(threads)
    assert metrics["global_step"] == 4 and metrics["family"] == "cag"
    assert 1 < metrics["val_action_ppl"] < metrics["nonterminals"] + 3 and metrics["nonterminals"] > 20
    assert json.loads((run / "DONE").read_text()) == metrics
    return run / "checkpoints" / "best.ckpt"


def cli(capsys, *argv) -> tuple[int, str, str]:
    code = main([str(a) for a in argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_the_presets_are_the_official_readme_values():
    cfg = resolve_train_config("cag", "ptb", [])["model"]
    assert {k: cfg[k] for k in ("w_dim", "h_dim", "num_layers", "num_heads", "stack_size", "dropout",
                                "embd_dropout", "lr", "grad_clip_norm", "loss_normalize")} == {
        "w_dim": 256, "h_dim": 256, "num_layers": 3, "num_heads": 4, "stack_size": 100, "dropout": 0.1,
        "embd_dropout": 0.1, "lr": 0.001, "grad_clip_norm": 5.0, "loss_normalize": "batch"}
    assert resolve_train_config("cag", "bllip", [])["model"]["num_heads"] == 4
    assert get_family("cag").methods()[0].options == {"beam": 100, "word_beam": 10, "fast_track": 5}
    info = get_family("cag").model_info(cfg, "model.")
    assert info["parts"]["stack_attention"] == 3 * 12 * 256 * 256 + 3 * 13 * 256 + 101 * 256 + 2 * 256


def test_gold_scores_are_the_sum_of_the_action_logprobs(checkpoint):
    from experiments.families.adapter import ScoringRequest

    trees = [parse_tree("(S (NP (DT The) (NN market)) (VP (VBD fell)) (. .))"),
             parse_tree("(S (NP (PRP It)) (VP (VBD rose) (ADVP (RB sharply))) (. .))")]
    sentences = [t.leaves() for t in trees]
    family = get_family("cag")
    scores = family.scoring(checkpoint, {}, ScoringRequest("gold", gold=lambda s: [[t] for t in trees])
                            ).scorer.score(sentences)
    model = family.load(checkpoint)
    for tree, score in zip(trees, scores, strict=True):
        expected = float(model.label_logprobs([model.encode_tree(model.model_tree(tree, True, "t"))])[0].sum())
        assert math.isclose(score.total, expected, rel_tol=1e-6)  # float32, batched with the other tree
        assert math.isclose(sum(score.word_logprobs) + score.end_logprob, score.total, rel_tol=1e-9)


def test_the_beam_runs_through_the_evaluators(checkpoint, prepared_data_dir, tmp_path, capsys):
    code, out, _ = cli(capsys, "eval", "ppl", checkpoint, *BEAM, "--corpus", "ptb-sample", "--split", "test",
                       "--limit", "2", "--out", tmp_path / "ppl")
    result = json.loads(out)
    assert code == 0 and result["metrics"]["sentences"] == 2 and 1 < result["metrics"]["word_ppl"] < math.inf
    assert result["settings"]["scorer_convention"]["method"] == "beam"
    assert result["settings"]["scorer_convention"]["fast_track"] == 5  # the official README's shift size
    code, out, _ = cli(capsys, "eval", "sg", checkpoint, *BEAM, "--suites", "number_src", "--items-per-suite", 2,
                       "--out", tmp_path / "sg")
    assert code == 0 and len(json.loads(out)["suites"]["number_src"]["items"]) == 2
    code, out, _ = cli(capsys, "eval", "blimp", checkpoint, *BEAM, "--paradigms", "anaphor_gender_agreement",
                       "--pairs-per-paradigm", 2, "--out", tmp_path / "blimp")
    assert code == 0 and json.loads(out)["metrics"]["pairs"] == 2
    gold = tmp_path / "gold.mrg"
    trees = [tree for _, tree in load_corpus("ptb-sample", prepared_data_dir).sentences("test")[:2]]
    gold.write_text("".join(to_bracketed(t) + "\n" for t in trees))
    code, out, _ = cli(capsys, "eval", "parse", checkpoint, *BEAM, "--gold", gold, "--limit", 2,
                       "--out", tmp_path / "parse")
    result = json.loads(out)
    assert code == 0 and result["settings"]["evalb"].startswith("collins")
    parsed = result["metrics"]["parsed"]["all"]
    assert parsed["valid_sentences"] == 2 and parsed["test_brackets"] > 0 and "right_branching" in result["metrics"]


def test_bad_input_is_one_located_error_line(checkpoint, tmp_path, capsys):
    """Trees with an unknown nonterminal or deeper than the fixed stack, a sentence longer than it, a checkpoint
    of another family, other weights under a cag label: exit 2, one ``synbench: error: WHERE: ...`` line."""
    good = "(S (NP (DT The) (NN market)) (VP (VBD fell)) (. .))"
    unknown = tmp_path / "unknown.mrg"
    unknown.write_text(f"{good}\n(S (NOPE (DT A) (NN stock)) (VP (VBD rose)) (. .))\n")  # other words: the gold
    # trees are looked up by their words
    deep = "(NP (NN a))"
    for _ in range(120):
        deep = f"(NP {deep})"
    too_deep = tmp_path / "deep.mrg"
    too_deep.write_text(f"(S {deep})\n")
    long = tmp_path / "long.mrg"
    long.write_text("(S " + " ".join(["(NN a)"] * 120) + ")\n")
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
        ([checkpoint, "--corpus", too_deep, *gold], "sentence 0, tree 0: ", "fixed stack"),
        ([checkpoint, "--corpus", long, "--split", "file", *BEAM], "sentence 0: ", "fixed stack of 100"),
        ([relabelled, "--corpus", unknown, *gold], f"{relabelled}: ", ""),
        ([foreign, "--corpus", unknown, *gold], f"{foreign}: ", "not a CAG of its recorded config"),
    ]
    for argv, where, what in cases:
        code, _, err = cli(capsys, "eval", "ppl", *argv, "--out", tmp_path / "out")
        assert code == 2 and err.count("\n") == 1 and err.startswith(f"synbench: error: {where}"), (argv, err)
        assert what in err, (argv, err)
    with pytest.raises(InputError) as e:
        get_family("cag").load(relabelled)
    assert e.value.location == str(relabelled)


def test_a_training_tree_deeper_than_the_fixed_stack_is_located(prepared_data_dir):
    cfg = resolve_train_config("cag", "cpu-small", [*TINY, f"runtime.data_dir={prepared_data_dir}",
                                                    "model.stack_size=8"])
    with pytest.raises(InputError, match="fixed stack holds 8") as e:
        get_family("cag").build_data(cfg)
    assert e.value.location.startswith("data.train_split tree ")


def test_a_cag_run_is_evaluated_aggregated_and_on_the_leaderboard(checkpoint, tmp_path, capsys):
    """As the RNNG's: its beam perplexity through the evaluation plan equals ``synbench eval``'s, and
    ``aggregate`` and ``leaderboard`` show it as a cag row."""
    check_on_the_leaderboard(checkpoint, "cag", tmp_path, capsys)


def test_seed_groups_are_refused_with_the_reason(prepared_data_dir, tmp_path, capsys):
    """``train cag --seeds``: refused with the RNNG's reason (the composition is its LSTM, the step its
    fixed-stack step)."""
    code, _, err = cli(capsys, "train", "cag", "--preset", "cpu-small", "--seeds", "0-1", "--runs-dir", tmp_path,
                       *TINY, f"runtime.data_dir={prepared_data_dir}")
    assert code == 2 and err.strip().splitlines()[-1] == (
        "synbench: error: --seeds: cag cannot train seeds as a group (its LSTM cells have no vmap rule and its "
        "fixed-stack step selects rows by action, shapes that differ between seeds): train one seed per process "
        "(--seed)")
