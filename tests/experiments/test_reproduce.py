"""``synbench reproduce``: papers and scales from the registry, the plan overview, and (slow) the whole pipeline
on a tiny TG experiment and on the shipped Pushdown demo."""

import hashlib
import json
from pathlib import Path

import pytest
import yaml

from analysis.report import write_report
from experiments.cli import main
from experiments.experiment_spec import load_spec
from experiments.reproduce import overview, run_pipeline, spec_for
from lightning_modules.errors import InputError


def snapshot(experiment: Path) -> dict[str, tuple[int, str]]:
    """(mtime in ns, SHA-256) of every file an experiment's runs produced: run folders (checkpoints, DONE,
    evaluation results and caches, logs) and proposal sets; the aggregate, analysis and report are derived
    and may be written again."""
    derived = {"aggregate", "analysis", "logs", "report.md", "report.html"}
    return {str(path.relative_to(experiment)): (path.stat().st_mtime_ns, hashlib.sha256(path.read_bytes()).hexdigest())
            for top in experiment.iterdir() if top.name not in derived
            for path in ([top] if top.is_file() else sorted(top.rglob("*"))) if path.is_file()}


def test_scales_and_errors():
    assert spec_for("tg", "demo").name == "reproduce-tg-demo"
    assert spec_for("pushdown", "demo").name == "reproduce-pushdown-demo"
    assert spec_for("pushdown", "cpu-small").name == "pushdown-ptb-cpu"
    assert spec_for("palm", "cpu-small").name == "reproduce-palm-cpu-small"
    assert spec_for("som", "demo").name == "reproduce-som-demo"
    with pytest.raises(InputError, match=r"unknown paper 'nope' \(known: compare, dtg, palm, pushdown, som, tg\)"):
        spec_for("nope", "demo")
    with pytest.raises(InputError, match=r"paper 'tg' has no scale 'huge' \(its scales: demo, cpu-small, paper\)"):
        spec_for("tg", "huge")


@pytest.mark.parametrize(("argv", "error"), [
    (["nope"], "PAPER: unknown paper 'nope' (known: compare, dtg, palm, pushdown, som, tg)"),
    (["pushdown", "--scale", "huge"],
     "--scale: paper 'pushdown' has no scale 'huge' (its scales: demo, cpu-small, paper)"),
])
def test_an_unknown_paper_or_scale_is_one_error_line(tmp_path, capsys, argv, error):
    assert main(["reproduce", *argv, "--runs-dir", str(tmp_path / "runs")]) == 2
    assert capsys.readouterr().err.strip() == f"synbench: error: {error}"
    assert not (tmp_path / "runs").exists()


def test_overview_names_every_stage_and_reduction():
    text = overview(spec_for("tg", "cpu-small"), "0-2")
    assert "tg x3" in text and "parser x1" in text and "(16 runs)" in text
    assert "evaluate: ppl, sg, blimp, rerank, terminals" in text
    assert "3 seeds per model (full protocol: 100)" in text


def test_bad_seed_count_is_one_error_line(tmp_path, capsys):
    assert main(["reproduce", "tg", "--scale", "demo", "--seeds", "0", "--runs-dir", str(tmp_path)]) == 2
    assert capsys.readouterr().err == "synbench: error: argument --seeds: expected an integer >= 1, got '0'\n"


