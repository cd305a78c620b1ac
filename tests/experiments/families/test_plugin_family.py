"""A model family defined only here plugs in through ``$SYNBENCH_PLUGINS`` with no other file changed.

The family is a word bigram LM (a LightningModule with its adapter, presets and encoding, all in this file).
Imported by synbench as the plug-in ``tests.experiments.families.test_plugin_family`` it registers itself; it
then trains through ``synbench train``, goes through ``submit`` -> ``evaluate`` (ppl, sg, blimp) ->
``aggregate`` -> ``analyze`` -> ``report`` like a built-in family, and shows up in the report.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import tempfile
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytorch_lightning as pl
import torch
import yaml
from torch import nn

from experiments.checkpoints import read_checkpoint
from experiments.evaluate.scorer import Convention, SentenceScore
from experiments.families import register
from experiments.families.adapter import Family, Method, Scoring, ScoringRequest
from experiments.launchers import warm_start
from lightning_modules.data.train_data import TrainData

PLUGIN = "tests.experiments.families.test_plugin_family"
REPO = Path(__file__).resolve().parents[3]
PAD, UNK, BOS, EOS = 0, 1, 2, 3
SPECIALS = ("<pad>", "<unk>", "<s>", "</s>")
MAX_WORDS = 1000


# -- the encoding: words -> ids, <s> first and </s> last ---------------------------------------------------
def encode(words: Sequence[str], index: dict[str, int]) -> list[int]:
    return [BOS, *(index.get(w, UNK) for w in words), EOS]


def collate(sentences: list[list[int]]) -> torch.Tensor:
    width = max(map(len, sentences))
    return torch.tensor([s + [PAD] * (width - len(s)) for s in sentences])


# -- the model: a table of next-word logits per previous word ------------------------------------------------
class BigramLM(pl.LightningModule):
    def __init__(self, vocab_size: int, lr: float):
        super().__init__()
        self.save_hyperparameters()
        self.logits = nn.Embedding(vocab_size, vocab_size)
        nn.init.normal_(self.logits.weight, std=0.01)

    def token_logprobs(self, ids: torch.Tensor) -> torch.Tensor:
        """log p(ids[:, t+1] | ids[:, t]) for every position (B, T-1)."""
        logp = self.logits(ids[:, :-1]).log_softmax(-1)
        return logp.gather(-1, ids[:, 1:].unsqueeze(-1)).squeeze(-1)

    def loss(self, ids: torch.Tensor) -> torch.Tensor:
        mask = ids[:, 1:] != PAD
        return -(self.token_logprobs(ids) * mask).sum() / mask.sum()

    def training_step(self, batch: torch.Tensor, _: int) -> torch.Tensor:
        loss = self.loss(batch)
        self.log("train/loss", loss, batch_size=len(batch))
        return loss

    def validation_step(self, batch: torch.Tensor, _: int) -> None:
        self.log("val/loss", self.loss(batch), batch_size=len(batch))

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.Adam(self.parameters(), lr=self.hparams.lr)


class BigramScorer:
    """Exact log p(x) of a string model: the sum of its words' bigram log-probabilities and of </s>."""

    name = "bigram"
    convention = Convention(method="exact", bound=False)

    def __init__(self, model: BigramLM, words: list[str]):
        self.model, self.index = model, {w: i for i, w in enumerate(words)}

    def score(self, sentences: Sequence[Sequence[str]]) -> list[SentenceScore]:
        out = []
        with torch.no_grad():
            for words in sentences:
                logp = self.model.token_logprobs(torch.tensor([encode(words, self.index)]))[0].tolist()
                out.append(SentenceScore(tuple(words), tuple(logp[:-1]), sum(logp), logp[-1],
                                         unknown_words=sum(w not in self.index for w in words)))
        return out


# -- the adapter -------------------------------------------------------------------------------------------
class BigramFamily(Family):
    names = ("bigram",)

    def kind(self, config: dict[str, Any] | None = None) -> str:
        return "string"

    def methods(self, config: dict[str, Any] | None = None) -> tuple[Method, ...]:
        return (Method("exact"),)  # scored: perplexity, score, surprisal

    def model_presets(self) -> tuple[dict[str, Any], str]:
        return {"cpu-small": {"lr": 0.2}}, f"{PLUGIN}.BigramFamily"

    def build_data(self, cfg: dict[str, Any]) -> TrainData:
        from lightning_modules.data.corpora import read_split

        data, data_dir = cfg["data"], cfg["runtime"]["data_dir"]
        read = {split: [s.words for s in read_split(data["corpus"], data[split], data_dir=data_dir)[1]]
                for split in ("train_split", "valid_split")}
        counts = Counter(w for words in read["train_split"] for w in words)
        # a V x V table: the most frequent words only (Adam over all ~5,000 words' 25M entries took a minute)
        words = [*SPECIALS, *sorted(w for w, c in counts.most_common(MAX_WORDS) if c >= data["min_count"])]
        index = {w: i for i, w in enumerate(words)}
        return TrainData([encode(s, index) for s in read["train_split"]],
                         [encode(s, index) for s in read["valid_split"]], collate, {"words": words}, len(words),
                         valid_words=sum(map(len, read["valid_split"])))

    def build_module(self, cfg: dict[str, Any], data: TrainData) -> BigramLM:
        return BigramLM(data.vocab_size, cfg["model"]["lr"])

    def load(self, checkpoint: str | Path, device: str = "cpu") -> tuple[BigramLM, dict[str, Any]]:
        ckpt = read_checkpoint(checkpoint, "bigram")
        meta = ckpt["synbench"]
        model = BigramLM(len(meta["vocab"]["words"]), meta["config"]["model"]["lr"])
        model.load_state_dict(ckpt["state_dict"])
        return model.eval(), meta

    def scoring(self, checkpoint: str | Path, meta: dict[str, Any], request: ScoringRequest) -> Scoring:
        model, meta = self.load(checkpoint, request.device)
        return Scoring(BigramScorer(model, meta["vocab"]["words"]), {}, "exact")


