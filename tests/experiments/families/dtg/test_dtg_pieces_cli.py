"""DTG and TXL (trans) on SentencePiece pieces through the CLI: a tiny ``cpu-small-pieces`` run, exact gold-tree
scoring of the piece checkpoint (``eval ppl --method gold``: log p(x, y_gold) is the training loss), and the
word-synchronous beam over its pieces (a word's later pieces forced, as the official loop takes them), equal to
the port of the official loop; under ``word_prob="corrected"`` an unpruned beam's words equal differences of
boundary marginals by brute force over every sequence."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
import torch

from experiments.cli import main
from experiments.evaluate.scorers.tree_marginal import TreeScorer
from experiments.families import get_family
from experiments.families.dtg.beam import DTGBeamScorer, token_records, word_pieces
from experiments.families.dtg.reference_beam import OfficialBeamPort, _prefix_example
from lightning_modules.data.dependency import DepTree
from lightning_modules.families.dtg import encoding as dtg
from tests.experiments.families.dtg.test_dtg_beam import all_sequences, check_sums
from tests.tolerances import close32

ROW = "{i}\t{w}\t_\t_\t_\t_\t{h}\t_\t_\t_\n"
SENTENCES = [("the cats sat on the mats .", (2, 3, 0, 6, 6, 3, 3)), ("a dog ran home .", (2, 3, 0, 3, 3)),
             ("the dogs sat .", (2, 3, 0, 3)), ("cats ran on mats .", (2, 0, 4, 2, 2))]
TINY = ["model.d_model=32", "model.n_layers=2", "model.n_heads=2", "model.d_ff=64", "model.warmup_steps=4",
        "model.total_steps=40", "model.peak_lr=3e-3", "train.batch_size=4", "train.max_steps=4",
        "train.val_every=4", "train.ckpt_every=4", "runtime.wandb=disabled", "runtime.progress=false",
        "runtime.threads=1", "data.train_split=file", "data.valid_split=file", "data.sp_vocab_size=21"]


@pytest.mark.parametrize("family", ["dtg", "txl-trans"])
def test_piece_model_trains_scores_gold_trees_and_through_the_beam(tmp_path: Path, family: str, capsys) -> None:
    corpus = tmp_path / "small.conllu"
    corpus.write_text("".join("".join(ROW.format(i=i, w=w, h=h) for i, (w, h) in enumerate(zip(s.split(), hs), 1))
                              + "\n" for s, hs in SENTENCES * 2))
    assert main(["train", family, "--preset", "cpu-small-pieces", *TINY, f"data.corpus={corpus}",
                 "--run-dir", str(tmp_path / "run")]) == 0
    metrics = json.loads((tmp_path / "run" / "DONE").read_text())
    assert metrics["global_step"] == 4 and metrics["val_words"] == 2 * sum(len(s.split()) for s, _ in SENTENCES)
    checkpoint = tmp_path / "run" / "checkpoints" / "best.ckpt"
    model = get_family(family).load(checkpoint)
    assert model.pieces and len(model.words.encode_words(["cats"])[0]) > 1  # words of several pieces
    capsys.readouterr()

    assert main(["eval", "ppl", str(checkpoint), "--corpus", str(corpus), "--split", "file", "--json",
                 "--method", "gold", "--out", str(tmp_path / "gold")]) == 0
    result = json.loads(capsys.readouterr().out)
    trees = [DepTree(tuple(s.split()), hs, ("_",) * len(hs)) for s, hs in SENTENCES]
    scorer = TreeScorer(model, None, method="gold")
    scores = [scorer.score_trees([t.forms], [[t]])[0] for t in trees]
    for t, score in zip(trees, scores):  # log p(x, y_gold) is minus the training loss of the piece sequence
        example = model.encode_tree(t)
        with torch.no_grad():
            nll, _ = model.module.nll(model._forward([example])[1])
        assert score.total == close32(-float(nll))
        assert sum(score.word_logprobs) + score.end_logprob == pytest.approx(score.total)
        assert len(score.word_logprobs) == len(t) and all(v <= 0 for v in score.word_logprobs)
    words = sum(len(t) for t in trees)
    assert result["metrics"]["word_ppl"] == pytest.approx(math.exp(-sum(s.total for s in scores) / words), rel=1e-6)
    # the validation bound over the same gold trees (each sentence twice) is the same perplexity
    assert metrics["val_word_ppl"] == pytest.approx(result["metrics"]["word_ppl"], rel=1e-4)

    # the word-synchronous beam over pieces: a wide one sums p(x, a) over every sequence of three words (the
    # training encoder's log-probs), narrow ones equal the port of the official loop, and the CLI runs it
    model.path = checkpoint
    check_sums(model, ["the", "cats", "sat"], 15, all_sequences(model, 3))
    sentences = [["the", "cats", "sat", "on", "the", "mats", "."], ["cats", "ran", "."]]
    for beam, word_beam, steps, fast_track in ((6, 3, 15, 0), (2, 1, 3, 0), (5, 2, 11, 2)):
        ours = DTGBeamScorer(model, beam, word_beam, steps, fast_track).score(sentences)
        port = OfficialBeamPort(model, beam, word_beam, steps, fast_track).score(sentences)
        for mine, theirs, words in zip(ours, port, sentences):
            assert np.cumsum(mine.word_logprobs) == close32(theirs.prefix[: len(words)])
            assert mine.total == close32(theirs.total)
    check_corrected(model, ["the", "cats", "sat"], all_sequences(model, 3))
    assert main(["eval", "ppl", str(checkpoint), "--corpus", str(corpus), "--split", "file", "--method", "beam",
                 "--beam", "6", "--word-beam", "3", "--json", "--out", str(tmp_path / "beam")]) == 0
    beam = json.loads(capsys.readouterr().out)
    assert beam["settings"]["later_pieces"] == "forced, word beam after each"
    assert math.isfinite(beam["metrics"]["word_ppl"]) and beam["metrics"]["word_ppl"] > 1
    assert beam["metrics"]["zero_probability_sentences"] == 0


def boundary_prefixes(model, words: list[str], transitions: list[dtg.Transition], begins: torch.Tensor
                      ) -> list[tuple[tuple, float]]:
    """Each prefix of the sequence that ends with a word's last piece (and the empty one, after ``<s>``), with
    log p(prefix) + log P(B | prefix), from one forward pass over the sequence's token records."""
    state = dtg.DTGState(model.system, "official")
    ids = word_pieces(model, words)
    records = token_records(model, [], state, None)
    reads, targets, ends = [], [], [(0, 0, ())]  # (position after the prefix, its targets, the prefix)
    for k, t in enumerate(transitions):
        word = ids[state.words] if t.action == "gen" else [model.vocab.id(t.token())]
        reads += [len(records) - 1 + j for j in range(len(word))]
        targets += word
        records += token_records(model, [r[0] for r in records], state, t, word if t.action == "gen" else ())
        if t.action == "gen":
            ends.append((len(records) - 1, len(targets), tuple(transitions[: k + 1])))
    (rows,) = model.distributions([_prefix_example(records, model.family == "txl-trans")],
                                  [reads + [position for position, _, _ in ends]])
    logprobs = [float(row[target]) for row, target in zip(rows, targets)]
    masses = rows[len(reads):][:, begins].logsumexp(-1).tolist()
    return [(prefix, math.fsum(logprobs[:n]) + mass) for (_, n, prefix), mass in zip(ends, masses)]


