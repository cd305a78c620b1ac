"""submit / status / aggregate / sync on this machine (local executor, synthetic run folders, a fake `wandb`).

The SLURM and PostgreSQL versions are in test_orchestration_slurm.py."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from experiments.cli import main
from experiments.experiment_runs import experiment_runs, folder_of
from experiments.experiment_spec import load_spec
from experiments.runs import read_queued, write_done, write_failed, write_heartbeat, write_queued

REPO = Path(__file__).resolve().parents[2]


def fake_done(folder: Path, seed: int, loss: float) -> dict:
    metrics = {"best_val_loss": loss, "global_step": 8, "family": "tg", "seed": seed, "val_token_ppl": 2 * loss,
               "val_word_ppl_convention": "gold-tree bound"}
    write_done(folder, metrics)
    return metrics


def status_json(capsys, spec, root) -> tuple[int, dict]:
    code = main(["status", str(spec), "--runs-dir", str(root), "--json"])
    return code, json.loads(capsys.readouterr().out)


def test_shipped_smoke_spec_is_tiny():
    spec = load_spec("smoke")
    runs = experiment_runs(spec)
    assert len(runs) == 8 and {r.family for r in runs} == {"tg", "txl-terminals"}
    for run in runs:
        assert run.config["model"]["d_model"] == 32 and run.config["model"]["n_layers"] == 2
        assert run.config["train"]["max_steps"] == 20
    assert spec.tune is not None and spec.tune.model == "tg"
    assert [r.seed for r in experiment_runs(spec, "5-6")] == [5, 6, 5, 6]


def test_status_json_states_and_exit_status(tmp_path, capsys, tiny_spec):
    spec = tiny_spec(seeds="0-4")
    root = tmp_path / "runs"
    runs = experiment_runs(load_spec(spec))
    folders = [folder_of(root, r) for r in runs]
    done = fake_done(folders[0], 0, 5.0)
    write_heartbeat(folders[1], 3)  # beating now: RUNNING
    write_heartbeat(folders[2], 3, now=time.time() - 3600)  # process died an hour ago
    write_failed(folders[3], "training loss is nan (diverged)")
    # folders[4] never started: PENDING
    code, report = status_json(capsys, spec, root)
    assert code == 1
    assert list(report) == ["runs"]
    rows = report["runs"]
    assert [(r["run_id"], r["seed"]) for r in rows] == [(r.run_id, r.seed) for r in runs]
    assert [r["state"] for r in rows] == ["DONE", "RUNNING", "FAILED", "FAILED", "PENDING"]
    assert {"run_id", "seed", "state", "metrics"} <= set(rows[0])
    assert rows[0]["metrics"] == done and rows[1]["metrics"] is None
    assert "no heartbeat" in rows[2]["error"] and "diverged" in rows[3]["error"]
    for folder in folders[2:4]:  # clear the failures: nothing failed, exit status 0
        for marker in ("FAILED", "HEARTBEAT"):
            (folder / marker).unlink(missing_ok=True)
    assert status_json(capsys, spec, root)[0] == 0
    (folders[4] / "DONE").parent.mkdir(parents=True, exist_ok=True)
    (folders[4] / "DONE").write_text('{"best_val_loss": 4.')  # cut short: that run FAILED, the rest as before
    code, report = status_json(capsys, spec, root)
    assert code == 1 and [r["state"] for r in report["runs"]] == ["DONE", "RUNNING", "PENDING", "PENDING", "FAILED"]
    assert report["runs"][4]["error"] == f"{folders[4] / 'DONE'}: damaged DONE marker (expected the final " \
                                         "metrics as JSON)"
    (folders[4] / "DONE").unlink()
    assert main(["status", str(spec), "--runs-dir", str(root)]) == 0  # the table
    table = capsys.readouterr().out
    assert runs[0].run_id in table and "DONE 1  RUNNING 1  PENDING 3  FAILED 0" in table


def test_dry_run_lists_exactly_what_is_missing_and_writes_nothing(tmp_path, capsys, tiny_spec):
    spec = tiny_spec(families=("tg", "txl-terminals"), seeds="0-2")
    root = tmp_path / "runs"
    runs = experiment_runs(load_spec(spec))
    fake_done(folder_of(root, runs[0]), 0, 5.0)
    # a run queued by a live local launcher (this process): in flight
    write_queued(folder_of(root, runs[1]), "local", f"local-{os.getpid()}-0", time.time())
    # a run queued by a launcher that is gone (pid 2**22 + 1 does not exist here): its job ended
    write_queued(folder_of(root, runs[2]), "local", f"local-{2**22 + 1}-0", time.time())
    before = sorted(p.relative_to(root) for p in root.rglob("*"))

    def would_run(*flags):
        assert main(["submit", str(spec), "--runs-dir", str(root), "--dry-run", *flags]) == 0
        lines = capsys.readouterr().out.splitlines()
        return [line.split()[1].rstrip(":") for line in lines if line.startswith("  run ")]

    everything_but_done = [r.run_id for r in runs[1:]]
    assert would_run() == everything_but_done
    assert would_run("--only-missing") == [r.run_id for r in runs[2:]]
    assert would_run("--executor", "slurm", "--only-missing") == [r.run_id for r in runs[2:]]
    assert sorted(p.relative_to(root) for p in root.rglob("*")) == before

    assert main(["submit", str(spec), "--runs-dir", str(root), "--dry-run", "--executor", "slurm"]) == 0
    out = capsys.readouterr().out
    assert "#SBATCH --array=0-4%2" in out and "#SBATCH --signal=B:SIGUSR1@90" in out
    assert "--dependency=afterany" in out and " aggregate " in out


@pytest.mark.slow
def test_local_submit_trains_only_missing_runs_and_aggregates(tmp_path, capsys, tiny_spec):
    spec = tiny_spec(seeds="0-2")
    root = tmp_path / "runs"
    runs = experiment_runs(load_spec(spec))
    assert main(["submit", str(spec), "--runs-dir", str(root)]) == 0
    assert "submitted 3 of 3 runs" in capsys.readouterr().out
    code, report = status_json(capsys, spec, root)
    assert code == 0 and [r["state"] for r in report["runs"]] == ["DONE"] * 3
    first = {r["run_id"]: r["metrics"] for r in report["runs"]}
    assert all(read_queued(folder_of(root, r)).executor == "local" for r in runs)
    # one run lost, one failed: a second submit trains exactly those two; DONE runs are left alone
    import shutil

    shutil.rmtree(folder_of(root, runs[0]))
    (folder_of(root, runs[1]) / "DONE").unlink()
    write_failed(folder_of(root, runs[1]), "simulated failure")
    untouched = (folder_of(root, runs[2]) / "DONE").stat().st_mtime_ns
    assert main(["submit", str(spec), "--runs-dir", str(root), "--only-missing"]) == 0
    assert "submitted 2 of 3 runs; left alone: 1 DONE" in capsys.readouterr().out
    assert (folder_of(root, runs[2]) / "DONE").stat().st_mtime_ns == untouched
    code, report = status_json(capsys, spec, root)
    assert code == 0 and {r["run_id"]: r["metrics"] for r in report["runs"]} == first  # same numbers again
    table = pd.read_parquet(root / "exp" / "aggregate" / "metrics_long.parquet")
    assert sorted(table["seed"].unique()) == [0, 1, 2]


def make_synthetic_experiment(tmp_path, tiny_spec, seeds: str):
    spec = tiny_spec(families=("tg", "txl-terminals"), seeds=seeds)
    root = tmp_path / "runs"
    runs = experiment_runs(load_spec(spec))
    for i, run in enumerate(runs):
        folder = folder_of(root, run)
        if i == 1:
            write_failed(folder, "out of memory")
        elif i == 2:
            continue  # never ran
        else:
            fake_done(folder, run.seed, 4.0 + i / 100)
            (folder / "config.json").write_text(json.dumps({"seed": run.seed, **run.config}))
    return spec, root, runs


def test_aggregate_tidy_tables_and_report(tmp_path, capsys, tiny_spec, tiny_treebank):
    spec, root, runs = make_synthetic_experiment(tmp_path, tiny_spec, "0-3")
    for label, method in (("", "beam"), ("@gold", "gold")):  # one run's perplexity scored two ways
        results = folder_of(root, runs[0]) / "eval" / f"ppl{label}" / "results.json"
        results.parent.mkdir(parents=True)
        results.write_text(json.dumps({"metrics": {"word_ppl": 80.0, "oov_rate": 0.0}, "n_items": 12,
                                       "settings": {"method": method, "description": f"{method} (10/3)",
                                                    "corpus": "tiny/test", "level": "sentence"}}))
    assert main(["aggregate", str(spec), "--runs-dir", str(root)]) == 0
    captured = capsys.readouterr()
    assert "6 of 8 runs done" in captured.out
    assert f"FAILED  {runs[1].run_id}: out of memory" in captured.err and "missing 1 run(s)" in captured.err
    out = root / "exp" / "aggregate"
    long = pd.read_parquet(out / "metrics_long.parquet")
    assert list(long.columns) == ["experiment", "run_id", "model", "family", "data", "seed", "config_hash",
                                  "metric", "value"]
    # 6 DONE runs x 3 numeric metrics (text metrics go to the wide table), and one run's 2 x 2 eval metrics
    assert len(long) == 6 * 3 + 4
    assert set(long["metric"]) == {"best_val_loss", "global_step", "val_token_ppl", "ppl", "ppl_oov_rate",
                                   "ppl@gold", "ppl_oov_rate@gold"}
    loss = long[(long.run_id == runs[3].run_id) & (long.metric == "best_val_loss")]["value"].item()
    assert loss == pytest.approx(4.03)
    assert set(long["data"]) == {str(tiny_treebank)}  # no data list in the spec: the corpus of the config
    pd.testing.assert_frame_equal(pd.read_csv(out / "metrics_long.csv"), long, check_dtype=False)
    wide = pd.read_parquet(out / "metrics_wide.parquet")
    assert list(wide["run_id"]) == [r.run_id for r in runs]
    assert list(wide["state"][:3]) == ["DONE", "FAILED", "PENDING"]
    assert wide["val_word_ppl_convention"][0] == "gold-tree bound"
    summary = json.loads((out / "summary.json").read_text())
    assert summary["done"] == 6 and summary["missing"] == [runs[2].run_id]
    assert summary["failed"] == [{"run_id": runs[1].run_id, "seed": runs[1].seed, "error": "out of memory"}]
    assert summary["scoring"] == {"ppl": {runs[0].model: [{"method": "beam", "description": "beam (10/3)"}]},
                                  "ppl@gold": {runs[0].model: [{"method": "gold", "description": "gold (10/3)"}]}}
    # what each metric was computed on (the Welch tests compare only models that agree)
    assert summary["evaluated_on"]["ppl@gold"] == {runs[0].model: "tiny/test, sentence level, 12 items"}
    assert summary["evaluated_on"]["best_val_loss"] == {
        r.model: f"{tiny_treebank} in training, sentence level" for r in runs}
    assert not list(out.glob(".*.tmp"))  # atomic writes leave no temporary files
    (folder_of(root, runs[3]) / "DONE").write_text("\x00\x00")  # damaged: that run fails, the rest aggregate
    assert main(["aggregate", str(spec), "--runs-dir", str(root)]) == 0
    assert "5 of 8 runs done" in capsys.readouterr().out
    summary = json.loads((out / "summary.json").read_text())
    assert [f["run_id"] for f in summary["failed"]] == [runs[1].run_id, runs[3].run_id]
    assert "damaged DONE marker" in summary["failed"][1]["error"]


def test_aggregate_imports_neither_torch_nor_lightning(tmp_path, tiny_spec):
    spec, root, _ = make_synthetic_experiment(tmp_path, tiny_spec, "0-1")
    code = (
        "import sys; from experiments.cli import main; "
        f"assert main(['aggregate', {str(spec)!r}, '--runs-dir', {str(root)!r}]) == 0; "
        "heavy = [m for m in ('torch', 'pytorch_lightning', 'lightning_fabric') if m in sys.modules]; "
        "assert not heavy, heavy"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


# --- sync: a FAKE `wandb` executable (no network here) records the commands it is given ---

FAKE_WANDB = """#!{python}
# FAKE wandb for tests: records argv, and marks segments synced like `wandb sync` does.
import json, os, sys
from pathlib import Path
with open(os.environ["FAKE_WANDB_LOG"], "a") as f:
    f.write(json.dumps(sys.argv[1:]) + "\\n")