if __name__ == PLUGIN:  # imported by synbench as the plug-in (pytest imports this file under another name)
    register(BigramFamily)


# -- the test ----------------------------------------------------------------------------------------------
def synbench(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    """The command in its own process, forked warm as the local executor forks tasks (a cold interpreter would
    spend ~10 s of each call importing torch); stdout and stderr together in ``stdout``."""
    with tempfile.TemporaryDirectory() as folder:
        log = Path(folder) / "log"
        code = warm_start.start((sys.executable, "-m", "experiments.cli", *args), str(log), env, str(REPO),
                                os.cpu_count() or 1).wait()
        out = log.read_text() if log.exists() else ""
    assert code == 0, f"synbench {' '.join(args)}:\n{out}"
    return subprocess.CompletedProcess(args, code, out, "")


def test_a_plugin_family_trains_evaluates_and_is_reported(tmp_path, prepared_data_dir, shared_data):
    """... beside a pretrained LM (spec entry ``source: hf:DIR``, a tiny GPT-2 built here), in one report."""
    from tests.experiments.evaluate.test_hf_scorer import build_tiny_gpt2

    gpt2 = build_tiny_gpt2(tmp_path / "gpt2", shared_data)
    env = {**os.environ, "SYNBENCH_PLUGINS": PLUGIN, "PYTHONPATH": str(REPO), "SYNBENCH_DATA": str(prepared_data_dir),
           "WANDB_MODE": "offline"}
    steps = ["train.max_steps=40", "train.val_every=20", "train.ckpt_every=20", "runtime.wandb=disabled"]

    # synbench train FAMILY --preset P: the plug-in's presets, data, module; a checkpoint of family bigram
    run = tmp_path / "train-run"
    synbench("train", "bigram", *steps, "--preset", "cpu-small", "--seed", "0", "--run-dir", str(run), env=env)
    done = json.loads((run / "DONE").read_text())
    words = read_checkpoint(run / "checkpoints" / "best.ckpt", "bigram")["synbench"]["vocab"]["words"]
    assert done["family"] == "bigram" and done["global_step"] == 40
    assert done["best_val_loss"] < math.log(len(words)) - 1  # well below a uniform distribution
    assert "bigram" in synbench("model-info", "--help", env=env).stdout

    # an experiment of two bigram models x two seeds: submit -> evaluate -> aggregate -> analyze -> report
    spec = tmp_path / "plugged.yaml"
    spec.write_text(yaml.safe_dump({
        "name": "plugged", "seeds": "0-1",
        "models": [{"name": "bigram", "family": "bigram", "preset": "cpu-small", "overrides": {
                        "train": {"max_steps": 40, "val_every": 20, "ckpt_every": 20}}},
                   {"name": "bigram-slow", "family": "bigram", "preset": "cpu-small", "overrides": {
                        "model": {"lr": 0.02}, "train": {"max_steps": 40, "val_every": 20, "ckpt_every": 20}}},
                   {"name": "gpt2-tiny", "source": f"hf:{gpt2}"}],
        "evaluations": [{"name": "ppl", "split": "test", "limit": 8}, {"name": "sg", "items_per_suite": 1},
                        {"name": "blimp", "pairs_per_paradigm": 1}],
        "analysis": {"correction": "holm"},
    }))
    root = tmp_path / "runs"
    synbench("submit", str(spec), "--runs-dir", str(root), env=env)
    synbench("evaluate", str(spec), "--runs-dir", str(root), env=env)
    synbench("aggregate", str(spec), "--runs-dir", str(root), env=env)
    synbench("analyze", str(spec), "--runs-dir", str(root), "--wandb", "disabled", env=env)
    synbench("report", str(spec), "--runs-dir", str(root), env=env)

    import pandas as pd

    long = pd.read_parquet(root / "plugged" / "aggregate" / "metrics_long.parquet")
    got = long[long.metric.isin(["ppl", "sg", "blimp"])].groupby(["model", "metric"]).size()
    assert got.to_dict() == {**{(m, x): 2 for m in ("bigram", "bigram-slow") for x in ("blimp", "ppl", "sg")},
                             **{("gpt2-tiny", x): 1 for x in ("blimp", "ppl", "sg")}}  # pretrained: one run
    assert not list((root / "plugged").glob("hf-*/checkpoints"))  # nothing trained for the source
    ppl = long[long.metric == "ppl"].groupby("model")["value"].mean()
    assert ppl["bigram"] < ppl["bigram-slow"]  # the faster learning rate fits more in 40 steps
    report = (root / "plugged" / "report.md").read_text()
    rows = [line for line in report.splitlines() if line.startswith("| bigram") and line.count("±") >= 3]
    # the headline table and the comparison across models: a row per bigram model each, ppl, sg, blimp as mean ± sd
    # (the setup's model list names them too, without numbers)
    assert len(rows) == 4, report
    assert report.index("| bigram |") < report.index("## Setup")  # the headline table comes first
    assert any(line.startswith("| gpt2-tiny |") for line in report.splitlines()), report
