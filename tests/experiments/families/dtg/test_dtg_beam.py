"""The DTG / TXL (trans) word-synchronous beam: it equals a step-by-step port of the official loop
(``reference_beam.py``) at narrow beams, with and without fast-track and with few token steps (re-ranked
completions and two-token arcs both change these numbers), under both pop_root rules; with beams wide enough to
keep everything it sums p(x, a) over every transition sequence the system and the pop_root rule allow within
the token steps (checked against full forward passes of each sequence: 15 steps for every sequence of three
words, 3 for the four-word ones with at most one arc between words), its prefix values add up to the total, and
narrow beams give a lower bound; eval sg/blimp run through it and record the pop_root rule."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from experiments.config import resolve_train_config
from experiments.families import get_family
from experiments.families.dtg.beam import (
    END,
    DTGBeamScorer,
    _ends,
    _Hypothesis,
    _transition,
    token_records,
    word_pieces,
)
from experiments.families.dtg.reference_beam import OfficialBeamPort, _prefix_example
from experiments.train import train
from lightning_modules.data.dependency import DepTree
from lightning_modules.families.dtg import encoding as dtg
from tests.tolerances import close32

TINY = ["model.d_model=32", "model.n_layers=2", "model.n_heads=2", "model.d_ff=64", "model.warmup_steps=4",
        "model.total_steps=40", "model.peak_lr=3e-3", "train.batch_size=4", "train.max_steps=8",
        "train.val_every=8", "train.ckpt_every=8", "runtime.wandb=disabled", "runtime.progress=false",
        "runtime.threads=1",
        # the network these narrow-beam assertions (chance properties of the trained weights) were written for:
        # TG's, not the official port's the presets now use (its beam: test_dtg_official.py)
        "model.ffn_activation=gelu", "model.scale_embeddings=true", "model.attention_output_bias=true",
        "model.output_head=joint"]
ROW = "{i}\t{w}\t_\t_\t_\t_\t{h}\t_\t_\t_\n"
SENTENCES = [("the cat sat .", (2, 3, 0, 3)), ("a dog ran home .", (2, 3, 0, 3, 3)), ("dogs ran", (2, 0)),
             ("the big dog ran", (3, 3, 4, 0))]


_TRAINED: dict[tuple[str, str], object] = {}


def trained(family: str, system: str, tmp_path_factory):
    """A tiny checkpoint of ``family`` over ``system`` trained on SENTENCES (once per module), loaded."""
    if (family, system) not in _TRAINED:
        folder = tmp_path_factory.mktemp(f"{family}-{system}")
        path = folder / "small.conllu"
        path.write_text("".join("".join(ROW.format(i=i, w=w, h=h) for i, (w, h) in enumerate(zip(s.split(), hs), 1))
                                + "\n" for s, hs in SENTENCES * 3))
        cfg = resolve_train_config(family, "cpu-small", [*TINY, f"data.corpus={path}", "data.train_split=file",
                                                         "data.valid_split=file", f"model.system={system}"])
        train(cfg, seed=1, run_dir=folder / "run")
        loaded = get_family(family).load(folder / "run" / "checkpoints" / "best.ckpt")
        loaded.path = folder / "run" / "checkpoints" / "best.ckpt"
        _TRAINED[family, system] = loaded
    return _TRAINED[family, system]


@pytest.fixture(params=[("dtg", "standard"), ("dtg", "eager"), ("dtg", "swift"), ("txl-trans", "standard")])
def model(request, tmp_path_factory):
    return trained(*request.param, tmp_path_factory)


@pytest.fixture(params=[("dtg", "standard"), ("txl-trans", "standard")])
def official_model(request, tmp_path_factory):
    """The official code's two models: arc-standard DTG and TXL (trans)."""
    return trained(*request.param, tmp_path_factory)


def all_sequences(model, n: int, rule: str = "official") -> list[list[dtg.Transition]]:
    """Every sequence over n words that may end (``</s>`` next) whose transitions the vocabulary has, under the
    pop_root ``rule`` (what the beam may take)."""
    known = [t for t in (_transition(tok) for tok in model.vocab.tokens) if t is not None]
    out, stack = [], [[]]
    while stack:
        prefix = stack.pop()
        state = dtg.DTGState(model.system, rule)
        for t in prefix:
            state.apply(t)
        remaining = n - state.words
        if not remaining and state.can_end():
            out.append(prefix)
        if remaining and state.check(dtg.GEN) is None:
            stack.append(prefix + [dtg.GEN])
        stack.extend(prefix + [t] for t in known if state.check(t) is None and not (remaining and _ends(state, t)))
    return out


