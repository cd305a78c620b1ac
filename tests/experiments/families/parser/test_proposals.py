"""The proposal-parser family end to end: config presets, training, `synbench propose`, the proposals file."""

import json

import pytest

from experiments.cli import main
from experiments.config import resolve_train_config
from experiments.evaluate.scorers.tree_files import ProposalFile
from experiments.train import train
from lightning_modules.data.tree import clean, drop_pos_tags, parse_tree, read_bracketed, to_bracketed

TINY = ["model.d_model=32", "model.n_encoder_layers=1", "model.n_decoder_layers=1", "model.n_heads=2",
        "model.d_ff=64", "model.warmup_steps=2", "model.total_steps=20", "model.max_depth=12",
        "train.batch_size=8", "train.eval_batch_size=16", "train.max_steps=6", "train.val_every=6",
        "train.ckpt_every=6", "runtime.wandb=disabled", "runtime.progress=false", "runtime.threads=1"]


@pytest.mark.parametrize("preset", ["cpu-small", "ptb", "bllip"])
def test_presets_resolve(preset):
    cfg = resolve_train_config("proposal-parser", preset, ["model.d_model=64"])
    assert cfg["family"] == "proposal-parser" and cfg["model"]["d_model"] == 64
    assert {"data", "train", "runtime"} <= set(cfg)


@pytest.fixture(scope="module")
def parser_run(tmp_path_factory, shared_data):
    trees = [t for f in ("wsj_0001.mrg", "wsj_0002.mrg", "wsj_0003.mrg")
             for _, t in read_bracketed(shared_data / "ptb_nltk_sample" / "combined" / f)]
    trees = [t for t in trees if len(clean(t).leaves()) <= 25][:24]
    root = tmp_path_factory.mktemp("parser")
    treebank = root / "small.mrg"
    treebank.write_text("".join(to_bracketed(t) + "\n" for t in trees))
    cfg = resolve_train_config("proposal-parser", "cpu-small", TINY + [
        f"data.corpus={treebank}", "data.train_split=file", "data.valid_split=file", "data.min_count=1"])
    metrics = train(cfg, seed=0, run_dir=root / "run")
    return root, treebank, metrics


def test_training_reports_accuracy_and_greedy_f1(parser_run):
    _, _, metrics = parser_run
    assert metrics["global_step"] == 6 and metrics["family"] == "proposal-parser"
    assert 0 <= metrics["val_action_accuracy"] <= 1 and metrics["val_actions"] > 0
    assert metrics["val_greedy_f1"] is None or 0 <= metrics["val_greedy_f1"] <= 100


def test_propose_writes_distinct_tagged_trees_the_proposal_reader_accepts(parser_run, capsys):
    root, treebank, _ = parser_run
    out, logq = root / "proposals.jsonl", root / "logq.jsonl"
    ckpt = root / "run" / "checkpoints" / "best.ckpt"
    assert main(["propose", str(ckpt), "--corpus", str(treebank), "--split", "file", "-n", "5",
                 "--out", str(out), "--logq", str(logq)]) == 0
    gold = [clean(t) for _, t in read_bracketed(treebank)]
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    scores = [json.loads(line) for line in logq.read_text().splitlines()]
    assert [r["sentence"] for r in rows] == list(range(len(gold))) == [s["sentence"] for s in scores]
    for row, score, tree in zip(rows, scores, gold):
        trees = [parse_tree(t) for t in row["trees"]]
        assert len(trees) == 5 == len(set(trees)) == len(score["logq"])
        assert score["logq"] == sorted(score["logq"], reverse=True) and max(score["logq"]) <= 0
        assert all(t.pos() and [p for _, p in t.pos()] == [p for _, p in tree.pos()] for t in trees)
    reader = ProposalFile(out)  # the scorers' reader: words match the sentences, POS tags drop cleanly
    first = reader([tree.leaves() for tree in gold])[0]
    assert [drop_pos_tags(t).leaves() for t in first] == [gold[0].leaves()] * 5