def check_corrected(model, words: list[str], sequences: list[list[dtg.Transition]]) -> None:
    """``word_prob="corrected"``: an unpruned beam's words are the differences of D_i = log Σ over the distinct
    prefixes ending with word i's last piece of p(prefix) P(B | prefix), by brute force over every sequence."""
    begins = torch.tensor(model.word_boundary_ids())
    distinct: dict[tuple, float] = {}
    for sequence in sequences:
        distinct.update(boundary_prefixes(model, words, sequence, begins))
    levels = [math.log(sum(math.exp(v) for prefix, v in distinct.items()
                           if sum(t.action == "gen" for t in prefix) == i)) for i in range(len(words) + 1)]
    (plain,) = DTGBeamScorer(model, 10_000, 10_000, 15, 0).score([words])
    scorer = DTGBeamScorer(model, 10_000, 10_000, 15, 0, word_prob="corrected")
    (ours,) = scorer.score([words])
    assert scorer.convention.word_prob == "corrected"
    assert ours.word_logprobs == pytest.approx([b - a for a, b in zip(levels, levels[1:])], abs=1e-4)
    assert (ours.total, ours.end_logprob) == (close32(plain.total), close32(plain.end_logprob))
    assert max(abs(a - b) for a, b in zip(ours.word_logprobs, plain.word_logprobs)) > 1e-3
