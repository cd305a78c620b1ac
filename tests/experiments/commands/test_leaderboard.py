"""``synbench leaderboard`` over experiments the real pipeline finished: tiny standard transformers (hf-scratch)
trained on 40 PTB trees, evaluated as ``synbench evaluate`` does (ppl on the training file's first sentences, one
SG suite) and aggregated. Two experiments scored on the same items merge into one table; one whose ppl
items differ (another ``limit``) is refused with one line naming the difference."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from experiments.cli import main

STEPS = {"max_steps": 4, "val_every": 2, "ckpt_every": 2, "batch_size": 8, "eval_batch_size": 8, "log_every": 1}


def finish(runs: Path, spec_dir: Path, name: str, layers: int, treebank: Path, data_dir: Path, ppl_limit: int) -> Path:
    """Train, evaluate and aggregate an experiment of one tiny hf-scratch model (seed 0); its folder."""
    from experiments.experiment_runs import experiment_runs, folder_of
    from experiments.experiment_spec import load_spec
    from experiments.train import train

    spec = spec_dir / f"{name}.yaml"
    model = {"config": {"n_embd": 32, "n_layer": layers, "n_head": 2, "n_inner": 64, "n_positions": 160},
             "warmup_steps": 2, "total_steps": 10}
    spec.write_text(yaml.safe_dump({
        "name": name, "seeds": "0",
        "models": [{"name": f"gpt2-{layers}l", "family": "hf-scratch", "preset": "cpu-small", "overrides": {
            "model": model, "train": STEPS, "runtime": {"wandb": "disabled", "progress": False},
            "data": {"corpus": str(treebank), "train_split": "file", "valid_split": "file"}}}],
        "evaluations": [{"name": "ppl", "split": "file", "limit": ppl_limit},
                        {"name": "sg", "suites": "number_src", "items_per_suite": 1}],
    }))
    for run in experiment_runs(load_spec(str(spec))):
        train(run.config, run.seed, folder_of(runs, run))
        # what `synbench evaluate` runs for each entry, in this process: the eval into RUN/eval/TASK
        checkpoint, out = str(folder_of(runs, run) / "checkpoints" / "best.ckpt"), folder_of(runs, run) / "eval"
        assert main(["eval", "ppl", checkpoint, "--corpus", str(treebank), "--split", "file", "--limit",
                     str(ppl_limit), "--out", str(out / "ppl")]) == 0
        assert main(["eval", "sg", checkpoint, "--suites", "number_src", "--items-per-suite", "1",
                     "--data-dir", str(data_dir), "--out", str(out / "sg")]) == 0
    assert main(["aggregate", str(spec), "--runs-dir", str(runs)]) == 0
    return runs / name


@pytest.fixture(scope="module")
def experiments(tmp_path_factory, tiny_treebank, prepared_data_dir) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("leaderboard")
    return {key: finish(root / "runs", root, name, layers, tiny_treebank, prepared_data_dir, limit)
            for key, name, layers, limit in (("a", "lb-a", 1, 4), ("b", "lb-b", 2, 4), ("c", "lb-c", 1, 3))}


def test_two_experiments_on_the_same_items_merge_into_one_table(experiments, capsys):
    assert main(["leaderboard", str(experiments["a"]), str(experiments["b"]), "--json"]) == 0
    merged = json.loads(capsys.readouterr().out)
    assert [(r["experiment"], r["model"], r["family"]) for r in merged["rows"]] == [
        ("lb-a", "gpt2-1l", "hf-scratch"), ("lb-b", "gpt2-2l", "hf-scratch")]
    assert "ppl" in merged["metrics"]  # sg: one suite gives no overall score (the mean over the 31)
    assert {"ppl", "sg", "training data"} <= set(merged["protocol"])
    one, two = merged["rows"]
    assert two["parameters"] > one["parameters"] > 0  # a second layer
    assert all(r["metrics"]["ppl"]["n"] == 1 and r["ppl_scoring"].startswith("exact") for r in merged["rows"])

    assert main(["leaderboard", str(experiments["a"]), str(experiments["b"])]) == 0
    table = capsys.readouterr().out
    assert table.startswith("| experiment | model | family | seeds | parameters | ppl | ppl scored by |")
    assert "| lb-a | gpt2-1l | hf-scratch | 1 |" in table and "| lb-b | gpt2-2l | hf-scratch | 1 |" in table


def test_experiments_scored_on_other_items_are_refused_naming_the_difference(experiments, capsys):
    assert main(["leaderboard", str(experiments["a"]), str(experiments["c"])]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    (line,) = captured.err.splitlines()
    assert line.startswith(f"synbench: error: {experiments['c']}: scored ppl on other items than {experiments['a']}")
    assert "limit 4, 4 items" in line and "limit 3, 3 items" in line
    # the same experiment twice, and a folder without aggregate tables
    assert main(["leaderboard", str(experiments["a"]), str(experiments["a"])]) == 2
    assert "given twice" in capsys.readouterr().err
    assert main(["leaderboard", str(experiments["a"].parent)]) == 2
    assert "run synbench aggregate" in capsys.readouterr().err
