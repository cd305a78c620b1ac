"""Dependency proposals: N distinct projective trees per sentence sampled without replacement from the
dependency parser, with their exact log q (the same as teacher forcing gives)."""

from __future__ import annotations

import math

import torch

from experiments.families.adapter import ProposeRequest
from experiments.families.parser.dep_proposals import propose
from lightning_modules.data.dependency import DepTree
from lightning_modules.data.vocab import WordVocab
from lightning_modules.families.parser import dep_data as dep_parser_data
from lightning_modules.families.parser.data import source_mapping
from lightning_modules.families.parser.model import build

WORDS = ["the", "cat", "sat", "on", "the", "mat"]


def tiny_parser(seed: int = 0):
    torch.manual_seed(seed)
    payload = {"terminals": "words", "words": WordVocab.build(WORDS, 1).to_dict()}
    model = build({"source_vocab_size": len(WordVocab.build(WORDS, 1)) + 1, "action_vocab_size": 6,
                   "d_model": 16, "n_encoder_layers": 1, "n_decoder_layers": 1, "n_heads": 2, "d_ff": 32,
                   "dropout": 0.0})
    with torch.no_grad():  # a peaked, non-uniform q
        for p in model.parameters():
            p.mul_(20.0)
    return model.eval(), payload


def teacher_forced_logq(model, payload, words, heads) -> float:
    example = dep_parser_data.encode(DepTree(tuple(words), heads, ("_",) * len(words)), source_mapping(payload))
    with torch.no_grad():
        nll, _, _ = model.loss_terms(dep_parser_data.collate([example]))
    return -float(nll)


def test_all_trees_of_a_short_sentence_without_replacement() -> None:
    model, payload = tiny_parser()
    (found,) = propose(model, payload, [["the", "cat", "sat"]], n=10, seed=3)
    assert len(found.heads) == 7 == len(set(found.heads))  # every projective single-root tree, once
    assert math.isclose(sum(math.exp(q) for q in found.logq), 1.0, rel_tol=1e-5)
    assert found.logq == sorted(found.logq, reverse=True)
    for heads, logq in zip(found.heads, found.logq):
        assert math.isclose(logq, teacher_forced_logq(model, payload, ["the", "cat", "sat"], heads), abs_tol=1e-4)


def test_samples_are_distinct_projective_and_seeded() -> None:
    model, payload = tiny_parser()
    sentences = [WORDS, WORDS[:4]]
    a = propose(model, payload, sentences, n=20, seed=1)
    b = propose(model, payload, sentences[:1], n=20, seed=1)
    c = propose(model, payload, sentences, n=20, seed=2)
    assert a[0].heads == b[0].heads  # per-sentence noise: the batch does not change a sentence's sample
    assert a[0].heads != c[0].heads
    assert len(a[0].heads) == 20 == len(set(a[0].heads))
    for p in a:
        assert all(t.is_projective() and sum(h == 0 for h in t.heads) == 1 for t in p.trees())
    greedy = propose(model, payload, sentences, n=1, method="beam")
    assert [len(g.heads) for g in greedy] == [1, 1] and greedy[1].trees()[0].is_projective()


def test_proposal_file_round_trip_and_propose_cli(tmp_path, monkeypatch) -> None:
    """``synbench propose`` on a dep-parser checkpoint writes CoNLL-U proposals that ``ProposalFile`` reads back
    as the same dependency trees, with log q and the 1-best / oracle UAS in the meta file."""
    import json

    from experiments.evaluate.scorers.tree_files import ProposalFile
    from experiments.families.parser.dep_proposals import oracle_uas, proposals_jsonl

    model, payload = tiny_parser()
    found = propose(model, payload, [WORDS, WORDS[:3]], n=5, seed=0)
    path = tmp_path / "p.jsonl"
    path.write_text(proposals_jsonl(found))
    trees = ProposalFile(path)([WORDS[:3], WORDS])
    assert [[t.heads for t in ts] for ts in trees] == [found[1].heads, found[0].heads]
    gold = [DepTree(tuple(WORDS), (2, 3, 0, 3, 6, 4), ("_",) * 6)]
    assert oracle_uas(gold, found[:1], 5) >= oracle_uas(gold, found[:1], 1)

    import experiments.families.parser.dep_proposals as module

    sentences = tmp_path / "s.txt"
    sentences.write_text(" ".join(WORDS) + "\n")
    request = ProposeRequest("ckpt", tmp_path / "out.jsonl", 3, "sample", 0, 64, sentences=sentences,
                             logq=tmp_path / "out.logq.jsonl")
    monkeypatch.setattr(module, "load_parser", lambda checkpoint: (model, payload))
    line = module.write(request)
    assert line.startswith("wrote 3 trees for 1 sentences")
    logq = json.loads((tmp_path / "out.logq.jsonl").read_text())["logq"]
    assert logq == sorted(logq, reverse=True) and len(logq) == 3
    assert json.loads((tmp_path / "out.meta.json").read_text())["trees"] == 3
