"""Tiny Pushdown-LM / Base-LM runs through ``experiments.train.train``, and ``model-info`` of the presets."""

from __future__ import annotations

import json
import math

import pytest

from experiments.checkpoints import read_checkpoint
from experiments.cli import main
from experiments.commands.model_info import model_info
from experiments.config import resolve_train_config
from experiments.train import train
from lightning_modules.data.tree import read_bracketed, to_bracketed

TINY = ["model.d_model=32", "model.n_layers=2", "model.n_heads=2", "model.d_ff=64", "model.attachment_depth_dim=8",
        "model.warmup_steps=2", "model.total_steps=20", "model.peak_lr=3e-3", "train.batch_size=4",
        "train.eval_batch_size=8", "train.log_every=1", "runtime.wandb=disabled", "runtime.progress=false",
        "runtime.threads=1", "train.max_steps=2", "train.val_every=2", "train.ckpt_every=2"]


@pytest.fixture(scope="module")
def small_treebank(tmp_path_factory, shared_data):
    trees = [t for _, t in read_bracketed(shared_data / "ptb_nltk_sample" / "combined" / "wsj_0003.mrg")]
    path = tmp_path_factory.mktemp("tb") / "small.mrg"
    path.write_text("".join(to_bracketed(t) + "\n" for t in trees[:16]))
    return path


@pytest.mark.parametrize(("family", "extra"), [("pushdown", []),
                                               ("base-lm", ["model.attachment_loss=true"])])
def test_two_steps_of_cpu_small_tiny_give_a_checkpoint(tmp_path, small_treebank, family, extra):
    cfg = resolve_train_config(family, "cpu-small", [*TINY, *extra, f"data.corpus={small_treebank}",
                                                      "data.train_split=file", "data.valid_split=file"])
    metrics = train(cfg, seed=1, run_dir=tmp_path / "run")
    assert metrics["global_step"] == 2 and metrics["family"] == family
    assert json.loads((tmp_path / "run" / "DONE").read_text()) == metrics
    assert metrics["val_token_ppl"] < 3 * metrics["unigram_val_token_ppl"]
    assert 0.0 <= metrics["val_attachment_accuracy"] <= 1.0
    expected = "gold-tree bound" if family == "pushdown" else "exact"
    assert metrics["val_word_ppl_convention"].startswith(expected)
    ckpt = read_checkpoint(tmp_path / "run" / "checkpoints" / "best.ckpt", family)
    assert ckpt["synbench"]["vocab"]["tokens"][:3] == ["<pad>", "<s>", "<eos>"]
    assert ckpt["hyper_parameters"]["family"] == family


def test_gold_tree_perplexity_of_a_pushdown_lm_is_its_validation_gold_bound(tmp_path, capsys, small_treebank):
    """``eval ppl --method gold`` on the validation sentences = the run's own gold-tree bound (the training
    path's joint NLL), split into the words given the tree and the attachments."""
    cfg = resolve_train_config("pushdown", "cpu-small", [*TINY, f"data.corpus={small_treebank}",
                                                          "data.train_split=file", "data.valid_split=file"])
    metrics = train(cfg, seed=1, run_dir=tmp_path / "run")
    capsys.readouterr()
    code = main(["eval", "ppl", str(tmp_path / "run" / "checkpoints" / "best.ckpt"), "--corpus", str(small_treebank),
                 "--split", "file", "--method", "gold", "--json", "--out", str(tmp_path / "gold")])
    out = json.loads(capsys.readouterr().out)
    assert code == 0 and out["settings"]["method"] == "gold"
    m = out["metrics"]
    assert m["words"] == metrics["val_words"]
    assert m["word_ppl"] == pytest.approx(metrics["val_word_ppl"], rel=1e-5)
    # the run's attachment NLL per word: its joint bound less its LM part
    attachments = math.log(metrics["val_word_ppl"]) - metrics["val_token_nll"] * metrics["val_tokens"] / m["words"]
    assert m["structure_nll_per_word"] == pytest.approx(attachments, rel=1e-4)
    assert m["word_ppl_given_tree"] * math.exp(m["structure_nll_per_word"]) == pytest.approx(m["word_ppl"], rel=1e-9)


def test_a_pushdown_lm_without_pushdown_layers_is_one_error_line(tmp_path, capsys, small_treebank):
    argv = ["train", "pushdown", "model.pushdown_layers=0", "runtime.wandb=disabled", f"data.corpus={small_treebank}",
            "data.train_split=file", "data.valid_split=file", "--run-dir", str(tmp_path / "run")]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("synbench: error: model.pushdown_layers: ") and err.count("\n") == 1


def test_model_info_of_the_presets_on_the_meta_device(capsys):
    assert main(["model-info", "pushdown", "--preset", "bllip", "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    d, p, layers, vocab = 1024, 128, 16, 32768
    attention = 5 * d * d  # query, key, value, relative-position and output projections (no biases)
    ffn = 2 * d * 4096 + 4096 + d
    head = 3 * 2 * d * d + 50 * p  # query/key/position projections to 2d, depth embedding
    head += (2 * d + p) ** 2 + (2 * d + p) + (2 * d + p) * 2 * d + 2 * d  # key-and-depth composer MLP
    head += 2 * (3 * d * 2 * d + 2 * d + 2 * d * 2 * d + 2 * d)  # next-word query and self-key MLPs
    expected = vocab * d + vocab + layers * (attention + 50 * (d // 8) + ffn + 4 * d) + head
    assert info["parameters"] == expected == 288_414_080
    assert sum(info["parts"].values()) == expected
    official = model_info("pushdown", "bllip-official")
    assert official["parameters"] - expected == layers * (2 * d * 4096 + 4096)  # FFN n_heads x d_model = 8192
    base = model_info("base-lm", "bllip")
    assert base["parameters"] == expected - layers * 50 * (d // 8) - head
    wikitrees = model_info("pushdown", "wikitrees")
    assert wikitrees["parts"]["depth_embedding"] == 6 * 50 * 64  # only the last 6 of 12 blocks
