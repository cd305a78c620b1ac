"""The task registry: every task declares its needs, CLI, options, plan arguments, metrics and headline; a task
registered from outside (a plug-in) is planned, run and aggregated like a built-in one; eval ppl reads the
words of a dependency corpus."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from analysis.eval_results import run_metrics
from experiments.evaluate import tasks
from experiments.evaluate.tasks import Task
from experiments.families import CAPABILITIES
from lightning_modules.errors import InputError

REPO = Path(__file__).resolve().parents[3]


def test_builtin_tasks_declare_known_needs_and_one_headline_list():
    names = tasks.names()  # the evaluators' tasks in order, then those the families own (in family order)
    assert names[:10] == ("ppl", "sg", "blimp", "rerank", "parse", "unsupervised-f1", "uas", "uas-rerank", "pairs",
                          "marvin-linzen")
    assert sorted(names[10:]) == ["dyck", "terminals"]
    assert all(t.needs in CAPABILITIES for t in tasks.tasks())
    headline = tasks.headline_metrics()
    assert headline == ("ppl", "sg", "sg.all_34", "blimp", "f1", "parse_f1", "decision_accuracy.p",
                        "decision_accuracy.p_prime", "unsupervised_f1", "unsupervised_f1_right_branching",
                        "splits.left", "splits.right", "uas",
                        "uas_rerank", "pairs", "marvin_linzen", "val_ppl", "ppl_stream")
    assert all(tasks.is_tested(m) for m in headline if m not in ("val_ppl", "ppl_stream"))
    assert tasks.is_summarized("gold_splits.left") and not tasks.is_tested("gold_splits.left")
    assert tasks.is_tested("dyck.long-50") and tasks.is_tested("best_val_loss")
    assert tasks.is_summarized("sg.circuit.agreement") and not tasks.is_tested("sg.circuit.agreement")
    assert tasks.is_summarized("f1_oracle") and tasks.is_summarized("val_ppl") and not tasks.is_tested("val_ppl")
    assert not tasks.is_summarized("ppl_oov_rate")
    assert all(t.default_split in (None, "test", "valid") for t in tasks.tasks())


def test_each_task_owns_its_eval_sub_command(capsys):
    """Each task's sub-command is its own module's (the evaluators' in experiments/evaluate/, a family's own task
    in its family folder, registered from there), never a command module's; each one's --help works."""
    from experiments.cli import main

    commands = {t.name: t.command for t in tasks.tasks()}
    assert commands["ppl"] == "experiments.evaluate.ppl:add_command"
    assert commands["terminals"] == "experiments.families.tg.terminals:add_command"
    assert commands["dyck"] == "experiments.families.pushdown.dyck:add_command"
    assert not any(c.startswith("experiments.commands") for c in commands.values())
    source = (REPO / "experiments" / "evaluate" / "tasks.py").read_text(encoding="utf-8")
    assert '"terminals"' not in source and '"dyck"' not in source  # neither defined nor named there
    for name in commands:
        assert main(["eval", name, "--help"]) == 0
        assert f"synbench eval {name}" in capsys.readouterr().out


def test_flatten_maps_results_to_aggregate_metrics(tmp_path):
    results = {
        "ppl": {"word_ppl": 120.5, "oov_rate": 0.02},
        "sg": {"score": 0.5, "circuits": {"agreement": 0.75, "licensing": None}},
        "parse": {"parsed": {"all": {"bracket_f1": 70.1}}, "right_branching": {"all": {"bracket_f1": 40.0}}},
        "uas": {"uas": 81.0, "las": 77.5},
        "pairs": {"accuracy": 0.5, "groups": {"UID": {"a": 1.0, "b": 0.0}}},
        "marvin-linzen": {"accuracy": 0.6, "constructions": {"simple_agrmt": 0.6}, "phenomena": {"agreement": 0.6}},
    }
    for task, metrics in results.items():
        (tmp_path / "eval" / task).mkdir(parents=True)
        (tmp_path / "eval" / task / "results.json").write_text(json.dumps({"metrics": metrics}))
    metrics, settings, notes = run_metrics(tmp_path)
    assert metrics == {"ppl": 120.5, "ppl_oov_rate": 0.02, "sg": 0.5, "sg.circuit.agreement": 0.75,
                       "parse_f1": 70.1, "parse_f1_right_branching": 40.0, "uas": 81.0, "las": 77.5,
                       "pairs": 0.5, "pairs.UID.a": 1.0, "pairs.UID.b": 0.0, "marvin_linzen": 0.6,
                       "marvin_linzen.construction.simple_agrmt": 0.6, "marvin_linzen.phenomenon.agreement": 0.6}
    assert set(settings) == set(results) and notes == []
    split = {"word_ppl": 120.5, "oov_rate": 0.02, "word_ppl_given_tree": 60.0, "structure_nll_per_word": 0.7}
    (tmp_path / "eval" / "ppl" / "results.json").write_text(json.dumps({"metrics": split}))
    assert {k: v for k, v in run_metrics(tmp_path)[0].items() if k.startswith(("ppl_words", "structure"))} == {
        "ppl_words_given_tree": 60.0, "structure_nll_per_word": 0.7}
    (tmp_path / "eval" / "ppl" / "results.json").write_text(json.dumps({"metrics": results["ppl"]}))
    (tmp_path / "eval" / "sg" / "results.json").write_text(json.dumps({"metrics": {"circuits": {}}}))
    assert "sg: results.json lacks the expected metrics" in run_metrics(tmp_path)[2][0]
    # a labelled entry (the same task on another corpus): eval/ppl@gum -> ppl@gum, tested like ppl
    (tmp_path / "eval" / "ppl@gum").mkdir()
    (tmp_path / "eval" / "ppl@gum" / "results.json").write_text(
        json.dumps({"metrics": {"word_ppl": 300.0, "oov_rate": 0.1}, "settings": {"gold": "ud-gum/test"}}))
    metrics, settings, _ = run_metrics(tmp_path)
    assert metrics["ppl@gum"] == 300.0 and metrics["ppl_oov_rate@gum"] == 0.1 and metrics["ppl"] == 120.5
    assert settings["ppl@gum"]["gold"] == "ud-gum/test"
    assert tasks.is_tested("ppl@gum") and not tasks.is_summarized("ppl_oov_rate@gum")
    assert tasks.labelled("ppl", "gum") == "ppl@gum" and tasks.unlabelled("ppl@gum") == "ppl"


def test_a_registered_task_is_planned_and_aggregated(tmp_path, monkeypatch):
    """A task from outside: its options are validated, the plan builds its arguments, its metrics aggregate."""
    from experiments.evaluation_plan import Planner, evaluations
    from experiments.experiment_runs import experiment_runs
    from experiments.experiment_spec import load_spec

    task = Task("lengths", "score", "nowhere:add", lambda m: {"mean_length": m["mean"]}, headline=("mean_length",),
                options=tasks.COMMON_OPTIONS + ("limit",), methods=(),
                arguments=lambda p: ["--corpus", p.corpus, *(["--limit", str(p.options["limit"])]
                                                             if "limit" in p.options else [])])
    monkeypatch.setitem(tasks._TASKS, "lengths", task)
    spec_path = tmp_path / "exp.yaml"
    spec_path.write_text(yaml.safe_dump({"seeds": "0", "evaluations": [{"name": "lengths", "limit": 3}],
                                         "models": [{"name": "lm", "family": "txl-terminals", "preset": "cpu-small"}]}))
    spec = load_spec(spec_path)
    evaluations(spec)
    planner = Planner(spec, experiment_runs(spec), tmp_path / "runs")
    [eval_task] = planner.eval_tasks()
    argv = " ".join(eval_task.argv)
    assert eval_task.argv[3:5] == ("eval", "lengths") and "--corpus ptb-sample --limit 3" in argv
    assert argv.endswith("--method exact")  # scored through the family's default method
    assert "mean_length" in tasks.headline_metrics() and tasks.is_tested("mean_length")
    run_dir = tmp_path / "run"
    (run_dir / "eval" / "lengths").mkdir(parents=True)
    (run_dir / "eval" / "lengths" / "results.json").write_text(json.dumps({"metrics": {"mean": 7.5}}))
    assert run_metrics(run_dir)[0] == {"mean_length": 7.5}
    spec_path.write_text(spec_path.read_text().replace("limit: 3", "suites: [a]"))
    with pytest.raises(InputError, match="not an option of the lengths task"):
        evaluations(load_spec(spec_path))


def test_eval_ppl_reads_the_words_of_a_dependency_corpus(tmp_path, prepared_data_dir):
    """A string model's perplexity on UD EWT (words = the syntactic words' forms); the gold trees are the corpus's
    dependency trees (scored by dependency families only)."""
    from experiments.evaluate.ppl import read_sentences
    from experiments.evaluate.scorers.ngram import build_ngram, save

    model = tmp_path / "bigram.json"
    save(build_ngram("ptb-sample", "train", 2, data_dir=prepared_data_dir), model)
    sentences = read_sentences("ud-ewt", "dev", 5, str(prepared_data_dir))
    assert len(sentences.words) == len(sentences.trees) == 5
    assert [t.forms for t in sentences.gold_source()([sentences.words[1]])[0]] == [tuple(sentences.words[1])]
    first = (prepared_data_dir / "ud" / "UD_English-EWT" / "en_ewt-ud-dev.conllu").read_text().split("\n\n")[0]
    forms = [line.split("\t")[1] for line in first.splitlines() if line.split("\t")[0].isdigit()]
    assert sentences.words[0] == forms
    done = subprocess.run([sys.executable, "-m", "experiments.cli", "eval", "ppl", str(model), "--corpus", "ud-ewt",
                           "--split", "dev", "--limit", "5", "--data-dir", str(prepared_data_dir), "--json",
                           "--out", str(tmp_path / "out")], cwd=REPO, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["metrics"]["sentences"] == 5 and result["metrics"]["words"] == sum(map(len, sentences.words))
    assert result["settings"]["corpus"] == "ud-ewt/dev"
    for argv in (["eval", "rerank", str(model), "--gold", "ud-ewt/dev", "--proposals", str(model)],
                 ["eval", "ppl", str(model), "--corpus", "ud-ewt", "--split", "dev", "--method", "gold"]):
        bad = subprocess.run([sys.executable, "-m", "experiments.cli", *argv, "--data-dir", str(prepared_data_dir)],
                             cwd=REPO, capture_output=True, text=True)
        assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "synbench: error:" in bad.stderr, bad.stderr


def test_parse_pools_decision_hits_and_flattens_the_ceiling() -> None:
    from experiments.evaluate.parse import decision_accuracies

    pooled = decision_accuracies([{"p": [3, 4], "q": [0, 0]}, {"p": [1, 4]}])
    assert pooled == {"p": {"correct": 4, "scored": 8, "accuracy": 0.5}, "q": {"correct": 0, "scored": 0,
                                                                                  "accuracy": None}}
    summary = {"all": {"bracket_f1": 50.0}}
    metrics = {"parsed": summary, "right_branching": summary, "oracle": {"all": {"bracket_f1": 82.5}},
               "decisions": pooled}
    assert tasks.get("parse").flatten(metrics) == {"parse_f1": 50.0, "parse_f1_right_branching": 50.0,
                                                   "parse_f1_oracle": 82.5, "decision_accuracy.p": 0.5}


def test_a_task_named_like_another_with_a_suffix_is_not_its_hashed_folder(tmp_path):
    """``eval/uas-rerank`` is the uas-rerank task's folder, not a ``uas-HASH`` folder of the uas task."""
    folder = tmp_path / "eval" / "uas-rerank"
    folder.mkdir(parents=True)
    (folder / "results.json").write_text(json.dumps({"metrics": {"uas": 40.0, "uas_parser": 35.0,
                                                                 "uas_oracle": 50.0}}))
    (tmp_path / "eval" / "uas-0123abcd").mkdir()
    (tmp_path / "eval" / "uas-0123abcd" / "results.json").write_text(json.dumps({"metrics": {"uas": 81.0}}))
    metrics, _, _ = run_metrics(tmp_path)
    assert metrics == {"uas_rerank": 40.0, "uas_rerank_parser": 35.0, "uas_rerank_oracle": 50.0, "uas": 81.0}
