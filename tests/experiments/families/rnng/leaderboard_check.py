"""A fixed-stack family's trained run through the experiment pipeline, shared by the RNNG and CAG tests: the run
as a spec's model (its folder), its beam perplexity through the evaluation plan equal to ``synbench eval``'s, and
``aggregate`` and ``leaderboard`` showing it as a row of its family."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml


def check_on_the_leaderboard(checkpoint: Path, family: str, tmp_path: Path, capsys) -> None:
    from experiments.evaluation_plan import Planner
    from experiments.experiment_runs import experiment_runs
    from experiments.experiment_spec import load_spec
    from experiments.submit import Plan, register_sources

    ppl = {"name": "ppl", "corpus": "ptb-sample", "split": "test", "limit": 3, "beam": 4, "word_beam": 2}
    path = tmp_path / "exp.yaml"
    path.write_text(yaml.safe_dump({"models": [{"source": str(checkpoint.parent.parent), "name": f"{family}-run"}],
                                    "seeds": 1, "evaluations": [ppl]}, sort_keys=False))
    spec = load_spec(path)
    runs, root = experiment_runs(spec), tmp_path / "runs"
    register_sources(Plan(spec, root, runs, [], [], {}))
    [task] = Planner(spec, runs, root).eval_tasks()
    argv = list(task.argv)
    assert main_ok(capsys, argv[argv.index("eval"):])
    planned = json.loads(task.done.read_text())
    capsys.readouterr()
    assert main_ok(capsys, ["eval", "ppl", str(checkpoint), "--corpus", "ptb-sample", "--split", "test", "--limit",
                            "3", "--beam", "4", "--word-beam", "2", "--json"])
    direct = json.loads(capsys.readouterr().out)
    assert planned["metrics"]["word_ppl"] == pytest.approx(direct["metrics"]["word_ppl"], rel=1e-9)
    assert planned["settings"]["scorer_convention"]["method"] == "beam"
    assert main_ok(capsys, ["aggregate", str(path), "--runs-dir", str(root)])
    capsys.readouterr()
    assert main_ok(capsys, ["leaderboard", str(root / spec.name), "--json"])
    [row] = json.loads(capsys.readouterr().out)["rows"]
    assert (row["model"], row["family"]) == (f"{family}-run", family)
    assert row["metrics"]["ppl"]["mean"] == pytest.approx(direct["metrics"]["word_ppl"], rel=1e-9)


def main_ok(capsys, argv: list[str]) -> bool:
    """``synbench ARGV`` exits 0 (its error output in the assertion otherwise)."""
    from experiments.cli import main

    code = main([str(a) for a in argv])
    if code != 0:
        raise AssertionError(capsys.readouterr().err)
    return True
