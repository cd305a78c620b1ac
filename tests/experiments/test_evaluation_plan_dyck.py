"""Pushdown-family evaluations of experiment specs (``dyck``, ``parse``): which runs, their commands, option checks."""

from pathlib import Path

import pytest
import yaml

from experiments.evaluation_plan import Planner
from experiments.experiment_runs import experiment_runs
from experiments.experiment_spec import load_spec
from experiments.presets import configs_dir
from lightning_modules.errors import InputError

MODELS = [{"name": "pushdown", "family": "pushdown", "preset": "dyck"},
          {"name": "base-lm", "family": "base-lm", "preset": "dyck"},
          {"name": "ptb-base", "family": "base-lm", "preset": "cpu-small"},
          {"name": "tg", "family": "tg", "preset": "cpu-small"}]


def _spec(tmp_path: Path, evals, models=MODELS):
    path = tmp_path / "exp.yaml"
    path.write_text(yaml.safe_dump({"models": models, "seeds": "0-1", "evaluations": evals}))
    return load_spec(path)


def test_dyck_evaluates_the_dyck_runs_of_pushdown_and_base_lm(tmp_path):
    spec = _spec(tmp_path, [{"name": "dyck", "sets": ["long-50", "depth"], "size": 20, "seed": 3, "beam": 5}])
    runs = experiment_runs(spec)
    tasks = Planner(spec, runs, tmp_path / "runs", python="py").eval_tasks()
    evaluated = {Path(t.argv[5]).parent.parent.name for t in tasks}
    assert evaluated == {r.run_id for r in runs if r.model in ("pushdown", "base-lm")}  # not ptb-base, not tg
    assert len(tasks) == 4
    for t in tasks:
        argv = list(t.argv)
        assert argv[3:5] == ["eval", "dyck"] and argv[5].endswith("checkpoints/best.ckpt")
        assert argv[argv.index("--out") + 1] == str(t.folder) and t.done == t.folder / "results.json"
        assert t.folder.name == "dyck"
        assert argv[argv.index("--size") + 1] == "20" and argv[argv.index("--seed") + 1] == "3"
        assert [argv[i + 1] for i, a in enumerate(argv) if a == "--set"] == ["long-50", "depth"]
        # the entry's beam: read by pushdown checkpoints, not part of a base-lm result's identity
        assert argv[argv.index("--beam") + 1] == "5" and "--method" not in argv


@pytest.mark.parametrize("entry", [{"name": "dyck", "sets": ["long-7"]}, {"name": "dyck", "size": 0},
                                   {"name": "dyck", "seed": -1}, {"name": "dyck", "limit": 3},
                                   {"name": "ppl", "sets": ["depth"]}])
def test_bad_dyck_options_are_errors(tmp_path, entry):
    with pytest.raises(InputError):
        Planner(_spec(tmp_path, [entry]), [], tmp_path / "runs")


@pytest.mark.parametrize("name", ["pushdown-dyck", "pushdown-dyck-cpu", "pushdown-dyck-cpu-long"])
def test_shipped_dyck_experiments_plan_one_eval_per_run(tmp_path, name):
    spec = load_spec(configs_dir() / "experiment" / f"{name}.yaml")
    runs = experiment_runs(spec)
    assert {r.family for r in runs} == {"pushdown", "base-lm"}
    assert all(r.config["data"]["corpus"] == "dyck" and r.config["model"]["attachment_loss"] for r in runs)
    tasks = Planner(spec, runs, tmp_path / "runs").eval_tasks()
    assert len(tasks) == len(runs) and all(t.argv[3:5] == ("eval", "dyck") for t in tasks)


def test_parse_evaluates_the_text_pushdown_runs_only(tmp_path):
    models = [*MODELS, {"name": "ptb-push", "family": "pushdown", "preset": "cpu-small"}]
    spec = _spec(tmp_path, [{"name": "parse", "beam": 8, "limit": 50}], models)
    runs = experiment_runs(spec)
    tasks = Planner(spec, runs, tmp_path / "runs", python="py").eval_tasks()
    assert {Path(t.argv[5]).parent.parent.name for t in tasks} == {r.run_id for r in runs if r.model == "ptb-push"}
    for t in tasks:
        argv = list(t.argv)
        assert argv[3:5] == ["eval", "parse"] and t.folder.name == "parse"
        assert argv[argv.index("--gold") + 1] == "ptb-sample/test" and argv[argv.index("--beam") + 1] == "8"
        assert argv[argv.index("--limit") + 1] == "50" and argv[argv.index("--method") + 1] == "beam"
