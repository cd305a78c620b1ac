"""``synbench eval dyck``: next-token distributions of Dyck prefixes, closing-bracket accuracy, item cache."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch

from experiments.cli import main
from experiments.config import resolve_train_config
from experiments.families.pushdown.scorers import BeamScorer, ExactScorer, PushdownModel
from experiments.train import train
from lightning_modules.families.pushdown import dyck_data
from lightning_modules.families.pushdown.batch import PushdownSentence, collate
from lightning_modules.families.pushdown.model import build

TINY = ["model.d_model=32", "model.n_layers=2", "model.n_heads=2", "model.d_ff=64", "model.attachment_depth_dim=8",
        "model.warmup_steps=2", "model.total_steps=20", "model.peak_lr=3e-3", "train.batch_size=4",
        "train.accumulate=1", "train.eval_batch_size=8", "train.log_every=1", "runtime.wandb=disabled",
        "runtime.progress=false", "runtime.threads=1", "train.max_steps=2", "train.val_every=2",
        "train.ckpt_every=2", "data.train_strings=16", "data.valid_strings=4", "data.max_length=30"]


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory):
    """Two-step Pushdown-LM and Base-LM (+ attachment loss) runs on tiny Dyck data."""
    root = tmp_path_factory.mktemp("dyck-runs")
    out = {}
    for family in ("pushdown", "base-lm"):
        train(resolve_train_config(family, "dyck", TINY), seed=1, run_dir=root / family)
        out[family] = root / family / "checkpoints" / "best.ckpt"
    return out


def _json(capsys) -> tuple[dict, str]:
    captured = capsys.readouterr()
    return json.loads(captured.out), captured.err


def test_base_lm_on_every_set_and_the_rerun_reads_the_cache(capsys, checkpoints, tmp_path):
    argv = ["eval", "dyck", str(checkpoints["base-lm"]), "--size", "1", "--out", str(tmp_path / "ev"), "--json"]
    assert main(argv) == 0
    result, err = _json(capsys)
    accuracy = result["metrics"]["accuracy"]
    assert set(accuracy) == set(dyck_data.TEST_SETS) and all(0.0 <= a <= 1.0 for a in accuracy.values())
    assert result["metrics"]["prefixes"]["depth"] == 35  # one round of depths 15..49
    assert "exact" in result["convention"] and "beam" not in result["settings"]
    total = result["settings"]["prefixes"]
    assert f"computed {total} of {total} items" in err
    items = [json.loads(line) for line in (tmp_path / "ev" / "items.jsonl").read_text().splitlines()]
    assert len(items) == total and all(len(r["closing_logprobs"]) == 20 for r in items)
    by_set = {name: [r["correct"] for r in items if r["set"] == name] for name in accuracy}
    assert all(math.isclose(accuracy[name], sum(c) / len(c)) for name, c in by_set.items())
    saved = json.loads((tmp_path / "ev" / "results.json").read_text())
    assert saved["task"] == "dyck" and saved["metrics"]["accuracy"] == accuracy

    assert main(argv) == 0
    again, err = _json(capsys)
    assert again["metrics"] == result["metrics"] and f"computed 0 of {total} items" in err


def test_pushdown_beam_marginal_on_the_depth_set(capsys, checkpoints, tmp_path):
    argv = ["eval", "dyck", str(checkpoints["pushdown"]), "--set", "depth", "--size", "1", "--beam", "2", "--json"]
    assert main(argv) == 0
    result, _ = _json(capsys)
    assert 0.0 <= result["metrics"]["accuracy"]["depth"] <= 1.0
    assert result["settings"]["beam"] == 2 and "marginal" in result["convention"]
    assert "/eval/dyck-" in result["out"]  # RUN/eval/dyck-HASH by default


def test_a_perfect_predictor_scores_one_through_the_cache(capsys, checkpoints, tmp_path):
    """Items already in the cache are not recomputed: a cache of perfect predictions reads back as 1.0."""
    out = tmp_path / "ev"
    argv = ["eval", "dyck", str(checkpoints["base-lm"]), "--set", "long-100", "--size", "2", "--out", str(out),
            "--json"]
    assert main(argv) == 0
    first, _ = _json(capsys)
    names = [f"{n})" for n in dyck_data.dyck.bracket_types(20)]
    items = [json.loads(line) for line in (out / "items.jsonl").read_text().splitlines()]
    perfect = [{**r, "closing_logprobs": [0.0 if t == r["target"] else -5.0 for t in names]} for r in items]
    (out / "items.jsonl").write_text("".join(json.dumps(r) + "\n" for r in perfect))
    assert main(argv) == 0
    result, err = _json(capsys)
    assert result["metrics"]["accuracy"] == {"long-100": 1.0} and "computed 0 of" in err
    assert first["metrics"]["prefixes"] == result["metrics"]["prefixes"]


@pytest.mark.parametrize(("extra", "location"), [(["--set", "long-7"], "--set"), (["--size", "0"], "argument --size"),
                                                 (["--beam", "0"], "argument --beam"),
                                                 (["--seed", "-1"], "argument --seed")])
def test_bad_options_are_one_error_line(capsys, checkpoints, tmp_path, extra, location):
    assert main(["eval", "dyck", str(checkpoints["pushdown"]), *extra, "--out", str(tmp_path / "x")]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"synbench: error: {location}: ") and err.count("\n") == 1
    assert not (tmp_path / "x" / "results.json").exists()


def _dyck_model(family: str) -> PushdownModel:
    cfg = resolve_train_config(family, "dyck", TINY)
    tokens = dyck_data.vocabulary(20).tokens
    torch.manual_seed(3)
    module = build({**cfg["model"], "vocab_size": len(tokens), "dropout": 0.0, "attachment_dropout": 0.0},
                   family).eval()
    return PushdownModel(module, {"family": family, "config": cfg,
                                  "vocab": {"terminals": "dyck", "bracket_types": 20, "tokens": list(tokens)}})


def test_the_unpruned_beam_marginal_equals_the_training_path():
    """Prefix ``(a a)``: the second token shifts or attaches to the first; the marginal next-token distribution
    over both histories, from full training-path forwards, equals the beam's."""
    model = _dyck_model("pushdown")
    ids = [model.ids[t] for t in ("<s>", "(a", "a)", "<eos>")]
    joints, dists = [], []
    for label, spans in ((2, np.zeros((0, 2), dtype=np.int64)), (1, np.array([[1, 2]]))):
        sentence = PushdownSentence(np.array(ids), np.array([0, 1, label, 0]), spans, 2)
        batch = collate([sentence])
        with torch.no_grad():
            words, attach = model.module(batch)
        words, attach = words[0].double().log_softmax(-1), attach[0].double().log_softmax(-1)
        joint = sum(float(words[t, ids[t + 1]] + attach[t, int(batch.attachment[0, t])]) for t in range(2))
        joints.append(joint)
        dists.append(words[2])
    joints_t = torch.tensor(joints, dtype=torch.float64)
    expected = torch.logsumexp(joints_t[:, None] + torch.stack(dists), dim=0) - torch.logsumexp(joints_t, dim=0)
    got = BeamScorer(model, beam=10).next_token_logprobs([["(a", "a)"]])[0]
    assert np.allclose(got, expected.numpy(), atol=1e-6)
    assert math.isclose(float(torch.logsumexp(torch.from_numpy(got), 0)), 0.0, abs_tol=1e-6)  # float32 log-softmax
    # beam 1 keeps the best history only: its own distribution
    best = int(np.argmax(joints))
    assert np.allclose(BeamScorer(model, beam=1).next_token_logprobs([["(a", "a)"]])[0], dists[best].numpy(),
                       atol=1e-6)