@pytest.mark.slow
def test_tiny_pipeline_end_to_end(tmp_path, tiny_treebank, prepared_data_dir, monkeypatch):
    """Every stage for real (local executor, subprocesses) on tiny models; a second call does nothing new."""
    monkeypatch.setenv("SYNBENCH_DATA", str(prepared_data_dir))
    tiny = {"model": {"d_model": 32, "n_layers": 2, "n_heads": 2, "d_ff": 64, "warmup_steps": 2, "total_steps": 6},
            "train": {"max_steps": 6, "val_every": 3, "ckpt_every": 3, "batch_size": 4, "log_every": 1},
            "data": {"corpus": str(tiny_treebank), "train_split": "file", "valid_split": "file"},
            "runtime": {"wandb": "disabled", "progress": False}}
    doc = {**tiny, "data": {**tiny["data"], "level": "document"}}
    parser = {"model": {"d_model": 32, "n_encoder_layers": 1, "n_decoder_layers": 1, "n_heads": 2, "d_ff": 64},
              "train": tiny["train"], "data": tiny["data"], "runtime": tiny["runtime"]}
    options = {"proposals": "parser", "n": 2}
    spec_path = tmp_path / "tiny-repro.yaml"
    spec_path.write_text(yaml.safe_dump({
        "seeds": "0-1", "compare_to": "reproduce-tg-paper",
        "models": [{"name": "tg", "family": "tg", "overrides": tiny},
                   {"name": "txl-trees", "family": "txl-trees", "overrides": tiny},
                   {"name": "txl-terminals", "family": "txl-terminals", "overrides": tiny},
                   {"name": "tg-doc", "family": "tg", "overrides": doc},
                   {"name": "txl-trees-doc", "family": "txl-trees", "overrides": doc},
                   {"name": "parser", "family": "proposal-parser", "seeds": 0, "overrides": parser}],
        "evaluations": [
            # sentence-level joint models: the union of a beam's trees and the proposals (document-level ones
            # have no beam: proposals), and the gold trees beside
            {"name": "ppl", "split": "file", "limit": 3, "method": "beam", "beam": 4, "word_beam": 2, "max_actions": 8,
             **options},
            {"name": "ppl", "split": "file", "limit": 3, "method": "gold", "label": "gold", "models": ["tg"]},
            {"name": "sg", "items_per_suite": 1, **options},  # every suite: the overall score needs the 31
            {"name": "blimp", "paradigms": ["anaphor_gender_agreement", "regular_plural_subject_verb_agreement_1"],
             "pairs_per_paradigm": 1, **options},
            {"name": "rerank", "split": "file", "limit": 3, **options},
            {"name": "terminals", "split": "file", "models": ["tg", "txl-trees", "tg-doc", "txl-trees-doc"]}],
        "analysis": {"regressions": {"frequency": {"a": "tg", "b": "txl-trees"},
                                     "copying": {"a": "tg-doc", "b": "txl-trees-doc"}},
                     "probing": {"models": ["tg", "txl-terminals"], "train_sentences": 20, "dev_sentences": 10,
                                 "layers": [1], "probes": ["linear"], "tasks": ["pos", "grandparent"],
                                 "max_epochs": 2, "batch_size": 64}},
        "launcher": {"local": {"max_parallel": 2}},
    }))
    spec = load_spec(spec_path)
    outcome = run_pipeline(spec, tmp_path / "runs", poll_s=0.5, write_report=write_report)
    assert outcome.failed == {} and outcome.report_md.is_file() and outcome.report_html.is_file()
    analysis = tmp_path / "runs" / spec.name / "analysis"
    settings = json.loads((analysis / "settings.json").read_text())
    assert settings["runs"]["done"] == 11 and settings["skipped"] == {}
    regressions = json.loads((analysis / "regressions.json").read_text())
    assert "coefficients" in regressions["frequency"] and "coefficients" in regressions["copying"]
    summary = (analysis / "summary.csv").read_text()
    for metric in ("ppl", "sg", "blimp", "f1"):
        assert f"\n{metric}," in summary
    assert "compose" in (analysis / "mdl.csv").read_text()
    text = outcome.report_md.read_text()
    assert "2 seeds per model (full protocol: 100)" in text
    # how each number was scored (one row per evaluation and method, with its models), and the union's bound
    # beside the gold-tree value of the same sentences
    union = "union of the beam's trees (beam 4/2, <= 8 actions per word) and N = 2 proposals"
    assert any(line.startswith("| ppl | tg") and f" | {union}" in line for line in text.splitlines())
    assert "| ppl | txl-terminals | exact |" in text and "| ppl@gold | tg | gold trees" in text
    assert "| tg | perplexity (test) | beam |" in text and "| tg | perplexity (test) on gold | gold |" in text
    # resuming: nothing is trained, proposed or evaluated again (every file of every run left untouched)
    before = snapshot(tmp_path / "runs" / spec.name)
    runs_done = [name for name in before if name.endswith("/DONE") and not name.startswith("eval-groups/")]
    assert len(runs_done) == 11 and any("checkpoints/" in n for n in before)
    again = run_pipeline(spec, tmp_path / "runs", poll_s=0.5, write_report=write_report)
    assert again.failed == {} and snapshot(tmp_path / "runs" / spec.name) == before
    # the spec changed (reranking over N = 3 proposals): that evaluation is made again, over a new proposal
    # set, and nothing else (an older result of another command is never reported as this one's)
    changed = yaml.safe_load(spec_path.read_text())
    changed["evaluations"][4]["n"] = 3
    spec_path.write_text(yaml.safe_dump(changed))
    spec = load_spec(spec_path)
    assert run_pipeline(spec, tmp_path / "runs", poll_s=0.5, write_report=write_report).failed == {}
    after = snapshot(tmp_path / "runs" / spec.name)
    redone = {name for name in before if after.get(name) != before[name]}
    assert redone and all("/eval/rerank/" in name for name in redone)
    assert any(name.startswith("proposals/") and name.endswith("-n3.jsonl") for name in set(after) - set(before))
    for name in (n for n in after if n.endswith("/eval/rerank/results.json")):
        assert json.loads((tmp_path / "runs" / spec.name / name).read_text())["settings"]["n_proposals"] == 3


