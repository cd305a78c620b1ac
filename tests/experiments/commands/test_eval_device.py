"""``--device cpu|cuda`` of every command that scores with a model: CUDA asked for where there is none is one
error line naming the option (exit 2), before any model or data is read; an evaluation plan passes the device
to every eval it runs."""

from __future__ import annotations

import pytest
import torch

from experiments import cli
from experiments.evaluation_plan import Planner
from experiments.experiment_runs import experiment_runs
from experiments.experiment_spec import load_spec
from tests.conftest import SHARED_DATA

MODEL_TASKS = [
    ("ppl", "--data-dir", str(SHARED_DATA)),
    ("sg", "--data-dir", str(SHARED_DATA)),
    ("blimp", "--data-dir", str(SHARED_DATA)),
    ("rerank", "--proposals", "p.jsonl", "--gold", "ptb-sample/test", "--data-dir", str(SHARED_DATA)),
    ("parse", "--gold", "ptb-sample/test", "--data-dir", str(SHARED_DATA)),
    ("unsupervised-f1", "--gold", "ptb-sample/test", "--data-dir", str(SHARED_DATA)),
    ("terminals", "--data-dir", str(SHARED_DATA)),
    ("dyck",),
]


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the message of a machine without CUDA")
@pytest.mark.parametrize("task", MODEL_TASKS, ids=[t[0] for t in MODEL_TASKS])
def test_cuda_without_cuda_is_one_error_line(capsys, tmp_path, task):
    code = cli.main(["eval", task[0], str(tmp_path / "missing.ckpt"), *task[1:], "--device", "cuda"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1
    assert err.startswith("synbench: error: --device: CUDA is not available")


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the message of a machine without CUDA")
@pytest.mark.parametrize("argv", [("evaluate", "smoke"), ("reproduce", "tg", "--scale", "demo")])
def test_experiment_stages_check_cuda_before_starting(capsys, tmp_path, argv):
    assert cli.main([*argv, "--device", "cuda", "--runs-dir", str(tmp_path)]) == 2
    assert capsys.readouterr().err.startswith("synbench: error: --device: CUDA is not available")
    assert not any(tmp_path.iterdir())


def test_an_unknown_device_is_a_usage_error(capsys):
    assert cli.main(["eval", "ppl", "x.ckpt", "--device", "tpu"]) == 2
    assert "argument --device: invalid choice: 'tpu'" in capsys.readouterr().err


def test_the_plan_runs_every_eval_on_the_chosen_device(tmp_path):
    spec = load_spec("reproduce-tg-demo")
    runs = experiment_runs(spec)
    on_gpu = Planner(spec, runs, tmp_path, device="cuda").eval_tasks()
    on_cpu = Planner(spec, runs, tmp_path).eval_tasks()
    assert on_gpu and all(t.argv[t.argv.index("--device") + 1] == "cuda" for t in on_gpu)
    assert not any("--device" in t.argv for t in on_cpu)
    assert [t.folder for t in on_gpu] == [t.folder for t in on_cpu]  # the same results folders: not a new task
