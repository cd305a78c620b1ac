"""``eval terminals``: per-terminal log p(a_i | a_<i) on gold trees (TG §4.2's inputs).

References are computed independently: for TXL (terminals) from the exact scorer's word log-probs, for the
joint models by running the network on the *prefix* of the gold action sequence that ends at the terminal
(a causal model must give the same conditional as inside the whole sequence).
"""

import json
from collections import Counter

import numpy as np
import pytest

from experiments.cli import main
from experiments.evaluate import ppl
from experiments.families.tg import terminals as terminal_logprobs
from experiments.families.tg.scorers import ExactScorer, TGModel
from lightning_modules.data.encodings.choe_charniak import Actions, TokenType, choe_charniak
from lightning_modules.data.tree import clean, drop_pos_tags, read_bracketed, to_bracketed
from tests.tolerances import FLOAT32, close32

FILES = ("wsj_0001.mrg", "wsj_0002.mrg", "wsj_0003.mrg")


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory, shared_data):
    """Tiny checkpoints (2 training steps) on three PTB sample documents, sentence and document level."""
    from experiments.config import resolve_train_config
    from experiments.train import train

    root = tmp_path_factory.mktemp("terminals")
    trees = [t for f in FILES for _, t in read_bracketed(shared_data / "ptb_nltk_sample" / "combined" / f)]
    treebank = root / "tb.mrg"
    treebank.write_text("".join(to_bracketed(t) + "\n" for t in trees))
    tiny = ["model.d_model=32", "model.n_layers=2", "model.n_heads=2", "model.d_ff=64", "train.batch_size=2",
            "train.max_steps=2", "train.val_every=2", "train.ckpt_every=2", "runtime.wandb=disabled",
            "runtime.progress=false", "runtime.threads=1", f"data.corpus={treebank}", "data.train_split=file",
            "data.valid_split=file", "model.segment_length=32", "model.memory_length=32"]
    out = {}
    for name, family, level in (("tg", "tg", "sentence"), ("txl-trees", "txl-trees", "sentence"),
                                ("txl-terminals", "txl-terminals", "sentence"), ("tg-doc", "tg", "document")):
        train(resolve_train_config(family, "cpu-small", [*tiny, f"data.level={level}"]), seed=0,
              run_dir=root / name)
        out[name] = root / name / "checkpoints" / "best.ckpt"
    return out, treebank


def _sentences(treebank):
    return ppl.read_sentences(str(treebank), "file")


@pytest.mark.parametrize("name", ["tg", "txl-trees"])
def test_joint_terminals_equal_prefix_forward_passes(checkpoints, tmp_path, name):
    paths, treebank = checkpoints
    sentences = _sentences(treebank)
    result, computed = terminal_logprobs.evaluate(paths[name], sentences, tmp_path / "out")
    assert computed == len(sentences.words) and result["metrics"]["unit"] == "word"
    items = [json.loads(line) for line in (tmp_path / "out" / "items.jsonl").read_text().splitlines()]
    assert [w for it in items for w in it["word"]] == [w for ws in sentences.words for w in ws]

    model = TGModel.load(str(paths[name]))
    tree = drop_pos_tags(sentences.trees[1])
    actions = choe_charniak(tree, model.terminals)
    terminal_at = [j for j, t in enumerate(actions.types) if t == TokenType.T]
    for k in (0, 3, len(terminal_at) - 1):
        cut = terminal_at[k] + 1
        prefix = Actions(actions.tokens[:cut], actions.types[:cut], actions.word_index[:cut])
        example = model.encode(prefix)
        expected = model.label_logprobs([example])[0][len(example.tokens) - 2]
        assert items[1]["logprob"][k] == close32(expected)


def test_txl_terminals_equal_exact_word_logprobs(checkpoints, tmp_path):
    paths, treebank = checkpoints
    sentences = _sentences(treebank)
    terminal_logprobs.evaluate(paths["txl-terminals"], sentences, tmp_path / "out")
    items = [json.loads(line) for line in (tmp_path / "out" / "items.jsonl").read_text().splitlines()]
    scores = ExactScorer(TGModel.load(str(paths["txl-terminals"]))).score(sentences.words[:5])
    for item, score in zip(items, scores):
        np.testing.assert_allclose(item["logprob"], score.word_logprobs, **FLOAT32)


def test_documents_and_training_counts(checkpoints, tmp_path, shared_data):
    paths, treebank = checkpoints
    sentences = _sentences(treebank)
    result, _ = terminal_logprobs.evaluate(paths["tg-doc"], sentences, tmp_path / "out")
    items = [json.loads(line) for line in (tmp_path / "out" / "items.jsonl").read_text().splitlines()]
    assert result["settings"]["level"] == "document"
    # the treebank file is one document: all sentences in one item, sentence indices in order
    assert len(items) == 1 and items[0]["sentence"] == sorted(items[0]["sentence"])
    assert max(items[0]["sentence"]) == len(sentences.words) - 1
    words = [w for t in sentences.trees for w in clean(t).leaves()]
    counts = Counter(words)
    assert items[0]["train_count"] == [counts[w] for w in items[0]["word"]]
    assert result["metrics"]["train_units"] == len(words)


def test_cli_resumes_from_the_cache_and_refuses_a_parser(checkpoints, tmp_path, capsys):
    paths, treebank = checkpoints
    args = ["eval", "terminals", str(paths["tg"]), "--corpus", str(treebank), "--split", "file",
            "--out", str(tmp_path / "out"), "--limit", "4", "--json"]
    assert main(args) == 0
    first = json.loads(capsys.readouterr().out)
    assert first["metrics"]["items"] == 4
    assert main(args) == 0
    assert "computed 0 of 4" in capsys.readouterr().err
    bogus = tmp_path / "bogus.ckpt"
    bogus.write_bytes(b"not a checkpoint")
    assert main(["eval", "terminals", str(bogus), "--corpus", str(treebank), "--split", "file"]) == 2
    assert "synbench: error:" in capsys.readouterr().err
