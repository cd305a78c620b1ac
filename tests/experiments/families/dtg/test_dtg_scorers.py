"""A trained DTG checkpoint as a joint model over given dependency trees: loading, log p(x, y) of gold trees
(equal to the training loss), the marginal over distinct proposals, and bad trees."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch

from experiments.config import resolve_train_config
from experiments.evaluate.scorers.tree_marginal import TreeScorer
from experiments.families import get_family
from experiments.train import train
from lightning_modules.data.dependency import DepTree
from lightning_modules.errors import InputError
from tests.tolerances import close32

TINY = ["model.d_model=32", "model.n_layers=2", "model.n_heads=2", "model.d_ff=64", "model.warmup_steps=4",
        "model.total_steps=40", "model.peak_lr=3e-3", "train.batch_size=4", "train.max_steps=8",
        "train.val_every=8", "train.ckpt_every=8", "runtime.wandb=disabled", "runtime.progress=false",
        "runtime.threads=1"]
ROW = "{i}\t{w}\t_\t_\t_\t_\t{h}\t_\t_\t_\n"
SENTENCES = [("the cat sat .", (2, 3, 0, 3)), ("a dog ran home .", (2, 3, 0, 3, 3))]


def tree(words: str, heads: tuple[int, ...], rel: str = "_") -> DepTree:
    return DepTree(tuple(words.split()), heads, (rel,) * len(heads))


@pytest.fixture(scope="module", params=["standard", "swift"])
def model(request, tmp_path_factory):
    folder = tmp_path_factory.mktemp("dtg")
    path = folder / "small.conllu"
    path.write_text("".join("".join(ROW.format(i=i, w=w, h=h) for i, (w, h) in enumerate(zip(s.split(), hs), 1))
                            + "\n" for s, hs in SENTENCES * 3))
    cfg = resolve_train_config("dtg", "cpu-small", [*TINY, f"data.corpus={path}", "data.train_split=file",
                                                    "data.valid_split=file", f"model.system={request.param}"])
    train(cfg, seed=1, run_dir=folder / "run")
    model = get_family("dtg").load(folder / "run" / "checkpoints" / "best.ckpt")
    model.checkpoint = folder / "run" / "checkpoints" / "best.ckpt"
    return model


def test_gold_tree_logprob_is_the_training_loss(model) -> None:
    gold = tree("the cat sat .", (2, 3, 0, 3))
    (score,) = TreeScorer(model, None, method="gold").score_trees([gold.forms], [[gold]])
    example = model.encode_tree(gold)
    with torch.no_grad():
        nll, count = model.module.nll(model._forward([example])[1])
    assert score.total == pytest.approx(-float(nll), abs=1e-4)
    assert int(count) == int((example.labels != 0).sum())
    assert sum(score.word_logprobs) + score.end_logprob == pytest.approx(score.total)
    assert score.extra["trees"] == 1 and score.unknown_words == 0


def test_marginal_over_distinct_proposals(model) -> None:
    words = ("a", "dog", "ran", "home", ".")
    gold, flat, chain = tree(" ".join(words), (2, 3, 0, 3, 3)), tree(" ".join(words), (3, 3, 0, 3, 3)), \
        tree(" ".join(words), (0, 1, 2, 3, 4))
    relabelled = tree(" ".join(words), (2, 3, 0, 3, 3), rel="dep")  # the same structure: counted once
    scorer = TreeScorer(model, None, method="proposals", n=10)
    (both,) = scorer.score_trees([words], [[gold, relabelled, flat, chain]])
    singles = [scorer.score_trees([words], [[t]])[0].total for t in (gold, flat, chain)]
    assert both.extra["trees"] == 3
    assert both.total == close32(math.log(sum(math.exp(s) for s in singles)))
    assert both.total >= max(singles) and all(v <= 1e-9 for v in both.word_logprobs)
    assert sum(both.word_logprobs) + both.end_logprob == pytest.approx(both.total)
    assert both.best_tree.startswith("1\ta\t")


def test_non_projective_trees_are_lifted_and_constituency_trees_refused(model) -> None:
    crossing, lifted = tree("the cat sat .", (3, 4, 0, 3)), tree("the cat sat .", (3, 3, 0, 3))
    scorer = TreeScorer(model, None, method="gold")
    (a,), (b,) = scorer.score_trees([crossing.forms], [[crossing]]), scorer.score_trees([lifted.forms], [[lifted]])
    assert a.total == b.total  # best_tree stays the tree as given
    with pytest.raises(InputError, match="scores dependency trees, not Tree") as info:
        from lightning_modules.data.tree import parse_tree

        scorer.score_trees([["a"]], [[parse_tree("(S (NN a))")]], [["trees.mrg:3"]])
    assert info.value.location == "trees.mrg:3"


def test_eval_ppl_gold_on_a_dependency_corpus(model, tmp_path: Path, capsys) -> None:
    from experiments.cli import main

    corpus = tmp_path / "test.conllu"
    corpus.write_text("".join("".join(ROW.format(i=i, w=w, h=h) for i, (w, h) in enumerate(zip(s.split(), hs), 1))
                              + "\n" for s, hs in [*SENTENCES, ("the dog sat .", (3, 4, 0, 3))]))
    checkpoint = tmp_path / "model.ckpt"
    import shutil

    shutil.copy(model.checkpoint, checkpoint)
    assert main(["eval", "ppl", str(checkpoint), "--corpus", str(corpus), "--split", "file", "--json",
                 "--method", "gold", "--out", str(tmp_path / "out")]) == 0
    result = json.loads(capsys.readouterr().out)
    gold = TreeScorer(model, None, method="gold")
    trees = [tree(s, hs) for s, hs in [*SENTENCES, ("the dog sat .", (3, 4, 0, 3))]]
    totals = [gold.score_trees([t.forms], [[t]])[0].total for t in trees]
    words = sum(len(t) for t in trees)
    assert result["metrics"]["word_ppl"] == pytest.approx(math.exp(-sum(totals) / words), rel=1e-6)
    assert result["settings"]["method"] == "gold" and result["settings"]["scorer_convention"]["bound"] is True


@pytest.fixture(scope="module")
def parser_checkpoint(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("dep-parser")
    path = folder / "small.conllu"
    path.write_text("".join("".join(ROW.format(i=i, w=w, h=h) for i, (w, h) in enumerate(zip(s.split(), hs), 1))
                            + "\n" for s, hs in SENTENCES * 3))
    cfg = resolve_train_config("dep-parser", "cpu-small", [
        "model.d_model=16", "model.n_encoder_layers=1", "model.n_decoder_layers=1", "model.n_heads=2",
        "model.d_ff=32", "model.warmup_steps=2", "model.total_steps=20", "train.batch_size=4", "train.max_steps=6",
        "train.val_every=6", "train.ckpt_every=6", "runtime.wandb=disabled", "runtime.progress=false",
        "runtime.threads=1", f"data.corpus={path}", "data.train_split=file", "data.valid_split=file"])
    metrics = train(cfg, seed=1, run_dir=folder / "run")
    assert metrics["valid_sentences"] == 6 and 0.0 <= metrics["val_greedy_uas"] <= 100.0
    return folder / "run" / "checkpoints" / "best.ckpt"


def test_eval_ppl_over_dependency_proposals(model, parser_checkpoint: Path, tmp_path: Path, capsys) -> None:
    """``--method proposals --parser CKPT``: the marginal over N distinct trees drawn per sentence from the
    dependency parser; a bound no looser than the gold tree's when the gold tree is among them."""
    from experiments.cli import main
    from experiments.evaluate.scorer_choice import SentenceSeededProposals

    corpus = tmp_path / "test.conllu"
    corpus.write_text("".join("".join(ROW.format(i=i, w=w, h=h) for i, (w, h) in enumerate(zip(s.split(), hs), 1))
                              + "\n" for s, hs in SENTENCES))
    assert main(["eval", "ppl", str(model.checkpoint), "--corpus", str(corpus), "--split", "file", "--json",
                 "--method", "proposals", "--parser", str(parser_checkpoint), "-n", "30",
                 "--out", str(tmp_path / "out")]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["settings"]["n_proposals"] == 30 and result["settings"]["scorer_convention"]["bound"] is True
    source = SentenceSeededProposals(parser_checkpoint, 30, 0)
    trees = source([s.split() for s, _ in SENTENCES])
    assert [len(t) for t in trees] == [30, 30] and all(len(set(ts)) == 30 for ts in trees)
    # a tree whose transitions the model has no token for (arc-swift reaches unseen in training) has p = 0
    trees = [[t for t in ts if model.transitions_known(t)] for ts in trees]
    assert model.system != "standard" or [len(t) for t in trees] == [30, 30]
    scorer = TreeScorer(model, None, method="proposals", n=30)
    totals = [scorer.score_trees([s.split()], [ts])[0].total for (s, _), ts in zip(SENTENCES, trees)]
    words = sum(len(s.split()) for s, _ in SENTENCES)
    assert result["metrics"]["word_ppl"] == pytest.approx(math.exp(-sum(totals) / words), rel=1e-6)


def test_uas_by_reranking_proposals(model, parser_checkpoint: Path, tmp_path: Path, capsys) -> None:
    """``eval uas-rerank``: the tree the model ranks first among N proposals, scored against the gold heads
    (gold XPOS `` '' . , : not scored), beside the parser's greedy UAS and the proposals' oracle UAS."""
    from experiments.cli import main
    from experiments.evaluate.scorer_choice import SentenceSeededProposals
    from lightning_modules.data.dependency import read_conllu

    corpus = tmp_path / "test.conllu"
    punct = "{i}\t{w}\t_\t{u}\t{x}\t_\t{h}\t_\t_\t_\n"
    corpus.write_text("".join("".join(punct.format(i=i, w=w, h=h, u="PUNCT" if w == "." else "X",
                                                   x="." if w == "." else "NN")
                                      for i, (w, h) in enumerate(zip(s.split(), hs), 1)) + "\n"
                              for s, hs in SENTENCES))
    assert main(["eval", "uas-rerank", str(model.checkpoint), "--parser", str(parser_checkpoint), "--corpus",
                 str(corpus), "--split", "file", "-n", "8", "--json", "--out", str(tmp_path / "out")]) == 0
    result = json.loads(capsys.readouterr().out)
    metrics = result["metrics"]
    assert metrics["words"] == 7  # 9 words, 2 of them tagged .
    assert metrics["uas_oracle"] >= metrics["uas"]
    trees = [[t for t in ts if model.transitions_known(t)]
             for ts in SentenceSeededProposals(parser_checkpoint, 8, 0)([s.split() for s, _ in SENTENCES])]
    scorer = TreeScorer(model, None, method="gold")
    best = [max(ts, key=lambda t: scorer.score_trees([t.forms], [[t]])[0].total).heads for ts in trees]
    written = [t.heads for _, t in read_conllu(tmp_path / "out" / "reranked.conllu")]
    assert written == best
    gold = [hs for _, hs in SENTENCES]
    correct = sum(b[i] == g[i] for b, g, (s, _) in zip(best, gold, SENTENCES) for i, w in enumerate(s.split())
                  if w != ".")
    assert metrics["uas"] == pytest.approx(100.0 * correct / 7)