def test_propose_from_sentences_with_beam(parser_run, tmp_path):
    root, _, _ = parser_run
    sentences = tmp_path / "sentences.txt"
    sentences.write_text("The cat sat on the mat .\nIt rained\n")
    out = tmp_path / "p.jsonl"
    assert main(["propose", str(root / "run" / "checkpoints" / "best.ckpt"), "--sentences", str(sentences),
                 "-n", "3", "--method", "beam", "--out", str(out)]) == 0
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(rows) == 2 and all(len(r["trees"]) == 3 for r in rows)
    assert {tag for t in rows[1]["trees"] for _, tag in parse_tree(t).pos()} == {"XX"}


def test_propose_without_n_takes_the_familys_n(parser_run, tmp_path):
    """-n left out: the proposing part's N (TG §3.1's 300), recorded in the meta file."""
    root, _, _ = parser_run
    sentences = tmp_path / "sentences.txt"
    sentences.write_text("It rained\n")
    out = tmp_path / "p.jsonl"
    assert main(["propose", str(root / "run" / "checkpoints" / "best.ckpt"), "--sentences", str(sentences),
                 "--method", "beam", "--out", str(out)]) == 0
    assert json.loads(out.with_suffix(".meta.json").read_text())["n"] == 300


def test_bad_input_is_one_error_line_and_nothing_written(parser_run, tmp_path, capsys):
    root, treebank, _ = parser_run
    ckpt = str(root / "run" / "checkpoints" / "best.ckpt")
    out = tmp_path / "p.jsonl"
    empty = tmp_path / "s.txt"
    empty.write_text("a b\n\nc\n")
    cases = [
        (["propose", ckpt, "--corpus", str(treebank), "--out", str(out)], "--split"),
        (["propose", ckpt, "--sentences", str(empty), "--out", str(out)], f"{empty}:2"),
        (["propose", ckpt, "--sentences", str(empty), "-n", "0", "--out", str(out)], "-n"),
        (["propose", str(tmp_path / "none.ckpt"), "--sentences", str(empty), "--out", str(out)], "not found"),
    ]
    for argv, where in cases:
        assert main(argv) == 2
        err = capsys.readouterr().err.strip()
        assert err.startswith("synbench: error:") and where in err and "\n" not in err
    assert not out.exists()


def test_propose_records_one_best_and_oracle_f1(parser_run, capsys):
    from experiments.evaluate.evalb import COLLINS, evaluate_lines
    from experiments.evaluate.rerank import line, oracle

    root, treebank, _ = parser_run
    out = root / "quality.jsonl"
    ckpt = root / "run" / "checkpoints" / "best.ckpt"
    assert main(["propose", str(ckpt), "--corpus", str(treebank), "--split", "file", "-n", "12",
                 "--out", str(out)]) == 0
    meta = json.loads((root / "quality.meta.json").read_text())
    gold = [clean(t) for _, t in read_bracketed(treebank)]
    assert (meta["n"], meta["method"], meta["sentences"]) == (12, "sample", len(gold))
    assert meta["source"] == {"corpus": str(treebank), "split": "file"}
    assert set(meta["oracle_f1"]) == {"1", "10", "12"}
    sets = [[parse_tree(t) for t in json.loads(row)["trees"]] for row in out.read_text().splitlines()]
    gold_lines = [line(t) for t in gold]
    first = evaluate_lines(gold_lines, [line(s[0]) for s in sets], COLLINS).as_dict()["all"]["bracket_f1"]
    assert meta["one_best_f1"] == first == meta["oracle_f1"]["1"]  # the first tree is the most probable
    best = evaluate_lines(gold_lines, [oracle(g, s) for g, s in zip(gold, sets)], COLLINS).as_dict()["all"]
    assert meta["oracle_f1"]["12"] == best["bracket_f1"]
    assert meta["one_best_f1"] <= meta["oracle_f1"]["10"] <= meta["oracle_f1"]["12"]
    assert "1-best F1" in capsys.readouterr().out
    raw = root / "raw.txt"
    raw.write_text(" ".join(gold[0].leaves()) + "\n")
    assert main(["propose", str(ckpt), "--sentences", str(raw), "-n", "2", "--out", str(root / "raw.jsonl")]) == 0
    meta = json.loads((root / "raw.meta.json").read_text())
    assert meta["sentences"] == 1 and "one_best_f1" not in meta and meta["source"] == {"sentences": str(raw)}
