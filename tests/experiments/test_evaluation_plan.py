"""The ``evaluations:`` of a spec as commands: validation, shared proposal sets, per-run eval commands."""

from pathlib import Path

import pytest
import yaml

from experiments.evaluation_plan import Planner, evaluations
from experiments.experiment_runs import experiment_runs
from experiments.experiment_spec import load_spec
from lightning_modules.errors import InputError

MODELS = [
    {"name": "tg", "family": "tg", "preset": "cpu-small"},
    {"name": "txl-terminals", "family": "txl-terminals", "preset": "cpu-small"},
    {"name": "tg-doc", "family": "tg", "preset": "cpu-small", "overrides": {"data": {"level": "document"}}},
    {"name": "parser", "family": "proposal-parser", "preset": "cpu-small", "seeds": 0},
]


def _spec(tmp_path: Path, evals, models=MODELS):
    path = tmp_path / "exp.yaml"
    path.write_text(yaml.safe_dump({"models": models, "seeds": "0-2", "evaluations": evals}))
    return load_spec(path)


def test_fixed_model_seeds_and_shared_proposals(tmp_path):
    spec = _spec(tmp_path, [{"name": "ppl", "split": "test", "proposals": "parser", "n": 7},
                            {"name": "rerank", "proposals": "parser", "n": 7, "limit": 10},
                            {"name": "terminals", "models": ["tg", "tg-doc"]}])
    runs = experiment_runs(spec)
    assert [r.seed for r in runs if r.model == "parser"] == [0]  # one parser whatever the LM seeds
    assert [r.seed for r in runs if r.model == "tg"] == [0, 1, 2]
    planner = Planner(spec, runs, tmp_path / "runs", python="py")
    proposals = planner.proposal_tasks()
    # ppl and rerank read the same test sentences with the same N: one proposal set for every run
    assert len(proposals) == 1
    task = proposals[0]
    assert task.argv[:4] == ("py", "-m", "experiments.cli", "propose")
    assert ["--corpus", "ptb-sample", "--split", "test", "-n", "7"] == list(task.argv[5:11])
    assert task.needs[0].name == "best.ckpt" and not task.ready()

    evals = planner.eval_tasks()
    by = {(t.argv[4], Path(t.argv[5]).parent.parent.name): t for t in evals}
    tg_run = next(r for r in runs if r.model == "tg").run_id
    term_run = next(r for r in runs if r.model == "txl-terminals").run_id
    doc_run = next(r for r in runs if r.model == "tg-doc").run_id
    assert len([t for t in evals if t.argv[4] == "ppl"]) == 9  # every LM run, both levels
    assert len([t for t in evals if t.argv[4] == "rerank"]) == 3  # sentence-level joint models only
    ppl_tg = by[("ppl", tg_run)].argv
    assert ppl_tg[ppl_tg.index("--method") + 1] == "proposals" and ppl_tg[ppl_tg.index("--proposals") + 1] == str(
        task.done)
    assert by[("ppl", term_run)].argv[-2:] == ("--method", "exact")
    rerank = by[("rerank", tg_run)].argv
    assert rerank[rerank.index("--gold") + 1] == "ptb-sample/test" and "--logq" in rerank
    assert ("terminals", term_run) not in by and ("terminals", doc_run) in by
    assert by[("terminals", tg_run)].done == by[("terminals", tg_run)].folder / "results.json"


def test_a_beam_entry_with_proposals_scores_the_union_where_the_family_pools_them(tmp_path):
    spec = _spec(tmp_path, [{"name": "ppl", "split": "test", "method": "beam", "beam": 12, "word_beam": 4,
                             "proposals": "parser", "n": 7, "models": ["tg", "txl-terminals"]}])
    runs = experiment_runs(spec)
    planner = Planner(spec, runs, tmp_path / "runs", python="py")
    proposals = planner.proposal_tasks()
    assert len(proposals) == 1  # the union reads the proposal set like the proposals method does
    by = {Path(t.argv[5]).parent.parent.name: t for t in planner.eval_tasks()}
    tg = by[next(r for r in runs if r.model == "tg").run_id]
    argv = list(tg.argv)
    assert argv[argv.index("--method") + 1] == "beam"
    assert argv[argv.index("--proposals") + 1] == str(proposals[0].done) and argv[argv.index("-n") + 1] == "7"
    assert argv[argv.index("--beam") + 1] == "12" and argv[argv.index("--word-beam") + 1] == "4"
    assert proposals[0].done in tg.needs
    terminals = by[next(r for r in runs if r.model == "txl-terminals").run_id]
    assert terminals.argv[-2:] == ("--method", "exact") and "--proposals" not in terminals.argv