def _demo(paper: str, tmp_path: Path, data_dir: Path, monkeypatch) -> tuple[list[str], Path, dict, str, str]:
    """Run ``synbench reproduce PAPER --scale demo``: (argv, experiment folder, settings, summary.csv, report.md)."""
    monkeypatch.setenv("SYNBENCH_DATA", str(data_dir))
    argv = ["reproduce", paper, "--scale", "demo", "--runs-dir", str(tmp_path / "runs"), "--poll", "1"]
    assert main(argv) == 0
    exp = tmp_path / "runs" / f"reproduce-{paper}-demo"
    settings = json.loads((exp / "analysis" / "settings.json").read_text())
    return argv, exp, settings, (exp / "analysis" / "summary.csv").read_text(), (exp / "report.md").read_text()


def _resumes_without_work(argv: list[str], exp: Path, runs: int, capsys) -> None:
    """A second call trains, proposes and evaluates nothing again."""
    capsys.readouterr()
    before = snapshot(exp)
    assert main(argv) == 0
    assert f"[train] {runs}/{runs} done" in capsys.readouterr().err
    assert snapshot(exp) == before


@pytest.mark.slow
def test_pushdown_demo_end_to_end(tmp_path, prepared_data_dir, monkeypatch, capsys):
    """``synbench reproduce pushdown --scale demo`` as shipped: every stage, the report with Pushdown Layers'
    Tables 2 and 4 beside ours; a second call trains and evaluates nothing again."""
    argv, exp, settings, summary, text = _demo("pushdown", tmp_path, prepared_data_dir, monkeypatch)
    assert settings["runs"]["done"] == 4 and settings["scale"] == "demo"
    for metric in ("ppl", "sg", "blimp", "parse_f1"):
        assert f"\n{metric},pushdown," in summary
    assert "2 seeds per model (full protocol: 5)" in text and "Paper numbers: Murty et al. (2023)" in text
    assert "75.6 (Table 2, BLiMP, test)" in text and "95.3 (Table 4, PTB unlabeled F1, test)" in text
    out = capsys.readouterr().out
    assert out.startswith("| model |") and "report: " in out
    _resumes_without_work(argv, exp, 4, capsys)


@pytest.mark.slow
def test_palm_demo_end_to_end(tmp_path, prepared_data_dir, monkeypatch, capsys):
    """``synbench reproduce palm --scale demo`` as shipped: AWD-LSTM, PaLM-U/S/RB and untrained PaLM-U models,
    PaLM's Tables 1, 3 and 4 beside ours with the reduced settings stated; a second call does nothing new."""
    argv, exp, settings, summary, text = _demo("palm", tmp_path, prepared_data_dir, monkeypatch)
    assert settings["runs"]["done"] == 10 and settings["scale"] == "demo"
    for model in ("awd-lstm", "palm-u", "palm-s", "palm-rb"):
        assert f"\nppl_stream,{model}," in summary and f"\nppl,{model}," in summary
    for model in ("palm-u", "palm-s", "palm-rb", "palm-u-init"):
        assert f"\nunsupervised_f1,{model}," in summary and f"\nsplits.left,{model}," in summary
    assert "2 seeds per model (full protocol: 3)" in text and "Paper numbers: Peng, Schwartz and Smith (2019)" in text
    assert "| data.corpus | ptb-sample | ptb | every model |" in text  # the reduced settings' table
    # like with like: our awd-lstm (no finetuning) beside Merity et al.'s number without finetuning, PaLM-U its own
    assert "58.8 (Merity et al. 2018 Table 1, PTB perplexity (test), test)" in text
    assert "56.4 (Table 1, PTB perplexity (test), test)" in text
    assert "39.3 ± 10.5 (Table 4, % left splits, test); 6.5 (Table 4, % left splits (gold), test)" in text
    assert "40.7 (Table 3, WSJ-40 unlabeled F1 (right-branching), test)" in text
    _resumes_without_work(argv, exp, 10, capsys)


