"""``seeds_per_process`` / ``submit --seeds-per-process``: the runs of one config to send train S seeds per task
(``train --seeds``), locally and as SLURM array tasks, and end as ordinary runs equal to solo runs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from experiments.experiment_runs import experiment_runs, folder_of
from experiments.experiment_spec import load_spec
from tests.experiments.conftest import write_tiny_spec
from tests.experiments.test_seed_group import close

NO_DROPOUT = {"embedding_dropout": 0, "core_dropout": 0, "core_output_dropout": 0, "attention_dropout": 0}


def grouped_spec(path: Path, treebank: Path, per_process: int, seeds: str = "0-2", dropout: bool = False,
                 **options) -> Path:
    """A tiny tg spec with ``seeds_per_process``; every dropout at 0 unless ``dropout``."""
    write_tiny_spec(path, treebank, seeds=seeds, **options)
    spec = yaml.safe_load(path.read_text())
    if not dropout:
        spec["models"][0]["overrides"]["model"].update(NO_DROPOUT)
    spec["seeds_per_process"] = per_process
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


def planned(capsys, spec: Path, root: Path, *flags: str) -> list[str]:
    """The ``run`` lines of a dry run (each: the run ids of one task, then its command)."""
    from experiments.cli import main

    assert main(["submit", str(spec), "--runs-dir", str(root), "--dry-run", *flags]) == 0
    return [line for line in capsys.readouterr().out.splitlines() if line.startswith("  run ")]


def test_local_groups_train_ordinary_runs_equal_to_solo_runs(tmp_path, tiny_treebank, capsys):
    from experiments.cli import main
    from experiments.config import resolve_train_config
    from experiments.runs import read_queued
    from experiments.train import train

    spec = grouped_spec(tmp_path / "exp.yaml", tiny_treebank, 2, steps=4)
    root = tmp_path / "runs"
    runs = experiment_runs(load_spec(spec))
    lines = planned(capsys, spec, root)
    assert len(lines) == 2 and "--seeds 0,1 --group-dir" in lines[0] and "--seed 2 --run-dir" in lines[1]
    assert main(["submit", str(spec), "--runs-dir", str(root)]) == 0
    assert "submitted 3 of 3 runs" in capsys.readouterr().out
    jobs = [read_queued(folder_of(root, r)).job_id for r in runs]
    assert jobs[0] == jobs[1] != jobs[2]  # seeds 0 and 1 trained in one process
    for run in runs[:2]:  # each seed of the group an ordinary run: its solo run (same id) ends with its numbers
        solo = train(resolve_train_config("tg", "cpu-small", list(run.overrides)), run.seed, tmp_path / f"s{run.seed}")
        grouped = json.loads((folder_of(root, run) / "DONE").read_text())
        assert grouped.pop("device") == "cpu (1 threads)"  # the local launcher's share of the cores
        solo.pop("device")
        assert close(grouped, solo), run.seed
    # a partly finished group sends only its unfinished seed
    (folder_of(root, runs[0]) / "DONE").unlink()
    [line] = planned(capsys, spec, root)
    assert line.startswith(f"  run  {runs[0].run_id}:") and f"--seed 0 --run-dir {folder_of(root, runs[0])}" in line


def test_the_cli_setting_and_the_grouping_in_the_run_ids(tmp_path, tiny_treebank, capsys):
    from experiments.cli import main

    root = tmp_path / "runs"
    plain = grouped_spec(tmp_path / "plain.yaml", tiny_treebank, 1, seeds="0-4")
    assert len(planned(capsys, plain, root)) == 5
    lines = planned(capsys, plain, root, "--seeds-per-process", "4")
    assert ["--seeds 0,1,2,3 --group-dir" in lines[0], "--seed 4 " in lines[1]] == [True, True]
    # with dropout a group's runs are other runs (the group is in their ids): the spec must say so
    dropping = grouped_spec(tmp_path / "dropping.yaml", tiny_treebank, 2, seeds="0-2", dropout=True)
    runs = experiment_runs(load_spec(dropping))
    assert [r.config["runtime"]["seed_group"] for r in runs] == ["0,1", "0,1", None]
    assert "runtime.seed_group=0,1" in planned(capsys, dropping, root)[0]
    assert main(["submit", str(dropping), "--runs-dir", str(root), "--dry-run", "--seeds-per-process", "3"]) == 2
    assert "has dropout" in capsys.readouterr().err
    # a family without a stacked form trains one seed per process, with a notice
    spec = yaml.safe_load(plain.read_text())
    spec["models"][0]["family"] = "awd-lstm"
    spec["models"][0]["overrides"] = {"data": spec["models"][0]["overrides"]["data"]}
    (tmp_path / "lstm.yaml").write_text(yaml.safe_dump(spec))
    lines = planned(capsys, tmp_path / "lstm.yaml", root, "--seeds-per-process", "2")
    assert len(lines) == 5 and all("--seed " in line for line in lines)
    assert main(["submit", str(tmp_path / "lstm.yaml"), "--runs-dir", str(root), "--dry-run",
                 "--seeds-per-process", "2"]) == 0
    assert capsys.readouterr().err.strip() == ("synbench: note: awd-lstm cannot train seeds in groups (no stacked "
                                               "form): one seed per process")


def test_a_group_task_round_trips_through_the_manifest(tmp_path):
    from experiments.launchers.manifest import Task, read_manifest, write_manifest

    tasks = [Task(0, "a-s0", 0, "/r/a-s0", ("x",), (("a-s0", 0, "/r/a-s0"), ("a-s1", 1, "/r/a-s1"))),
             Task(1, "a-s2", 2, "/r/a-s2", ("y",))]
    write_manifest(tmp_path / "m.jsonl", tasks)
    assert read_manifest(tmp_path / "m.jsonl") == tasks
    assert [t.run_dirs() for t in tasks] == [[Path("/r/a-s0"), Path("/r/a-s1")], [Path("/r/a-s2")]]


@pytest.mark.slurm
def test_slurm_array_has_one_task_per_group(slurm_cluster, tmp_path, tiny_treebank):
    """5 seeds, 2 per process: a 3-task array; every seed DONE as an ordinary run, queued under its group's task."""
    import subprocess
    import sys

    from experiments.runs import read_queued, run_status

    spec = grouped_spec(tmp_path / "exp.yaml", tiny_treebank, 2, seeds="0-4", steps=2)
    root = tmp_path / "runs"
    runs = experiment_runs(load_spec(spec))
    done = subprocess.run([sys.executable, "-m", "experiments.cli", "submit", str(spec), "--executor", "slurm",
                           "--runs-dir", str(root), "--wait"], cwd=Path(__file__).resolve().parents[2],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "submitted 5 of 5 runs" in done.stdout
    jobs = [read_queued(folder_of(root, r)).job_id for r in runs]
    array = jobs[0].split("_")[0]
    assert jobs == [f"{array}_{i // 2}" for i in range(5)]
    assert [run_status(folder_of(root, r)).state for r in runs] == ["DONE"] * 5
