"""The DTG / TXL (trans) word-synchronous beam: with beams wide enough to keep everything it sums p(x, a)
over every transition sequence the system allows (checked against full forward passes of each sequence), its
prefix values add up to the total, and narrow beams give a lower bound; eval sg/blimp run through it."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from experiments.config import resolve_train_config
from experiments.families import get_family
from experiments.families.dtg.beam import DTGBeamScorer, _ends, _transition
from experiments.train import train
from lightning_modules.data.dependency import DepTree
from lightning_modules.families.dtg import encoding as dtg

TINY = ["model.d_model=32", "model.n_layers=2", "model.n_heads=2", "model.d_ff=64", "model.warmup_steps=4",
        "model.total_steps=40", "model.peak_lr=3e-3", "train.batch_size=4", "train.max_steps=8",
        "train.val_every=8", "train.ckpt_every=8", "runtime.wandb=disabled", "runtime.progress=false",
        "runtime.threads=1"]
ROW = "{i}\t{w}\t_\t_\t_\t_\t{h}\t_\t_\t_\n"
SENTENCES = [("the cat sat .", (2, 3, 0, 3)), ("a dog ran home .", (2, 3, 0, 3, 3)), ("dogs ran", (2, 0)),
             ("the big dog ran", (3, 3, 4, 0))]


@pytest.fixture(scope="module", params=[("dtg", "standard"), ("dtg", "eager"), ("dtg", "swift"),
                                        ("txl-trans", "standard")])
def model(request, tmp_path_factory):
    family, system = request.param
    folder = tmp_path_factory.mktemp(f"{family}-{system}")
    path = folder / "small.conllu"
    path.write_text("".join("".join(ROW.format(i=i, w=w, h=h) for i, (w, h) in enumerate(zip(s.split(), hs), 1))
                            + "\n" for s, hs in SENTENCES * 3))
    cfg = resolve_train_config(family, "cpu-small", [*TINY, f"data.corpus={path}", "data.train_split=file",
                                                     "data.valid_split=file", f"model.system={system}"])
    train(cfg, seed=1, run_dir=folder / "run")
    loaded = get_family(family).load(folder / "run" / "checkpoints" / "best.ckpt")
    loaded.path = folder / "run" / "checkpoints" / "best.ckpt"
    return loaded


def all_sequences(model, n: int) -> list[list[dtg.Transition]]:
    """Every complete sequence over n words whose transitions the vocabulary has (what the beam may take)."""
    known = [t for t in (_transition(tok) for tok in model.vocab.tokens) if t is not None]
    out, stack = [], [[]]
    while stack:
        prefix = stack.pop()
        state = dtg.DTGState(model.system)
        for t in prefix:
            state.apply(t)
        remaining = n - state.words
        if not remaining and state.can_end():
            out.append(prefix)
            continue
        if remaining and state.check(dtg.GEN) is None:
            stack.append(prefix + [dtg.GEN])
        stack.extend(prefix + [t] for t in known if state.check(t) is None and not (remaining and _ends(state, t)))
    return out


def sequence_logprob(model, words: list[str], transitions: list[dtg.Transition]) -> float:
    heads = dtg.decode(transitions, model.system)
    example = model._encode(DepTree(tuple(words), heads, ("_",) * len(words)), transitions)
    return float(model.label_logprobs([example])[0].sum())


def test_wide_beam_sums_every_sequence(model) -> None:
    words = ["the", "dog", "sat"]
    sequences = all_sequences(model, len(words))
    assert len(sequences) >= 7
    exact = math.log(sum(math.exp(sequence_logprob(model, words, s)) for s in sequences))
    (score,) = DTGBeamScorer(model, beam=10_000, word_beam=10_000, max_actions=15).score([words])
    assert score.total == pytest.approx(exact, abs=1e-4)
    assert score.extra["trees"] == len(sequences)
    assert sum(score.word_logprobs) + score.end_logprob == pytest.approx(score.total)
    assert all(v <= 1e-9 for v in score.word_logprobs)


def test_narrow_beam_is_a_lower_bound_and_fast_track(model) -> None:
    words = ["a", "big", "cat", "ran", "home", "."]
    wide, narrow = (DTGBeamScorer(model, beam=b, word_beam=w, max_actions=6).score([words])[0]
                    for b, w in ((200, 50), (4, 2)))
    assert narrow.total <= wide.total + 1e-9 and np.isfinite(narrow.total)
    (tracked,) = DTGBeamScorer(model, beam=10, word_beam=3, max_actions=6, fast_track=0).score([words])
    assert np.isfinite(tracked.total) and tracked.total <= wide.total + 1e-9
    heads = [int(line.split("\t")[6]) for line in tracked.best_tree.strip().splitlines()]
    assert DepTree(tuple(words), tuple(heads), ("_",) * len(words)).is_projective()


def test_eval_blimp_and_sg_through_the_beam(model, tmp_path: Path, capsys, prepared_data_dir: Path) -> None:
    import json

    from experiments.cli import main

    for task, extra in (("blimp", ["--pairs-per-paradigm", "1", "--paradigms", "anaphor_gender_agreement"]),
                        ("sg", ["--items-per-suite", "1", "--suites", "number_prep"])):
        assert main(["eval", task, str(model.path), "--beam", "8", "--word-beam", "3", "--max-actions", "4",
                     "--fast-track", "0", "--data-dir", str(prepared_data_dir), "--json",
                     "--out", str(tmp_path / task), *extra]) == 0
        result = json.loads(capsys.readouterr().out)
        assert result["settings"]["method"] == "beam" and result["settings"]["fast_track"] == 0


def test_no_transition_ends_the_sequence_while_words_remain(model) -> None:
    from experiments.families.dtg.beam import _Hypothesis

    scorer = DTGBeamScorer(model, beam=50, word_beam=50, max_actions=3)
    scorer.rel_keys = scorer.network.relative_key_tables()
    pool = scorer.network.new_pool(64)
    start = _Hypothesis(dtg.DTGState(model.system), [], [], 0.0)
    scorer._feed(pool, [start], [None], [0])
    (first,) = scorer._word(pool, [start], model.vocab.id(model.words.unkify("the")), 2)
    for remaining, may_end in ((1, False), (0, True)):
        extensions, _ = scorer._select([first], [None], remaining, False)
        ends = [_ends(first.state, scorer.transitions[c][1]) for _, c, _ in extensions]
        assert any(ends) == (may_end and model.system == "standard")  # pop_root with one word on the stack