def test_rerank_skips_document_level_and_string_models(tmp_path):
    spec = _spec(tmp_path, [{"name": "rerank", "proposals": "parser", "n": 3}])
    runs = experiment_runs(spec)
    planner = Planner(spec, runs, tmp_path / "runs")
    evaluated = {Path(t.argv[5]).parent.parent.name for t in planner.eval_tasks()}
    assert evaluated == {r.run_id for r in runs if r.model == "tg"}


def test_suite_sentence_sets(tmp_path, prepared_data_dir):
    spec = _spec(tmp_path, [{"name": "sg", "proposals": "parser", "n": 3, "items_per_suite": 1},
                            {"name": "blimp", "proposals": "parser", "n": 3, "pairs_per_paradigm": 1}])
    planner = Planner(spec, experiment_runs(spec), tmp_path / "runs", data_dir=str(prepared_data_dir))
    files = planner.sentence_files()
    sizes = sorted(len(v) for v in files.values())
    assert sizes[1] == 2 * 67  # one good and one bad sentence per BLiMP paradigm
    assert sizes[0] > 34  # every condition of one item of each of the 34 suites
    sg = next(t for t in planner.eval_tasks() if t.argv[4] == "sg")
    assert sg.argv[sg.argv.index("--items-per-suite") + 1] == "1"
    assert all("--data-dir" in t.argv for t in planner.proposal_tasks())


@pytest.mark.parametrize("entry,message", [
    ({"name": "perplexity"}, "unknown task"),
    ({"name": "ppl", "nn": 3}, "not an option of the ppl task"),
    ({"name": "sg", "limit": 3}, "not an option of the sg task"),
    ({"name": "uas"}, "cannot run in an experiment"),
    ({"name": "ppl", "n": 0}, "positive integer"),
    ({"name": "ppl", "models": ["nope"]}, "no model 'nope'"),
    ({"name": "ppl", "proposals": "tg"}, "not a proposal parser"),
    ({"name": "sg", "method": "gold"}, "expected proposals or beam for the sg task"),
    ({"name": "ppl", "method": "proposals"}, "needs 'proposals"),
    ({"name": "rerank"}, "rerank needs"),
])
def test_bad_entries_name_the_spec_line(tmp_path, entry, message):
    spec = _spec(tmp_path, [entry])
    with pytest.raises(InputError, match=message) as e:
        evaluations(spec)
    assert str(tmp_path / "exp.yaml") in e.value.location


def test_shipped_reproduction_specs_plan(tmp_path):
    for scale in ("demo", "cpu-small", "paper"):
        spec = load_spec(f"reproduce-tg-{scale}")
        planner = Planner(spec, experiment_runs(spec), tmp_path)
        assert planner.eval_tasks() and planner.proposal_tasks()


def test_the_palm_reproductions_plan_parsing_for_parsers_and_keep_untrained_models(tmp_path):
    for scale in ("demo", "cpu-small", "paper"):
        spec = load_spec(f"reproduce-palm-{scale}")
        runs = experiment_runs(spec)
        tasks = Planner(spec, runs, tmp_path, python="py").eval_tasks()
        by_model: dict[str, set] = {}
        for task in tasks:
            run = next(r for r in runs if r.run_id == Path(task.argv[5]).parent.parent.name)
            by_model.setdefault(run.model, set()).add(task.argv[4])
        finetuned = {"awd-lstm-finetuned": {"ppl"}} if scale == "paper" else {}  # Table 1's AWD-LSTM row
        assert by_model == {"awd-lstm": {"ppl"}, **finetuned, "palm-u": {"ppl", "unsupervised-f1"},
                            "palm-s": {"ppl", "unsupervised-f1"}, "palm-rb": {"ppl", "unsupervised-f1"},
                            "palm-u-init": {"unsupervised-f1"}}
        untrained = [r for r in runs if r.model == "palm-u-init"]
        assert all(r.config["train"]["max_steps"] == 0 and r.family == "palm-u" for r in untrained)
        assert len({r.seed for r in untrained}) == {"demo": 2, "cpu-small": 6, "paper": 25}[scale]


