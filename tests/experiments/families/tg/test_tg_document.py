"""Document-level scoring (TG §3.1's greedy single-path prefix) with tiny random document-level models.

Every identity holds for any network, so the models are randomly initialised; the documents are PTB sample
files. References are computed straight from ``token_logprobs`` of whole sequences (no scorer code).
"""

import json
import math

import numpy as np
import pytest
import torch

from experiments.cli import main
from experiments.evaluate.scorers.tree_marginal import TreeScorer
from experiments.families.tg.document import INCREMENTAL, DocumentScorer
from experiments.families.tg.scorers import ExactScorer, TGModel
from lightning_modules.data import treebank_sequences
from lightning_modules.data.corpora import Document
from lightning_modules.data.encodings.choe_charniak import Actions, document_choe_charniak, terminal_actions
from lightning_modules.data.encodings.segmentation import segment
from lightning_modules.data.transforms import left_branching, right_branching
from lightning_modules.data.tree import read_bracketed, to_bracketed
from lightning_modules.errors import InputError
from lightning_modules.families.tg import data as tg_data
from lightning_modules.models.txl_lm import build
from tests.tolerances import close32

FILES = ("wsj_0001.mrg", "wsj_0002.mrg", "wsj_0003.mrg")


@pytest.fixture(scope="module")
def documents(shared_data):
    """Cleaned, POS-free trees of three PTB sample documents (the last cut to 3 sentences: fast)."""
    docs = [Document(f, tuple(read_bracketed(shared_data / "ptb_nltk_sample" / "combined" / f))) for f in FILES]
    seqs = treebank_sequences.sequences(docs, "document", "none")
    return [seqs[0], seqs[1], seqs[2][:3]]


def make_model(family, documents, segment_length=16):
    """A random document-level model with the vocabularies document-level training would build."""
    words = [w for doc in documents for t in doc for w in t.leaves()]
    data_cfg = {"terminals": "words", "min_count": 1}
    mapping, payload, tokens = treebank_sequences.terminal_mapping(data_cfg, words, documents)
    linearise = tg_data.actions_function(family, "document", mapping)
    vocab = tg_data.build_action_vocab(tokens, [linearise(d) for d in documents])
    model_cfg = {"d_model": 32, "n_layers": 2, "n_heads": 2, "d_ff": 64, "segment_length": segment_length,
                 "memory_length": segment_length, "relpos": "delta_depth" if family == "tg" else "linear",
                 "attention": "dense"}
    torch.manual_seed(0)
    module = build({**model_cfg, "vocab_size": len(vocab)})
    with torch.no_grad():
        module.network.embedding.weight.mul_(4.0)
    meta = {"family": family, "vocab": payload,
            "config": {"model": model_cfg, "data": {"memory": "smart", "tree_transform": "none",
                                                    "level": "document"}}}
    return TGModel(module, meta, vocab)


def sequence_logprob(model, actions):
    """Sum of ``token_logprobs`` of one whole sequence."""
    example = model.encode(actions)
    return float(model.module.token_logprobs(tg_data.collate_sequences(
        [(example, segment(example, model.length, model.length, model.memory))])).double().sum())


def open_document(model, trees):
    """``<s> (DOC`` + the trees' actions, the document left open (no ``DOC)``)."""
    a = document_choe_charniak(trees, model.terminals)
    return Actions(a.tokens[:-1], a.types[:-1], a.word_index[:-1])


def conditional(model, previous, tree, last):
    """log p(prefix + tree) - log p(prefix), ``prefix = <s> (DOC previous``; the first sentence owns ``(DOC``."""
    full = (sequence_logprob(model, document_choe_charniak(previous + [tree], model.terminals)) if last
            else sequence_logprob(model, open_document(model, previous + [tree])))
    return full - (sequence_logprob(model, open_document(model, previous)) if previous else 0.0)


def tree_source(candidates):
    """Sentences -> their candidate trees (by words)."""
    by_words = {tuple(trees[0].leaves()): trees for trees in candidates}
    return lambda sentences: [by_words[tuple(s)] for s in sentences]