for arg in sys.argv[1:]:
    for data in Path(arg).glob("run-*.wandb") if Path(arg).is_dir() else []:
        Path(str(data) + ".synced").touch()
"""


def offline_segment(folder: Path, run_id: str, stamp: str) -> Path:
    segment = folder / "wandb" / f"offline-run-{stamp}-{run_id}"
    segment.mkdir(parents=True)
    (segment / f"run-{run_id}.wandb").write_bytes(b"records")
    return segment


def test_sync_uploads_each_runs_segments_in_order_with_its_id(tmp_path, capsys, tiny_spec, monkeypatch):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "wandb"
    fake.write_text(FAKE_WANDB.format(python=sys.executable))
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    log = tmp_path / "wandb-calls.jsonl"
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_WANDB_LOG", str(log))

    spec = tiny_spec(seeds="0-2")
    root = tmp_path / "runs"
    runs = experiment_runs(load_spec(spec))
    a, b, c = (folder_of(root, r) for r in runs)
    # run a was requeued once: two segments (the later one listed first on purpose)
    late = offline_segment(a, runs[0].run_id, "20261121_120500")
    early = offline_segment(a, runs[0].run_id, "20261121_120000")
    fake_done(a, 0, 4.0)
    # run b: one segment already uploaded, one new
    synced = offline_segment(b, runs[1].run_id, "20261121_110000")
    Path(f"{synced}/run-{runs[1].run_id}.wandb.synced").touch()
    new = offline_segment(b, runs[1].run_id, "20261121_111000")
    # run c is still training: a live offline run cannot be synced
    offline_segment(c, runs[2].run_id, "20261121_130000")
    write_heartbeat(c, 5)

    assert main(["sync", str(spec), "--runs-dir", str(root), "--dry-run"]) == 0
    assert not log.exists()
    assert f"skipping {runs[2].run_id}: still running" in capsys.readouterr().out

    assert main(["sync", str(spec), "--runs-dir", str(root), "--project", "synbench-test"]) == 0
    calls = [json.loads(line) for line in log.read_text().splitlines()]
    assert calls == [
        ["sync", "--id", runs[0].run_id, "--project", "synbench-test", str(early), str(late)],
        ["sync", "--id", runs[1].run_id, "--project", "synbench-test", str(new)],
    ]
    log.unlink()
    assert main(["sync", str(spec), "--runs-dir", str(root)]) == 0  # everything uploaded: nothing to do
    assert not log.exists() and "0 run(s), 0 segment(s)" in capsys.readouterr().out


def test_bad_input_is_one_error_line(tmp_path, capsys):
    assert main(["status", "no-such-experiment"]) == 2
    assert "synbench: error: no experiment 'no-such-experiment'" in capsys.readouterr().err
    assert main(["submit", "smoke", "--seeds", "3-1", "--dry-run"]) == 2
    assert "--seeds: empty seed range 3-1" in capsys.readouterr().err
    bad = tmp_path / "bad.yaml"
    bad.write_text("models:\n  - family: tg\n    overrides: {train.max_stepz: 3}\nseeds: 0\n")
    assert main(["aggregate", str(bad), "--runs-dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert f"{bad}:2" in err and "train.max_stepz" in err
    assert not (tmp_path / "bad").exists()


def test_a_local_pool_starts_the_longest_runs_first(tmp_path):
    """The TG demo's proposal parser (500 steps) starts first on a local pool, not after the ten 80- and 150-step
    runs (it would then train alone on an idle machine); the manifest (a SLURM array's task order) keeps the
    spec's order."""
    from experiments.reproduce import spec_for
    from experiments.submit import longest_first, plan_submission

    plan = plan_submission(spec_for("tg", "demo"), tmp_path, None, only_missing=True)
    models = {run.run_id: run.model for run in plan.runs}
    assert [models[t.run_id] for t in plan.tasks][-1] == "parser"
    order = [models[t.run_id] for t in longest_first(plan)]
    assert order == ["parser", *(["tg"] * 2), *(["txl-trees"] * 2), *(["txl-terminals"] * 2),
                     *(["tg-doc"] * 2), *(["txl-trees-doc"] * 2)]