def test_pushdown_runs_on_text_use_their_beam_and_base_lm_is_exact(tmp_path):
    spec = load_spec("pushdown-ptb-cpu")
    runs = experiment_runs(spec)
    tasks = Planner(spec, runs, tmp_path, python="py").eval_tasks()
    by_family: dict[str, set] = {}
    for task in tasks:
        run = next(r for r in runs if r.run_id == Path(task.argv[5]).parent.parent.name)
        by_family.setdefault(run.family, set()).add(task.argv[4])
        if run.family == "pushdown":  # parse too: the beam is the family's method
            assert task.argv[-4:] == ("--method", "beam", "--beam", "8")
        if run.family == "base-lm":
            assert task.argv[-2:] == ("--method", "exact")
    assert by_family["pushdown"] == {"ppl", "sg", "blimp", "parse"}
    assert by_family["base-lm"] == {"ppl", "sg", "blimp"}
    tg = [t.argv for t in tasks if "/tg-" in t.argv[5]]
    union = [a for a in tg if "--proposals" in a]  # TG: the union of its beam's trees and the proposals
    assert len(union) == 3 * 3 and all(a[a.index("--method") + 1] == "beam" for a in union)
    gold = [a for a in tg if a[4] == "ppl" and "@gold" in a[a.index("--out") + 1]]
    assert len(gold) == 3 and all(a[a.index("--method") + 1] == "gold" for a in gold)


def test_the_pushdown_table2_spec_plans_and_the_cpu_spec_lists_its_reductions(tmp_path):
    from experiments.reductions import reduced_settings

    full = load_spec("pushdown-table2")
    runs = experiment_runs(full)
    assert {r.config["data"]["corpus"] for r in runs} == {"bllip-lg"} and len(runs) == 10
    assert all(r.config["data"]["terminals"] == "sentencepiece" for r in runs)
    tasks = Planner(full, runs, tmp_path, python="py").eval_tasks()
    assert sorted(t.argv[4] for t in tasks) == sorted(["ppl", "sg", "blimp"] * 10 + ["parse"] * 5)
    assert all(t.argv[t.argv.index("--beam") + 1] == "300" for t in tasks if "--beam" in t.argv)
    lines = reduced_settings(load_spec("pushdown-ptb-cpu"))
    assert any(line.startswith("evaluation parse: ") and "beam 8 (full protocol: 300)" in line for line in lines)
    assert any(line.startswith("pushdown: ") and "model.n_layers" in line for line in lines)


def test_cli_evaluate_without_finished_runs_and_with_a_bad_entry(tmp_path, capsys):
    from experiments.cli import main

    spec = _spec(tmp_path, [{"name": "ppl", "proposals": "parser", "n": 3}])
    assert main(["evaluate", str(spec.path), "--runs-dir", str(tmp_path / "runs")]) == 0
    err = capsys.readouterr().err
    assert "[proposals] 0/0 done" in err and "[evaluate] 0/0 done" in err  # nothing trained yet: nothing to do
    bad = _spec(tmp_path, [{"name": "ppl", "n": "many"}])
    assert main(["evaluate", str(bad.path), "--runs-dir", str(tmp_path / "runs")]) == 2
    line = capsys.readouterr().err.strip()
    assert line.startswith(f"synbench: error: {bad.path}:") and "evaluations[0].n" in line


def test_labelled_entries_run_a_task_on_several_corpora(tmp_path):
    spec = _spec(tmp_path, [{"name": "ppl", "split": "test"},
                            {"name": "ppl", "corpus": "ud-gum", "split": "test", "label": "gum"},
                            {"name": "parse", "corpus": "ud-pud", "label": "pud"}],
                 models=[{"name": "som", "family": "som", "preset": "cpu-small"}])
    evals = Planner(spec, experiment_runs(spec), tmp_path / "runs", python="py").eval_tasks()
    by = {t.folder.name: t.argv for t in evals}
    assert sorted(by) == ["parse@pud", "ppl", "ppl@gum"]
    assert by["ppl@gum"][by["ppl@gum"].index("--corpus") + 1] == "ud-gum"
    assert by["ppl"][by["ppl"].index("--corpus") + 1] == "ud-ewt"  # the run's own corpus
    assert by["parse@pud"][by["parse@pud"].index("--gold") + 1] == "ud-pud/test"
    assert by["ppl@gum"][by["ppl@gum"].index("--out") + 1].endswith("eval/ppl@gum")


@pytest.mark.parametrize("entries, message", [
    ([{"name": "ppl"}, {"name": "ppl", "corpus": "ud-gum"}], "a second ppl entry for the same models"),
    ([{"name": "ppl", "label": "x"}, {"name": "ppl", "label": "x"}], "a second ppl entry labelled 'x'"),
    ([{"name": "ppl", "label": "a/b"}], "label: expected a name"),
])
def test_entries_of_one_task_need_their_own_labels(tmp_path, entries, message):
    with pytest.raises(InputError, match=message):
        evaluations(_spec(tmp_path, entries))
