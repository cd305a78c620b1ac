"""``synbench evaluate EXPERIMENT --checkpoints all``: the checkpoints runs kept over training (``train.keep_every``)
evaluated as their best ones, cached like them, aggregated by step and drawn in the report against the step."""

from __future__ import annotations

import json
import sys

import pandas as pd
import pytest
import yaml

from analysis.pipeline import analyze
from analysis.report import write_report
from experiments.cli import main
from experiments.eval_group import eval_cells, group_tasks, run_group
from experiments.evaluation_plan import Planner
from experiments.experiment_runs import experiment_dir, experiment_runs, folder_of
from experiments.experiment_spec import load_spec
from experiments.runs import kept_checkpoints, step_folder, step_folders
from experiments.seed_group import train_group
from tests.experiments.conftest import write_tiny_spec

NO_DROPOUT = {"embedding_dropout": 0, "core_dropout": 0, "core_output_dropout": 0, "attention_dropout": 0}


def test_kept_checkpoints_are_evaluated_cached_aggregated_by_step_and_drawn(tmp_path, tiny_treebank, capsys):
    spec_path = write_tiny_spec(tmp_path / "curves.yaml", tiny_treebank, seeds="0-1", steps=6)
    spec = yaml.safe_load(spec_path.read_text())
    overrides = spec["models"][0]["overrides"]
    overrides["model"].update(NO_DROPOUT)
    overrides["train"].update(val_every=3, ckpt_every=3, keep_every=3)
    spec.update(seeds_per_process=2, evaluations=[{"name": "ppl", "split": "file", "limit": 3, "method": "gold"}])
    spec_path.write_text(yaml.safe_dump(spec))
    spec, root = load_spec(spec_path), tmp_path / "runs"
    runs = experiment_runs(spec)
    folders = [folder_of(root, run) for run in runs]
    train_group(runs[0].config, [run.seed for run in runs], folders)  # the two seeds in one process
    assert [list(kept_checkpoints(f)) for f in folders] == [[3, 6], [3, 6]]

    best_only = Planner(spec, runs, root).eval_tasks()
    assert [t.done for t in best_only] == [f / "eval" / "ppl" / "results.json" for f in folders]
    planner = Planner(spec, runs, root, checkpoints="all")
    assert [t.done for t in planner.eval_tasks()] == [
        *(f / "eval" / "ppl" / "results.json" for f in folders[:1]),
        *(step_folder(folders[0], s) / "eval" / "ppl" / "results.json" for s in (3, 6)),
        *(f / "eval" / "ppl" / "results.json" for f in folders[1:]),
        *(step_folder(folders[1], s) / "eval" / "ppl" / "results.json" for s in (3, 6))]
    [group] = group_tasks(eval_cells(planner), 2, experiment_dir(root, spec), sys.executable)
    assert run_group(group.argv[3]) == 0  # what the group's process runs: each member's own `synbench eval`
    capsys.readouterr()
    # done and cached: `evaluate --checkpoints all` finds nothing to run (an executor would run it)
    assert main(["evaluate", str(spec_path), "--runs-dir", str(root), "--checkpoints", "all"]) == 0
    assert "[evaluate] 6/6 done" in capsys.readouterr().err
    for folder in folders:  # each step's evaluation read its own checkpoint
        assert list(step_folders(folder)) == [3, 6]
        scored = [json.loads((step_folder(folder, s) / "eval" / "ppl" / "results.json").read_text())["config"]
                  for s in (3, 6)]
        assert scored[0]["model_sha256"] != scored[1]["model_sha256"]

    analysis = analyze(spec, root, wandb="disabled")
    steps = pd.read_csv(experiment_dir(root, spec) / "aggregate" / "metrics_by_step.csv")
    ppl = steps[steps["metric"] == "ppl"].sort_values(["step", "seed"])
    assert list(zip(ppl["step"], ppl["seed"])) == [(3, 0), (3, 1), (6, 0), (6, 1)]
    assert {"learning_curves.csv", "figures/learning_curves.png"} <= set(analysis.written)
    curves = pd.read_csv(analysis.out_dir / "learning_curves.csv")
    row = curves[(curves["metric"] == "ppl") & (curves["step"] == 6)].iloc[0]
    values = ppl[ppl["step"] == 6]["value"]
    assert (row["n"], row["mean"], row["sd"]) == (2, pytest.approx(values.mean()), pytest.approx(values.std()))
    markdown, _ = write_report(analysis.out_dir)
    text = markdown.read_text()
    assert "## Learning curves" in text and "figures/learning_curves.png" in text