def test_the_exact_base_lm_distribution_is_the_training_path():
    model = _dyck_model("base-lm")
    prefix = ["(a", "(b", "b)"]
    ids = [model.ids[t] for t in ("<s>", *prefix, "<eos>")]
    batch = collate([PushdownSentence(np.array(ids), np.array([0, 1, 2, 2, 0]), np.array([[2, 3]]), 3)])
    with torch.no_grad():
        words, _ = model.module(batch)
    got = ExactScorer(model).next_token_logprobs([prefix])[0]
    assert np.allclose(got, words[0, 3].double().log_softmax(-1).numpy(), atol=1e-6)


def test_the_silver_tape_is_the_training_path_of_the_gold_attachments():
    """``--tape silver``: the distribution a Pushdown-LM gives after a prefix read with its gold tape equals the
    training-path forward of that prefix (collated with its silver attachments)."""
    from experiments.families.pushdown.dyck import SilverTape
    from lightning_modules.families.pushdown import dyck

    model = _dyck_model("pushdown")
    prefix = ["(a", "(b", "b)", "(c"]
    example = dyck.encode_dyck(prefix)
    ids = [model.ids[t] for t in ("<s>", *prefix, "<eos>")]
    batch = collate([PushdownSentence(np.array(ids), example.attachment, example.spans, len(prefix))])
    with torch.no_grad():
        words, _ = model.module(batch)
    expected = words[0, len(prefix)].double().log_softmax(-1).numpy()
    assert np.allclose(SilverTape(model).score([prefix])[0][0], expected, atol=1e-6)


