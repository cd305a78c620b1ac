"""The ``evaluations:`` of a spec as commands: validation, shared proposal sets, per-run eval commands."""

import json
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
    ({"name": "pairs"}, r"evaluations\[0\]\.file: required"),
    ({"name": "pairs", "file": "no-such.jsonl"}, "file: no such file 'no-such.jsonl'"),
    ({"name": "sg", "suites": "no/such/folder"}, "suites: no folder 'no/such/folder'"),
    ({"name": "marvin-linzen", "pairs_per_construction": 0}, "positive integer"),
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


def _pairs_file(path: Path, pairs: list[tuple[str, str]]) -> Path:
    path.write_text("".join(json.dumps({"sentence_good": g, "sentence_bad": b, "UID": "u"}) + "\n" for g, b in pairs))
    return path


def test_data_file_entries_are_planned_with_their_sha256_and_their_sentences(tmp_path, prepared_data_dir):
    """A pairs file and a folder of suites name their absolute path and sha256 in the command (a changed file is
    a changed command) and in the proposal set's name; joint models get proposals for their sentences."""
    from lightning_modules.data.checksums import file_sha256

    pairs = _pairs_file(tmp_path / "p.jsonl", [("the dog barks .", "the dog bark .")])
    folder = tmp_path / "suites"
    folder.mkdir()
    staged = prepared_data_dir / "syntaxgym_hu2020" / "json" / "number_src.json"
    (folder / "number_src.json").write_text(staged.read_text())
    entries = [{"name": "pairs", "file": str(pairs), "proposals": "parser", "n": 3, "group_by": ["UID"]},
               {"name": "sg", "suites": str(folder), "items_per_suite": 1, "proposals": "parser", "n": 3},
               {"name": "marvin-linzen", "pairs_per_construction": 1, "constructions": ["simple_npi"],
                "proposals": "parser", "n": 3}]
    spec = _spec(tmp_path, entries, models=MODELS[:2] + MODELS[3:])

    def plan() -> tuple[dict[str, tuple[str, ...]], dict[Path, list[list[str]]]]:
        planner = Planner(spec, experiment_runs(spec), tmp_path / "runs", data_dir=str(prepared_data_dir))
        tg = next(r for r in planner.runs if r.model == "tg").run_id
        return ({t.argv[4]: t.argv for t in planner.eval_tasks() if tg in str(t.folder)}, planner.sentence_files())

    argv, files = plan()
    pair_args = " ".join(argv["pairs"])
    assert f"--file {pairs.resolve()} --sha256 {file_sha256(pairs)} --group-by UID" in pair_args
    assert "--method proposals" in pair_args
    assert f"--suites {folder.resolve()} --suites-sha256 {file_sha256(folder)}" in " ".join(argv["sg"])
    by_set = {path.name.split("-")[0]: words for path, words in files.items()}
    assert by_set["pairs"] == [["the", "dog", "barks", "."], ["the", "dog", "bark", "."]]
    assert len(by_set["marvin"]) == 3  # one NPI triple: its three sentences once each
    assert len(by_set["sg"]) == 4  # the four conditions of the folder's one suite's first item
    _pairs_file(pairs, [("the dog barks .", "the dog bark ."), ("dogs bark .", "dogs barks .")])
    again, files_again = plan()
    assert again["pairs"] != argv["pairs"] and again["sg"] == argv["sg"]  # a changed file is a new command
    assert {p.name for p in files_again} - {p.name for p in files} == {
        next(p.name for p in files_again if p.name.startswith("pairs-"))}  # and a new proposal set


def test_tasks_from_files_run_from_a_spec_and_a_rerun_is_served_from_the_cache(tmp_path, tiny_treebank,
                                                                                prepared_data_dir):
    """The spec's entries of a pairs file, a suites folder and Marvin & Linzen, planned and run as the evaluate
    stage runs them (``eval_group``): done once, not run again, and the changed pairs file alone run again."""
    from experiments.eval_group import run_group
    from experiments.experiment_runs import folder_of
    from experiments.train import train
    from tests.experiments.conftest import TINY_MODEL

    pairs = _pairs_file(tmp_path / "p.jsonl", [("the dog barks .", "the dog bark ."), ("a cat sits .", "a cat sit .")])
    folder = tmp_path / "suites"
    folder.mkdir()
    suite = json.loads((prepared_data_dir / "syntaxgym_hu2020" / "json" / "number_src.json").read_text())
    suite["meta"]["name"], suite["items"] = "mine", suite["items"][:1]
    (folder / "mine.json").write_text(json.dumps(suite))
    overrides = {"model": TINY_MODEL, "train": {"max_steps": 4, "val_every": 4, "ckpt_every": 4, "batch_size": 4},
                 "data": {"corpus": str(tiny_treebank), "train_split": "file", "valid_split": "file", "min_count": 1},
                 "runtime": {"wandb": "disabled", "progress": False, "threads": 1}}
    spec = _spec(tmp_path, [{"name": "pairs", "file": str(pairs)},
                            {"name": "sg", "suites": str(folder), "label": "mine"},
                            {"name": "marvin-linzen", "pairs_per_construction": 1,
                             "constructions": ["simple_agrmt", "simple_npi"]}],
                 models=[{"name": "lm", "family": "txl-terminals", "preset": "cpu-small", "seeds": 0,
                          "overrides": overrides}])
    [run] = experiment_runs(spec)
    root = tmp_path / "runs"
    train(run.config, seed=run.seed, run_dir=folder_of(root, run))

    def evaluate() -> list:
        tasks = Planner(spec, [run], root, data_dir=str(prepared_data_dir)).eval_tasks()
        listing = tmp_path / "group.json"
        listing.write_text(json.dumps([{"argv": list(t.argv), "done": str(t.done), "command": t.command,
                                        "label": t.label} for t in tasks]))
        todo = [t.folder.name for t in tasks if not t.is_done()]
        assert run_group(listing, "off") == 0 and all(t.is_done() for t in tasks)
        return todo

    assert evaluate() == ["pairs", "sg@mine", "marvin-linzen"]
    results = {name: json.loads((folder_of(root, run) / "eval" / name / "results.json").read_text())
               for name in ("pairs", "sg@mine", "marvin-linzen")}
    assert results["pairs"]["data"]["pairs"]["sha256"] == results["pairs"]["settings"]["file_sha256"]
    assert results["pairs"]["n_items"] == 2 and results["marvin-linzen"]["n_items"] == 1 + 2
    assert results["sg@mine"]["metrics"]["score_suite_set"] == "folder"
    assert evaluate() == []  # a rerun: every result served, nothing run

    _pairs_file(pairs, [("the dog barks .", "the dog bark .")])  # the file changes: its entry runs again
    assert evaluate() == ["pairs"]
    rerun = json.loads((folder_of(root, run) / "eval" / "pairs" / "results.json").read_text())
    assert rerun["n_items"] == 1 and rerun["settings"]["file_sha256"] != results["pairs"]["settings"]["file_sha256"]