def arcs_per_gap(sequence: list[dtg.Transition]) -> list[int]:
    """The arcs before each word, those after the last word (before pop_root) and those after pop_root."""
    gaps, arcs = [], 0
    for t in sequence:
        if t.action in (dtg.LEFT_ARC, dtg.RIGHT_ARC):
            arcs += 1
        elif t.action in ("gen", dtg.POP_ROOT):
            gaps.append(arcs)
            arcs = 0
    return [*gaps, arcs]


def sequence_logprob(model, words: list[str], transitions: list[dtg.Transition]) -> float:
    """log p(x, a) with ``</s>``: a sequence of one complete tree through the training encoding, any other
    (pop_root on a larger stack, arcs after it, words left unattached) from its tokens' records."""
    try:
        heads = dtg.decode(transitions, model.system)
    except (ValueError, KeyError):
        return records_logprob(model, words, transitions)
    example = model._encode(DepTree(tuple(words), heads, ("_",) * len(words)), transitions)
    return float(model.label_logprobs([example])[0].sum())


def records_logprob(model, words: list[str], transitions: list[dtg.Transition]) -> float:
    """log p(x, a) with ``</s>`` from one forward pass over the sequence's token records (official rule)."""
    state = dtg.DTGState(model.system, "official")
    ids = word_pieces(model, words)
    records = token_records(model, [], state, None)
    reads, targets = [], []
    for t in transitions:  # a word's first piece read after the last token, each later one after the piece before
        word = ids[state.words] if t.action == "gen" else [model.vocab.id(t.token())]
        reads += [len(records) - 1 + k for k in range(len(word))]
        targets += word
        records += token_records(model, [r[0] for r in records], state, t, word if t.action == "gen" else ())
    reads.append(len(records) - 1)
    targets.append(model.vocab.id(dtg.EOS))
    (rows,) = model.distributions([_prefix_example(records, model.family == "txl-trans")], [reads])
    return sum(float(row[target]) for row, target in zip(rows, targets))


def check_sums(model, words: list[str], steps: int, sequences: list[list[dtg.Transition]],
               rule: str = "official") -> float:
    exact = math.log(sum(math.exp(sequence_logprob(model, words, s)) for s in sequences))
    (score,) = DTGBeamScorer(model, 10_000, 10_000, steps, 0, pop_root=rule).score([words])
    assert score.total == close32(exact)
    assert score.extra["trees"] == len(sequences)
    assert sum(score.word_logprobs) + score.end_logprob == pytest.approx(score.total)
    assert all(v <= 1e-9 for v in score.word_logprobs)
    return score.total


def test_wide_beam_sums_every_sequence(model) -> None:
    sequences = all_sequences(model, 3)
    assert len(sequences) >= 7
    check_sums(model, ["the", "dog", "sat"], 15, sequences)


def test_the_pop_root_rules_differ(official_model) -> None:
    """single-word: pop_root on a one-word stack, complete trees only; official: pop_root on any stack with arcs
    after it (and words left unattached), so more sequences, a larger sum, and the best tree still complete."""
    words = ["the", "dog", "sat"]
    official, single = all_sequences(official_model, 3), all_sequences(official_model, 3, "single-word")
    assert set(map(tuple, single)) < set(map(tuple, official))
    pop, right = dtg.Transition(dtg.POP_ROOT), dtg.Transition(dtg.RIGHT_ARC)
    assert [dtg.GEN] * 3 + [pop, right] in official  # "sat" under "dog" by pop_root, "dog" under the root
    assert [dtg.GEN] * 3 + [pop] in official  # "the" and "dog" left unattached
    assert check_sums(official_model, words, 15, official) > check_sums(official_model, words, 15, single,
                                                                         "single-word")
    (score,) = DTGBeamScorer(official_model, 10_000, 10_000, 15, 0).score([words])
    heads = [int(line.split("\t")[6]) for line in score.best_tree.strip().splitlines()]
    assert sorted(heads).count(0) == 1 and len(heads) == 3
    # at a narrow beam the port of the official loop differs between the rules as the cached beam does
    sentence = [["a", "big", "cat", "ran", "home", "."]]
    totals = {rule: (DTGBeamScorer(official_model, 6, 3, 15, 0, pop_root=rule).score(sentence)[0].total,
                     OfficialBeamPort(official_model, 6, 3, 15, 0, pop_root=rule).score(sentence)[0].total)
              for rule in dtg.POP_ROOT_RULES}
    assert all(ours == close32(port) for ours, port in totals.values())
    assert totals["official"][0] != close32(totals["single-word"][0])