@pytest.fixture(scope="module", params=["tg", "txl-trees"])
def joint(request, documents):
    return make_model(request.param, documents)


def test_gold_equals_the_gold_document_exactly(joint, documents):
    gold = tree_source([[t] for doc in documents for t in doc])
    scorer = DocumentScorer(TreeScorer(joint, gold, method="gold", batch_size=3))
    sentences = [[t.leaves() for t in doc] for doc in documents]
    scored = scorer.score_documents(sentences)
    for doc, scores in zip(documents, scored):
        reference = sequence_logprob(joint, document_choe_charniak(doc, joint.terminals))
        assert math.fsum(s.total for s in scores) == close32(reference)
        for s in scores:  # word values and the end term telescope to each sentence's total
            assert sum(s.word_logprobs) + s.end_logprob == pytest.approx(s.total, abs=1e-9)
    assert scorer.convention.incremental.startswith(INCREMENTAL)
    assert scorer.convention.method == "gold" and scorer.convention.bound


def test_proposals_greedy_prefix_and_bounds(joint, documents):
    """Each sentence's total is the logsumexp of its candidates' conditionals given the greedy prefix of the
    trees chosen before it (computed independently), at least the gold tree's conditional, and the chosen
    tree is the argmax; the first sentence (same prefix ``<s>``) is >= its gold-only score."""
    doc = documents[0] + documents[1][:2]  # 4 sentences
    candidates = [[t, left_branching(t), right_branching(t)] for t in doc]
    scorer = DocumentScorer(TreeScorer(joint, tree_source(candidates), n=3, batch_size=2))
    scores = scorer.score_documents([[t.leaves() for t in doc]])[0]
    gold_only = DocumentScorer(TreeScorer(joint, tree_source([[t] for t in doc]), method="gold"))
    gold_scores = gold_only.score_documents([[t.leaves() for t in doc]])[0]
    chosen = []
    for i, (trees, s) in enumerate(zip(candidates, scores)):
        last = i == len(doc) - 1
        values = [conditional(joint, chosen, t, last) for t in trees]
        distinct = {to_bracketed(t): v for t, v in zip(trees, values)}
        assert s.total == close32(float(np.logaddexp.reduce(list(distinct.values()))))
        assert s.total >= values[0] - 1e-4  # at least the gold tree given the same prefix
        best = int(np.argmax(values))
        assert s.best_tree == to_bracketed(trees[best])
        assert s.extra["best_logprob"] == close32(values[best])
        chosen.append(trees[best])
    assert scores[0].total >= gold_scores[0].total - 1e-6


def test_exact_document_equals_token_logprobs(documents):
    model = make_model("txl-terminals", documents)
    scorer = DocumentScorer(ExactScorer(model, batch_size=2))
    assert not scorer.convention.bound and scorer.convention.incremental == INCREMENTAL
    for doc, scores in zip(documents, scorer.score_documents([[t.leaves() for t in d] for d in documents])):
        example = model.encode(terminal_actions(doc, model.terminals))
        lp = model.module.token_logprobs(tg_data.collate_sequences(
            [(example, segment(example, model.length, model.length, model.memory))])).double()[0].numpy()
        assert math.fsum(s.total for s in scores) == close32(float(lp.sum()))
        words = [v for s in scores for v in s.word_logprobs]
        assert words == close32(lp[: len(words)].tolist())  # one terminal per word
        assert [s.end_logprob for s in scores[:-1]] == [0.0] * (len(scores) - 1)
        assert scores[-1].end_logprob == close32(float(lp[len(words)]))  # </s>


def test_document_errors(joint, documents):
    scorer = DocumentScorer(TreeScorer(joint, tree_source([[t] for t in documents[0]]), method="gold"))
    with pytest.raises(InputError, match="at least one sentence"):
        scorer.score_documents([[]])
    wrong = DocumentScorer(TreeScorer(joint, lambda sentences: [[documents[0][1]]], method="gold"))
    with pytest.raises(InputError, match="differ from the sentence"):
        wrong.score_documents([[documents[0][0].leaves()]])


