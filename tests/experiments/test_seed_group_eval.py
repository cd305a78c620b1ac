"""``synbench evaluate EXPERIMENT --seeds-per-process S``: every eval of S seeds of one config runs in one process
(``experiments.eval_group``), each writing what its solo eval writes; finished members are not run again."""

from __future__ import annotations

import json

import yaml

from experiments.experiment_runs import experiment_runs, folder_of
from experiments.experiment_spec import load_spec
from tests.experiments.conftest import write_tiny_spec


def test_grouped_evaluation_equals_solo_evaluation_and_resumes_per_seed(tmp_path, tiny_treebank, capsys):
    from experiments.cli import main
    from experiments.evaluation_plan import Planner
    from experiments.train import train

    spec_path = write_tiny_spec(tmp_path / "exp.yaml", tiny_treebank, families=("txl-terminals",), seeds="0-1",
                                steps=2)
    spec = yaml.safe_load(spec_path.read_text())
    spec["evaluations"] = [{"name": "ppl", "split": "file", "limit": 4},
                           {"name": "ppl", "split": "file", "limit": 2, "label": "two"}]
    spec_path.write_text(yaml.safe_dump(spec))
    root = tmp_path / "runs"
    runs = experiment_runs(load_spec(spec_path))
    for run in runs:
        train(run.config, run.seed, folder_of(root, run))
    assert main(["evaluate", str(spec_path), "--runs-dir", str(root), "--seeds-per-process", "2"]) == 0
    assert "[evaluate] 1/1 done" in capsys.readouterr().err  # one task: both seeds' two evals in one process
    tasks = Planner(load_spec(spec_path), runs, root).eval_tasks()
    out = [task.done for task in tasks]
    assert len(out) == 4 and {p.parent.name for p in out} == {"ppl", "ppl@two"}
    grouped = [json.loads(p.read_text()) for p in out]
    for task, result in zip(tasks, grouped, strict=True):  # each seed's solo eval, into another folder
        argv = list(task.argv[3:])
        argv[argv.index("--out") + 1] = str(tmp_path / "solo" / task.key)
        assert main(argv) == 0
        solo = json.loads((tmp_path / "solo" / task.key / "results.json").read_text())
        assert solo.pop("created") and {k: v for k, v in result.items() if k != "created"} == solo
    # one member's result lost: a rerun evaluates that seed alone and leaves the others untouched
    out[1].unlink()
    stamp = out[0].stat().st_mtime_ns
    assert main(["evaluate", str(spec_path), "--runs-dir", str(root), "--seeds-per-process", "2"]) == 0
    assert "[evaluate] 4/4 done" in capsys.readouterr().err
    assert {**json.loads(out[1].read_text()), "created": None} == {**grouped[1], "created": None}
    assert out[0].stat().st_mtime_ns == stamp
    # by default (the spec's seeds_per_process: 1) a run's evals share one process: seed 0's two in one task
    for done in (out[0], out[2]):
        done.unlink()
    assert main(["evaluate", str(spec_path), "--runs-dir", str(root)]) == 0
    assert "[evaluate] 3/3 done" in capsys.readouterr().err
    assert all(p.is_file() for p in out)