@pytest.mark.parametrize("rule", dtg.POP_ROOT_RULES)
def test_token_steps_bound_the_arcs_between_terminals(tmp_path_factory, rule: str) -> None:
    """3 token steps: a word after at most one doubled arc; single-word: pop_root after at most two (2 x 3 - 1
    steps); official: pop_root after at most one, and at most one after it."""
    model = trained("dtg", "standard", tmp_path_factory)
    sequences = all_sequences(model, 4, rule)
    closing = [1, 1] if rule == "official" else [2, 0]
    kept = [s for s in sequences if max(arcs_per_gap(s)[:4]) <= 1
            and all(a <= b for a, b in zip(arcs_per_gap(s)[4:], closing))]
    assert 0 < len(kept) < len(sequences)
    check_sums(model, ["the", "big", "dog", "ran"], 3, kept, rule)


@pytest.mark.parametrize("rule", dtg.POP_ROOT_RULES)
@pytest.mark.parametrize(("beam", "word_beam", "steps", "fast_track"), [(6, 3, 15, 0), (6, 3, 5, 0), (5, 2, 11, 2)])
def test_equals_the_port_of_the_official_loop(official_model, beam: int, word_beam: int, steps: int,
                                              fast_track: int, rule: str) -> None:
    model = official_model
    sentences = [["a", "big", "cat", "ran", "home", "."], ["the", "dog", "sat", "."]]
    ours = DTGBeamScorer(model, beam, word_beam, steps, fast_track, pop_root=rule).score(sentences)
    port = OfficialBeamPort(model, beam, word_beam, steps, fast_track, pop_root=rule).score(sentences)
    for mine, theirs, words in zip(ours, port, sentences):
        assert np.cumsum(mine.word_logprobs) == close32(theirs.prefix[: len(words)])
        assert mine.total == close32(theirs.total)


def test_a_word_no_hypothesis_generates_is_minus_inf_as_in_the_port(official_model) -> None:
    """Narrow beams with few token steps, fast-track 0: where every kept hypothesis spends the steps on
    transitions, the word, every later word and the total are -inf, as in the official loop (its port)."""
    model = official_model
    sentences = [["a", "big", "cat", "ran", "home", "."], ["the", "cat", "sat", "on", "the", "mat"]]
    unreached = 0
    for beam, word_beam, steps in ((1, 1, 1), (2, 1, 2), (2, 2, 3)):
        ours = DTGBeamScorer(model, beam, word_beam, steps, 0).score(sentences)
        port = OfficialBeamPort(model, beam, word_beam, steps, 0).score(sentences)
        for mine, theirs, words in zip(ours, port, sentences):
            assert np.cumsum(mine.word_logprobs) == close32(theirs.prefix[: len(words)])
            assert mine.total == close32(theirs.total)
            dead = [k for k, v in enumerate(mine.word_logprobs) if v == -math.inf]
            if dead:  # from the first unreached word on, every word; no tree
                assert dead == list(range(dead[0], len(words))) and mine.total == -math.inf
                assert np.isfinite(mine.word_logprobs[: dead[0]]).all() and mine.best_tree is None
                assert mine.extra["unreached_words"] == len(dead) and mine.extra["trees"] == 0
                unreached += 1
    assert unreached >= 2


def test_narrow_beam_is_a_lower_bound_and_fast_track(model) -> None:
    words = ["a", "big", "cat", "ran", "home", "."]
    wide, narrow = (DTGBeamScorer(model, b, w, 15, 0).score([words])[0] for b, w in ((200, 50), (4, 2)))
    assert narrow.total <= wide.total + 1e-9 and np.isfinite(narrow.total)
    (tracked,) = DTGBeamScorer(model, 10, 3, 15, 2).score([words])
    assert np.isfinite(tracked.total) and tracked.total <= wide.total + 1e-9
    heads = [int(line.split("\t")[6]) for line in tracked.best_tree.strip().splitlines()]
    assert DepTree(tuple(words), tuple(heads), ("_",) * len(words)).is_projective()


def test_eval_blimp_and_sg_through_the_beam(model, tmp_path: Path, capsys, prepared_data_dir: Path) -> None:
    from experiments.cli import main

    standard = model.system == "standard"
    for task, extra, rule in (
            ("blimp", ["--pairs-per-paradigm", "1", "--paradigms", "anaphor_gender_agreement"], "official"),
            ("sg", ["--items-per-suite", "1", "--suites", "number_prep", "--pop-root", "single-word"], "single-word")):
        assert main(["eval", task, str(model.path), "--beam", "8", "--word-beam", "3", "--max-actions", "11",
                     "--data-dir", str(prepared_data_dir), "--json", "--out", str(tmp_path / task), *extra]) == 0
        result = json.loads(capsys.readouterr().out)
        settings = result["settings"]
        assert settings["method"] == "beam" and settings["fast_track"] == 0  # the method's default
        assert settings["max_actions"] == 11 and settings["max_actions_counts"] == "tokens"
        # arc-standard's pop_root rule (the official by default), in the settings and the description
        assert settings.get("pop_root") == (rule if standard else None)
        assert (f"pop_root {rule}" in settings["description"]) == standard


