"""Seed-stacked scoring (``experiments.evaluate.scorers.stacked``): the seeds of an eval group score shared inputs
in one vmapped forward, each seed's results those of its solo eval up to float rounding; a stack of checkpoints
of different configs scores solo."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import yaml

from experiments.eval_group import member_stacks
from experiments.evaluate.scorers import stacked
from tests.experiments.conftest import write_tiny_spec
from tests.tolerances import FLOAT32_RTOL

RTOL = FLOAT32_RTOL  # vmapped products may round differently from the solo ones (observed on the CPU: ~1e-7)


@pytest.fixture(scope="module")
def experiment(tmp_path_factory, tiny_treebank):
    """Two seeds each of a tiny TG (scored on gold trees) and TXL (terminals) (exact), trained 2 steps, with one
    ``ppl`` entry."""
    from experiments.experiment_runs import experiment_runs, folder_of
    from experiments.experiment_spec import load_spec
    from experiments.train import train

    tmp = tmp_path_factory.mktemp("stacked")
    spec_path = write_tiny_spec(tmp / "exp.yaml", tiny_treebank, families=("tg", "txl-terminals"), seeds="0-1",
                                steps=2)
    spec = yaml.safe_load(spec_path.read_text())
    spec["evaluations"] = [{"name": "ppl", "split": "file", "limit": 6, "method": "gold"}]
    spec_path.write_text(yaml.safe_dump(spec))
    root = tmp / "runs"
    runs = experiment_runs(load_spec(spec_path))
    for run in runs:
        train(run.config, run.seed, folder_of(root, run))
    return spec_path, root, tmp


def solo(task, folder: Path) -> dict:
    """The task's eval run alone (no group) into ``folder``: its results.json."""
    from experiments.cli import main

    argv = list(task.argv[3:])
    argv[argv.index("--out") + 1] = str(folder)
    assert main(argv) == 0
    return json.loads((folder / "results.json").read_text())


def close(stacked_result: dict, solo_result: dict) -> None:
    """Same metrics up to RTOL, the same items' log-probs up to RTOL; settings equal but ``stacked_scoring``."""
    for name, value in solo_result["metrics"].items():
        if isinstance(value, float):
            assert stacked_result["metrics"][name] == pytest.approx(value, rel=RTOL), name
        elif name != "headline":
            assert stacked_result["metrics"][name] == value, name
    assert stacked_result["settings"] == {**solo_result["settings"], "stacked_scoring": True}
    assert solo_result["settings"]["stacked_scoring"] is False


def test_stacked_group_equals_solo_with_one_forward_per_batch(experiment, capsys):
    from experiments.cli import main
    from experiments.eval_group import cli, eval_cells, group_tasks
    from experiments.evaluation_plan import Planner
    from experiments.experiment_runs import experiment_runs
    from experiments.experiment_spec import load_spec

    spec_path, root, tmp = experiment
    spec = load_spec(spec_path)
    planner = Planner(spec, experiment_runs(spec), root)
    groups = group_tasks(eval_cells(planner), 2, tmp / "exp", sys.executable, "on")
    command = ("-m", "experiments.eval_group", "--stacked-scoring", "on")
    assert [g.argv[1:3] + g.argv[4:] for g in groups] == [command] * 2
    for group, family in zip(groups, ("tg", "txl-terminals"), strict=True):  # gold trees, then exact
        before = dict(stacked.stats)
        assert cli(group.argv[3:]) == 0  # the group task's command, in this process
        forwards = stacked.stats["forwards"] - before["forwards"]
        # one batch per seed (6 sentences, batch size 32): one stacked forward, whose result seed 1 is served
        assert forwards == 1 and stacked.stats["served"] - before["served"] == forwards, family
    for task in planner.eval_tasks():
        close(json.loads(task.done.read_text()), solo(task, tmp / "solo" / task.key))
    capsys.readouterr()
    # the setting on the command line: everything is done, nothing runs again
    assert main(["evaluate", str(spec_path), "--runs-dir", str(root), "--seeds-per-process", "2",
                 "--stacked-scoring", "on"]) == 0
    assert "[evaluate] 4/4 done" in capsys.readouterr().err


def test_stack_of_different_configs_scores_solo(experiment):
    from experiments.cli import main
    from experiments.evaluation_plan import Planner
    from experiments.experiment_runs import experiment_runs
    from experiments.experiment_spec import load_spec

    spec_path, root, tmp = experiment
    spec = load_spec(spec_path)
    tg, _, terminals, _ = Planner(spec, experiment_runs(spec), root).eval_tasks()
    argvs = [list(tg.argv[3:]), list(tg.argv[3:])]
    argvs[1][2] = terminals.argv[5]  # a TXL (terminals) checkpoint in the TG seed's stack
    stacks = stacked.GroupStacks(member_stacks(argvs), "on")
    assert stacks.stacks[0] == stacks.stacks[1] is not None
    out = tmp / "mixed"
    argvs[0][argvs[0].index("--out") + 1] = str(out)
    before = dict(stacked.stats)
    with stacks.member(0):
        assert main(argvs[0]) == 0
    assert stacked.stats == before
    mixed = json.loads((out / "results.json").read_text())
    alone = solo(tg, tmp / "solo-tg")
    assert mixed["settings"]["stacked_scoring"] is False
    assert mixed["metrics"] == alone["metrics"]