class _FixedLogits(torch.nn.Module):
    """Stands in for the network: fixed word and attachment logits, whatever the batch."""

    def __init__(self, words: torch.Tensor, attach: torch.Tensor):
        super().__init__()
        self.words, self.attach = words, attach

    def forward(self, batch):
        return self.words, self.attach


def test_silver_tape_counts_the_heads_wrong_legal_attachments():
    from experiments.families.pushdown.dyck import SilverTape, attachment_diagnostics
    from lightning_modules.families.pushdown import dyck

    model = _dyck_model("pushdown")
    prefix = ["(a", "(b", "b)", "(c", "c)"]
    gold = dyck.encode_dyck(prefix).attachment  # [0, 1, 2, 2, 4, 4]: shift, shift, close (b, shift, close (c
    attach = torch.full((1, 6, 7), -5.0)
    for k in range(1, 6):
        attach[0, k - 1, gold[k]] = 1.0
    attach[0, 2, 1] = 3.0  # token 3 (b)) preferred to reduce down to (a: legal, so an error
    attach[0, 4, 2] = 3.0  # token 5 (c)) preferred to attach to (b, inside the closed (b b): illegal, not counted
    model.module = _FixedLogits(torch.zeros(1, 6, len(model.tokens)), attach)
    (_, wrong), = SilverTape(model).score([prefix])
    assert wrong == [3]
    records = [{"set": "s", "prefix_length": 5, "attachment_errors": wrong},
               {"set": "s", "prefix_length": 4, "attachment_errors": []}]
    assert attachment_diagnostics(records, ["s"], trained_length=3) == {
        "s": {"accuracy": 1 - 1 / 9, "accuracy_beyond_training_length": 1.0, "prefixes_without_error": 0.5}}


def test_silver_tape_option(capsys, checkpoints, tmp_path):
    argv = ["eval", "dyck", str(checkpoints["pushdown"]), "--set", "long-50", "--size", "1", "--tape", "silver",
            "--json", "--out", str(tmp_path / "silver")]
    assert main(argv) == 0
    result, _ = _json(capsys)
    assert result["settings"]["tape"] == "silver" and "silver tape" in result["convention"]
    diagnostics = result["metrics"]["attachments"]["long-50"]
    assert 0.0 <= diagnostics["accuracy"] <= 1.0 and 0.0 <= diagnostics["prefixes_without_error"] <= 1.0
    assert main(["eval", "dyck", str(checkpoints["base-lm"]), "--tape", "silver", "--size", "1"]) == 2
    assert capsys.readouterr().err.startswith("synbench: error: --tape:")