# -- the CLI on document-level checkpoints -------------------------------------------------------------------
@pytest.fixture(scope="module")
def document_checkpoints(tmp_path_factory, shared_data):
    from experiments.config import resolve_train_config
    from experiments.train import train

    root = tmp_path_factory.mktemp("docckpt")
    trees = [t for f in FILES[:2] for _, t in read_bracketed(shared_data / "ptb_nltk_sample" / "combined" / f)]
    (root / "tb.mrg").write_text("".join(to_bracketed(t) + "\n" for t in trees))  # one document
    tiny = ["model.d_model=32", "model.n_layers=2", "model.n_heads=2", "model.d_ff=64", "train.batch_size=1",
            "train.max_steps=1", "train.val_every=1", "train.ckpt_every=1", "runtime.wandb=disabled",
            "runtime.progress=false", "runtime.threads=1", f"data.corpus={root / 'tb.mrg'}",
            "data.train_split=file", "data.valid_split=file", "data.level=document"]
    out = {}
    for family in ("tg", "txl-terminals"):
        train(resolve_train_config(family, "cpu-small", tiny), seed=0, run_dir=root / family)
        out[family] = str(root / family / "checkpoints" / "best.ckpt")
    return out, root / "tb.mrg", trees


@pytest.mark.parametrize("family,method", [("tg", "gold"), ("txl-terminals", "exact")])
def test_cli_ppl_on_document_level_checkpoints(document_checkpoints, tmp_path, capsys, family, method):
    paths, treebank, trees = document_checkpoints
    out = tmp_path / "out"
    args = ["eval", "ppl", paths[family], "--corpus", str(treebank), "--split", "file", "--method", method,
            "--out", str(out), "--json"]
    assert main(args) == 0
    result = json.loads(capsys.readouterr().out)
    assert "document-level" in result["convention"]
    if family == "tg":
        assert "greedy single-path prefix" in result["convention"]
    assert result["settings"]["level"] == "document"
    assert result["metrics"]["sentences"] == len(trees)
    items = [json.loads(line) for line in (out / "items.jsonl").read_text().splitlines()]
    assert len(items) == 1 and items[0]["sentences"] == len(trees)  # the treebank file is one document
    assert json.loads((out / "results.json").read_text())["convention"] == result["convention"]


def test_cli_document_level_refusals(document_checkpoints, tmp_path, capsys):
    paths, treebank, _ = document_checkpoints
    args = ["eval", "ppl", paths["tg"], "--corpus", str(treebank), "--split", "file", "--out", str(tmp_path)]
    assert main(args) == 2  # default method beam: not for document-level checkpoints
    assert "--method gold or --method proposals" in capsys.readouterr().err


def test_cli_document_proposals_file_with_gold_only_equals_gold(document_checkpoints, tmp_path, capsys):
    paths, treebank, trees = document_checkpoints
    proposals = tmp_path / "p.jsonl"
    proposals.write_text("".join(json.dumps({"sentence": k, "trees": [to_bracketed(t)]}) + "\n"
                                 for k, t in enumerate(trees)))
    results = {}
    for method, extra in (("gold", []), ("proposals", ["--proposals", str(proposals), "-n", "5"])):
        args = ["eval", "ppl", paths["tg"], "--corpus", str(treebank), "--split", "file", "--method", method,
                "--out", str(tmp_path / method), "--json", *extra]
        assert main(args) == 0
        results[method] = json.loads(capsys.readouterr().out)
    assert results["proposals"]["metrics"]["logprob"] == close32(results["gold"]["metrics"]["logprob"])
    assert "greedy single-path prefix" in results["proposals"]["settings"]["scorer_convention"]["incremental"]


def test_sentence_level_evaluations_refuse_document_level_checkpoints(document_checkpoints):
    import argparse

    from experiments.evaluate.scorer_choice import choose

    args = argparse.Namespace(checkpoint=document_checkpoints[0]["txl-terminals"], n=300, beam=20, word_beam=5,
                              max_actions=8, batch_size=32, proposals=None, parser=None, method=None)
    with pytest.raises(InputError, match="evaluated with eval ppl only"):
        choose(args)  # e.g. eval sg, blimp, rerank
    assert choose(args, documents=True).level == "document"
