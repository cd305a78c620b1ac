"""PaLM's official initialisation: untrained cpu-small models parse both ways (PaLM Table 4's random row, 39.3 ±
10.5 % left / 41.2 ± 8.8 % right), not all-left or all-right as with PyTorch's default random biases."""

from __future__ import annotations

import statistics

import pytorch_lightning as pl
import torch

from experiments.config import resolve_train_config
from experiments.evaluate.ppl import read_sentences
from experiments.evaluate.unsupervised_parse import gold_view, split_percentages
from experiments.families import get_family
from experiments.families.palm.scorers import ExactScorer, PalmModel
from lightning_modules.data.tree import parse_tree
from lightning_modules.families.palm.initialisation import block_orthogonal_, init_lstm_

SEEDS = range(6)
SENTENCES = 60  # the first test sentences of 3..40 words without punctuation


def test_lstm_matrices_are_orthogonal_gate_by_gate_and_biases_zero():
    lstm = torch.nn.LSTM(6, 5)
    init_lstm_(lstm)
    for name, value in lstm.named_parameters():
        if "bias" in name:
            assert torch.equal(value, torch.zeros_like(value))
            continue
        for gate in value.detach().split(5):  # [5, D]: orthonormal rows (D >= 5) or columns
            product = gate @ gate.T if gate.shape[1] >= 5 else gate.T @ gate
            assert torch.allclose(product, torch.eye(product.shape[0]), atol=1e-5)
    assert not torch.allclose(lstm.weight_hh_l0[:5], lstm.weight_hh_l0[5:10])
    try:
        block_orthogonal_(torch.empty(7, 3), 2)
    except ValueError as e:
        assert "blocks of 2" in str(e)
    else:
        raise AssertionError("7 rows cut into blocks of 2")


def test_untrained_cpu_small_models_split_both_ways_like_the_papers_random_row():
    cfg = resolve_train_config("palm-u", "cpu-small", ["train.max_steps=0", "runtime.threads=1"])
    family = get_family("palm-u")
    data = family.build_data(cfg)
    gold = read_sentences("ptb-sample", "test", trees=True)
    views = [v for v in map(gold_view, gold.trees) if v is not None and 3 <= len(v.leaves()) <= 40]
    sentences = [v.leaves() for v in views[:SENTENCES]]
    left, right = [], []
    for seed in SEEDS:
        pl.seed_everything(seed, verbose=False)  # as experiments.train seeds the model of a run
        module = family.build_module(cfg, data)
        scorer = ExactScorer(PalmModel(module, {"family": "palm-u", "vocab": data.vocab}), trees=True)
        pct = split_percentages([parse_tree(s.best_tree) for s in scorer.score(sentences)])
        left.append(pct["left_splits_pct"])
        right.append(pct["right_splits_pct"])
    # no model is all-left or all-right (default PyTorch init: every model one or the other), and on average
    # both directions are common, as the paper's 39.3 / 41.2
    assert all(10 < x < 90 for x in left + right), (left, right)
    assert 25 < statistics.mean(left) < 60 and 25 < statistics.mean(right) < 60, (left, right)