def test_no_transition_ends_the_sequence_while_words_remain(model) -> None:
    scorer = DTGBeamScorer(model, 50, 50, 3, 0)
    scorer.step_params = scorer.network.step_parameters()
    pool = scorer.network.new_pool(64)
    start = _Hypothesis(dtg.DTGState(model.system), [], [], 0.0)
    scorer._run(pool, scorer._feed([start], [None], ()))
    the = model.vocab.id(model.words.unkify("the"))
    (first,) = scorer._run(pool, scorer._group([start], the, 3))
    scorer._run(pool, scorer._feed([first], [first.pending], [the]))
    first.spent, first.done = 0, False
    for target, may_end in ((model.vocab.id(model.words.unkify("dog")), False), (END, True)):
        _, _, made = scorer._candidates([first], target, 0)
        ends = [kind == "extend" and _ends(first.state, t) or kind == "complete" and t is not None
                and t.action != "gen" for _, kind, t in made]
        assert any(ends) == (may_end and model.system == "standard")  # pop_root with one word on the stack


def strict_json(text: str) -> object:
    """Parse JSON as the standard has it: no Infinity, no NaN."""
    def refuse(constant: str) -> None:
        raise ValueError(f"{constant} is not JSON")

    return json.loads(text, parse_constant=refuse)


def test_words_of_probability_zero_through_sg_ppl_and_blimp(tmp_path_factory, tmp_path: Path, capsys,
                                                             prepared_data_dir: Path) -> None:
    """A beam of 1 with one token step loses words (TXL (trans) takes an arc where it must generate): SG, BLiMP
    and the perplexity bound write valid JSON (null for the infinite values), count them, and SG's scores read
    back from surprisals.jsonl equal the model route's."""
    from experiments.cli import main
    from experiments.evaluate.sg import default_suites_dir, load_suites, read_surprisals, score
    from experiments.evaluate.sg_eval import select

    model = trained("txl-trans", "standard", tmp_path_factory)
    capsys.readouterr()  # training's output
    narrow = ["--beam", "1", "--word-beam", "1", "--max-actions", "1", "--data-dir", str(prepared_data_dir),
              "--json"]
    corpus = model.path.parents[2] / "small.conllu"
    runs = {"sg": ["--items-per-suite", "2", "--suites", "number_prep,reflexive_src_fem"],
            "blimp": ["--pairs-per-paradigm", "2", "--paradigms", "anaphor_gender_agreement"],
            "ppl": ["--corpus", str(corpus), "--split", "file", "--method", "beam"]}
    results = {}
    for task, extra in runs.items():
        assert main(["eval", task, str(model.path), *narrow, "--out", str(tmp_path / task), *extra]) == 0
        results[task] = strict_json(capsys.readouterr().out)
        strict_json((tmp_path / task / "results.json").read_text())
        for name in ("items.jsonl", *(("surprisals.jsonl",) if task == "sg" else ())):
            for line in (tmp_path / task / name).read_text().splitlines():
                strict_json(line)
    sg = results["sg"]
    assert sg["zero_probability_words"] > 0 and "probability 0" in sg["headline"]
    surprisals = [strict_json(line) for line in (tmp_path / "sg" / "surprisals.jsonl").read_text().splitlines()]
    assert any(r["surprisal"] is None and r["infinite"] is True for r in surprisals)
    suites = select(load_suites(default_suites_dir(str(prepared_data_dir))), ["number_prep", "reflexive_src_fem"], 2)
    assert score(suites, read_surprisals(tmp_path / "sg" / "surprisals.jsonl", suites))["suites"] == sg["suites"]
    assert results["blimp"]["metrics"]["zero_probability_sentences"] > 0
    ppl = results["ppl"]["metrics"]
    assert ppl["zero_probability_sentences"] > 0 and ppl["word_ppl"] is None and ppl["ppl_end_counted"] is None
    assert results["ppl"]["headline"].startswith("PPL <= inf (")
    from experiments.evaluate import tasks  # the tables read the infinite bound as +inf, never as a missing value
    assert tasks.get("ppl").flatten(ppl)["ppl"] == float("inf")
