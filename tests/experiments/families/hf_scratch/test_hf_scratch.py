"""The standard transformer baseline (``hf-scratch``): a ``transformers`` GPT-2 built locally, trained from
scratch by ``synbench train`` on the terminals TXL (terminals) reads, saved in our checkpoint format and
scored exactly like the string families (``eval ppl``, ``eval sg``)."""

from __future__ import annotations

import json
import math

import pytest
import torch

from experiments.checkpoints import read_checkpoint
from experiments.cli import main
from experiments.families import get_family
from tests.tolerances import close32

TINY = ["model.config.n_embd=32", "model.config.n_layer=2", "model.config.n_head=2", "model.config.n_inner=64",
        "model.warmup_steps=2", "model.total_steps=20", "train.max_steps=12", "train.val_every=6",
        "train.ckpt_every=6", "train.batch_size=8", "runtime.wandb=disabled", "runtime.progress=false"]


def test_a_string_model_scored_exactly_with_every_string_capability():
    adapter = get_family("hf-scratch")
    assert adapter.kind() == "string" and [m.name for m in adapter.methods()] == ["exact"]
    assert adapter.capabilities() == {"perplexity", "score", "surprisal"}


@pytest.mark.parametrize("preset", ["cpu-small", "ptb", "bllip"])
def test_each_preset_is_sized_to_txl_terminals_within_ten_percent(preset, capsys):
    counts = {}
    for family in ("hf-scratch", "txl-terminals"):
        assert main(["model-info", family, "--preset", preset, "--json"]) == 0
        counts[family] = json.loads(capsys.readouterr().out)["parameters"]
    assert abs(counts["hf-scratch"] / counts["txl-terminals"] - 1) < 0.10


def test_bad_architecture_and_config_fields_are_one_error_line(tmp_path, capsys):
    train = ["train", "hf-scratch", "--preset", "cpu-small", "--run-dir", str(tmp_path / "run"),
             "runtime.wandb=disabled"]
    assert main([*train, "model.architecture=no-such-lm"]) == 2
    assert capsys.readouterr().err == ("synbench: error: model.architecture: unknown transformers architecture "
                                       "'no-such-lm'\n")
    assert main([*train, "model.config.n_embdd=64"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("synbench: error:") and "n_embdd" in err and len(err.splitlines()) == 1


def test_any_causal_architecture_builds_and_a_bidirectional_one_is_refused():
    from lightning_modules.errors import InputError
    from lightning_modules.families.hf_scratch.model import CausalLM

    bert = {"hidden_size": 32, "num_hidden_layers": 1, "num_attention_heads": 2, "intermediate_size": 64}
    llama = CausalLM({"architecture": "llama", "config": {**bert, "max_position_embeddings": 64}, "vocab_size": 40})
    inputs = torch.tensor([[1, 5, 6, 0]])
    assert llama.token_logprobs(inputs, torch.tensor([[5, 6, 2, 0]]))[0, 3] == 0  # padding scores nothing
    with pytest.raises(InputError, match="bert as configured is not causal"):  # BERT's LM head sees ahead
        CausalLM({"architecture": "bert", "config": bert, "vocab_size": 40})
    CausalLM({"architecture": "bert", "config": {**bert, "is_decoder": True}, "vocab_size": 40})


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory, tiny_treebank):
    run = tmp_path_factory.mktemp("hf-scratch") / "run"
    assert main(["train", "hf-scratch", "--preset", "cpu-small", "--seed", "0", "--run-dir", str(run),
                 f"data.corpus={tiny_treebank}", "data.train_split=file", "data.valid_split=file", *TINY]) == 0
    done = json.loads((run / "DONE").read_text())
    assert done["family"] == "hf-scratch" and done["global_step"] == 12
    assert done["val_word_ppl"] < done["vocab_size"]  # learnt something in 12 steps: below uniform
    return run / "checkpoints" / "best.ckpt"


def test_the_checkpoint_is_ours_and_scores_exactly(checkpoint):
    meta = read_checkpoint(checkpoint, "hf-scratch")["synbench"]  # torch.load(weights_only=True)
    assert meta["config"]["model"]["architecture"] == "gpt2" and meta["vocab"]["terminals"] == "words"
    model = get_family("hf-scratch").load(checkpoint)
    from experiments.families.hf_scratch.scorers import ExactScorer

    sentences = [["The", "company", "said", "it", "expects", "profit", "."], ["Prices", "rose", "."]]
    scores = ExactScorer(model, batch_size=2).score(sentences)  # one padded batch
    for words, score in zip(sentences, scores, strict=True):
        example = model.encode(words)  # alone, unpadded: log p of every label by the network itself
        with torch.no_grad():
            logits = model.module.network(input_ids=torch.tensor([example.inputs])).logits[0]
        direct = logits.log_softmax(-1).gather(-1, torch.tensor(example.labels)[:, None]).sum().item()
        assert score.total == close32(direct)
        assert score.total == pytest.approx(sum(score.word_logprobs) + score.end_logprob)
        assert len(score.word_logprobs) == len(words) and score.end_logprob < 0


def test_eval_ppl_and_one_sg_suite_on_the_checkpoint(checkpoint, tiny_treebank, prepared_data_dir, tmp_path, capsys):
    assert main(["eval", "ppl", str(checkpoint), "--corpus", str(tiny_treebank), "--split", "file", "--limit", "5",
                 "--json", "--out", str(tmp_path / "ppl")]) == 0
    ppl = json.loads(capsys.readouterr().out)
    assert ppl["settings"]["family"] == "hf-scratch" and ppl["settings"]["method"] == "exact"
    assert ppl["settings"]["scorer_convention"]["bound"] is False
    assert ppl["metrics"]["sentences"] == 5 and 1 < ppl["metrics"]["word_ppl"] < math.inf
    assert main(["eval", "sg", str(checkpoint), "--suites", "number_src", "--items-per-suite", "2",
                 "--data-dir", str(prepared_data_dir), "--json", "--out", str(tmp_path / "sg")]) == 0
    sg = json.loads(capsys.readouterr().out)
    assert set(sg["suites"]) == {"number_src"} and len(sg["suites"]["number_src"]["items"]) == 2