def test_member_stacks_are_one_entry_of_the_seeds_scoring_given_inputs():
    def argv(checkpoint: str, method: str, *options: str) -> list[str]:
        return ["eval", "ppl", checkpoint, "--out", f"{checkpoint}.out", "--method", method, *options]

    def rerank(checkpoint: str) -> list[str]:  # a task that takes no --method: its one method, proposals
        return ["eval", "rerank", checkpoint, "--out", f"{checkpoint}.rerank", "--proposals", "p", "-n", "3"]

    members = [argv("a", "gold"), argv("a", "beam"), rerank("a"), argv("b", "gold"), argv("b", "beam"), rerank("b"),
               argv("c", "gold", "-n", "2"), argv("a", "exact"), ["eval", "ppl", "a", "--out", "x"]]
    pair = (str(Path("a").resolve()), str(Path("b").resolve()))
    assert member_stacks(members) == [pair, None, pair, pair, None, pair, None, None, None]
    assert stacked.GroupStacks(member_stacks(members), "off").stacks == [None] * len(members)


def test_flex_attention_config_is_stacked_on_the_dense_path(experiment, tiny_treebank):
    import dataclasses

    import numpy as np
    import torch

    from experiments.evaluation_plan import Planner
    from experiments.experiment_runs import experiment_runs
    from experiments.experiment_spec import load_spec
    from experiments.families import get_family
    from experiments.families.tg.scorers import TGModel
    from lightning_modules.data.tree import read_bracketed

    spec_path, root, _ = experiment
    spec = load_spec(spec_path)
    tasks = Planner(spec, experiment_runs(spec), root).eval_tasks()[:2]  # the TG seeds
    models = [TGModel.load_solo(task.argv[5]) for task in tasks]
    for model in models:  # FlexAttention: no vmap rule (its eager forward runs on the CPU without gradients)
        model.module.config = dataclasses.replace(model.module.config, attention="flex")
    trees = [t for _, t in read_bracketed(tiny_treebank)][:2]
    examples = [models[0].encode_tree(models[0].model_tree(t, True, "test")) for t in trees]
    scorer = stacked.StackedScorer(get_family(models[0].family).seed_stack([m.module for m in models]), 2)
    with torch.no_grad():
        together = [scorer.label_logprobs(s, examples, lambda s=s: models[s].chunks(examples)) for s in range(2)]
    for model, rows in zip(models, together, strict=True):
        for row, alone in zip(rows, model.label_logprobs(examples), strict=True):
            np.testing.assert_allclose(row, alone, rtol=RTOL, atol=1e-6)


def test_a_bf16_group_scores_each_seed_solo_within_the_stated_bound(experiment):
    """``--inference-dtype bfloat16`` members are not stacked (autocast does not reach the attention kernel under
    ``vmap``): no stacked forward, ``stacked_scoring`` false, ``inference_dtype`` recorded, and each seed's
    log-probability is its float32 one within the stated per-word bound."""

    from experiments.eval_group import cli, eval_cells, group_tasks
    from experiments.evaluate.inference_dtype import MEASURED_NATS_PER_WORD
    from experiments.evaluation_plan import Planner
    from experiments.experiment_runs import experiment_runs
    from experiments.experiment_spec import load_spec

    spec_path, root, tmp = experiment
    spec = load_spec(spec_path)
    fp32 = {t.key: solo(t, tmp / "solo-fp32" / t.key) for t in Planner(spec, experiment_runs(spec), root).eval_tasks()}
    planner = Planner(spec, experiment_runs(spec), root, inference_dtype="bfloat16")
    assert member_stacks([list(t.argv[3:]) for t in planner.eval_tasks()]) == [None] * 4
    before = dict(stacked.stats)
    for group in group_tasks(eval_cells(planner), 2, tmp / "exp-bf16", sys.executable, "on"):
        assert cli(group.argv[3:]) == 0
    assert stacked.stats == before
    for task in planner.eval_tasks():
        result = json.loads(task.done.read_text())
        assert result["settings"]["inference_dtype"] == "bfloat16" and not result["settings"]["stacked_scoring"]
        metrics, reference = result["metrics"], fp32[task.key]["metrics"]
        gap = abs(metrics["logprob"] - reference["logprob"]) / metrics["words"]  # nats per word of the split
        assert 0 < gap <= MEASURED_NATS_PER_WORD, task.key
