"""A spec model ``{source: RUN_DIR}``: a finished run folder (here one ``synbench import`` wrote from the official
Pushdown Layers golden files) is evaluated as it is, like an ``hf:`` source: one run of its checkpoint's
family, registered done, its evaluations scoring ``RUN_DIR/checkpoints/best.ckpt`` and equal to ``synbench eval``
on that checkpoint, aggregated and on the leaderboard; a folder without a checkpoint is a located error."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from experiments.cli import main
from experiments.evaluation_plan import Planner
from experiments.experiment_runs import experiment_runs, folder_of
from experiments.experiment_spec import load_spec
from experiments.submit import Plan, register_sources
from lightning_modules.errors import InputError

GOLDEN = Path(__file__).resolve().parents[1] / "golden" / "pushdown" / "pushdown"
PPL = {"name": "ppl", "corpus": "ptb-sample", "split": "train", "limit": 3, "method": "gold"}


def _spec(tmp_path: Path, models: list[dict]) -> Path:
    path = tmp_path / "exp.yaml"
    path.write_text(yaml.safe_dump({"models": models, "seeds": 0, "evaluations": [PPL]}, sort_keys=False))
    return path


def test_an_imported_run_folder_is_a_spec_source_evaluated_as_it_is(tmp_path, capsys):
    run_dir = tmp_path / "imported"
    assert main(["import", "pushdown", str(GOLDEN / "model.pt"), "--vocab", str(GOLDEN / "vocab.pkl"),
                 "--out", str(run_dir)]) == 0
    checkpoint = run_dir / "checkpoints" / "best.ckpt"
    spec = load_spec(_spec(tmp_path, [{"source": str(run_dir), "name": "official"}]))
    [model] = spec.models
    assert (model.family, model.source, model.seeds) == ("pushdown", str(checkpoint), (0,))
    [run] = experiment_runs(spec)
    assert run.config["source"] == str(checkpoint) and run.config["data"]["corpus"] == "ptb-sample"
    with pytest.raises(InputError, match=r"models\[0\]\.hf_convention: applies to hf: sources only"):
        (tmp_path / "bad").mkdir()
        load_spec(_spec(tmp_path / "bad", [{"source": str(run_dir), "hf_convention": "lm-eval"}]))
    root = tmp_path / "runs"
    planner = Planner(spec, [run], root)
    register_sources(Plan(spec, root, [run], [], [], {}))  # nothing to train: a finished run at once
    done = json.loads((folder_of(root, run) / "DONE").read_text())
    assert done == {"family": "pushdown", "seed": 0, "source": str(checkpoint)}
    [task] = planner.eval_tasks()
    argv = list(task.argv)
    start = argv.index("eval")
    assert argv[start + 2] == str(checkpoint) and argv[argv.index("--method") + 1] == "gold"
    capsys.readouterr()
    assert main(argv[start:]) == 0
    planned = json.loads(task.done.read_text())
    capsys.readouterr()
    assert main(["eval", "ppl", str(checkpoint), "--corpus", "ptb-sample", "--split", "train", "--limit", "3",
                 "--method", "gold", "--json"]) == 0
    direct = json.loads(capsys.readouterr().out)
    assert planned["metrics"]["word_ppl"] == pytest.approx(direct["metrics"]["word_ppl"], rel=1e-9)
    # aggregated and on the leaderboard like a trained run
    assert main(["aggregate", str(tmp_path / "exp.yaml"), "--runs-dir", str(root)]) == 0
    capsys.readouterr()
    assert main(["leaderboard", str(root / spec.name), "--json"]) == 0
    [row] = json.loads(capsys.readouterr().out)["rows"]
    assert (row["model"], row["family"]) == ("official", "pushdown")
    assert row["metrics"]["ppl"]["mean"] == pytest.approx(direct["metrics"]["word_ppl"], rel=1e-9)


def test_a_folder_without_a_checkpoint_is_a_located_error(tmp_path):
    (tmp_path / "empty").mkdir()
    path = _spec(tmp_path, [{"source": str(tmp_path / "empty")}])
    with pytest.raises(InputError, match=r"models\[0\]\.source: expected hf:DIR .* or RUN_DIR \(a run folder with "
                                         r"checkpoints/best\.ckpt, e\.g\. from synbench import\)"):
        load_spec(path)
    (tmp_path / "bad" / "checkpoints").mkdir(parents=True)
    (tmp_path / "bad" / "checkpoints" / "best.ckpt").write_text("not a checkpoint")
    with pytest.raises(InputError, match=r"models\[0\]\.source: .*best\.ckpt: cannot read checkpoint"):
        load_spec(_spec(tmp_path, [{"source": str(tmp_path / "bad")}]))