@pytest.mark.slow
def test_som_demo_end_to_end(tmp_path, prepared_data_dir, monkeypatch, capsys):
    """``synbench reproduce som --scale demo`` as shipped: eSOM, dSOM and the ablations trained on the PTB sample
    as dependency trees, in-domain perplexity / UF1 / p and p' accuracy, UF1 against the original trees with the
    oracle ceiling, labelled out-of-domain evaluations, and the report with Tables 2, 5 and 8 beside ours."""
    argv, exp, settings, summary, text = _demo("som", tmp_path, prepared_data_dir, monkeypatch)
    assert settings["runs"]["done"] == 10 and settings["scale"] == "demo"
    for model, metric in [("esom", "ppl"), ("dsom-teacher-forcing", "parse_f1"), ("dsom", "decision_accuracy.p"),
                          ("esom", "decision_accuracy.p_prime"), ("dsom", "parse_f1_oracle@ptb-trees"),
                          ("dsom", "ppl@gum"), ("dsom-left-branching", "parse_f1@pud"), ("dsom", "ppl@gold-tree"),
                          ("esom", "ppl_end_counted"), ("dsom", "decision_accuracy.p_prime@gold-tree")]:
        assert f"\n{metric},{model}," in summary, (metric, model)
    # no prediction network: no p' decisions to score
    assert "\ndecision_accuracy.p_prime,dsom-no-prediction-network," not in summary
    welch = (exp / "analysis" / "welch.csv").read_text()
    assert "ppl@gum" in welch and "decision_accuracy.p" in welch
    assert "Paper numbers: Shen et al. (2021)" in text and "model esom-no-lm-loss: not trained" in text
    assert "129.3 (Table 2, PTB test perplexity, test)" in text and "0.922 (Table 2, p acc, test)" in text
    assert "350.3 (Table 5, GUM perplexity, test)" in text and "perplexity (test) on gum" in text
    assert "66.8 (Table 8, PTB UF1 (n-ary trees), test)" in text
    assert "60.9 (Table 2, PTB test perplexity, gold decisions, test)" in text  # "– Predicted tree + Gold tree"
    assert "0.884 (Table 2, p' acc, gold decisions, test)" in text  # and its parsers' predictions under that history
    _resumes_without_work(argv, exp, 10, capsys)


@pytest.mark.slow
def test_dtg_demo_end_to_end(tmp_path, prepared_data_dir, monkeypatch, capsys):
    """``synbench reproduce dtg --scale demo`` as shipped: dependency proposals from the dep-parser, perplexity
    bounds over them, SG through the DTG beam, BLiMP, UAS by reranking, the report with DTG's Tables 2 and 3
    beside ours; a second call does nothing new."""
    argv, exp, settings, summary, text = _demo("dtg", tmp_path, prepared_data_dir, monkeypatch)
    assert settings["runs"]["done"] == 11 and settings["scale"] == "demo"
    for metric, model in (("ppl", "dtg"), ("ppl", "txl-tokens"), ("blimp", "dtg-swift"), ("sg", "dtg"),
                          ("uas_rerank", "txl-trans"), ("uas_rerank_parser", "dtg")):
        assert f"\n{metric},{model}," in summary
    proposals = next((exp / "proposals").rglob("ptb-sample-sd-test-n4.jsonl")).read_text().splitlines()
    assert json.loads(proposals[0])["trees"][0].startswith("1\t")  # CoNLL-U trees from the dependency parser
    assert "Paper numbers: Zhao, Lou and Tu (2024)" in text and "83.9 (Table 2, SG test suites (all 34), test)" in text
    _resumes_without_work(argv, exp, 11, capsys)
