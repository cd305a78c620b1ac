"""The adapter's parts: capabilities derive from them, and each method declares its options' only defaults."""

from __future__ import annotations

import argparse

import pytest

from experiments.evaluate.scorer_choice import add_arguments
from experiments.families import get_family, names, source_family
from experiments.families.adapter import Method

SENTENCE = {"perplexity", "score", "surprisal"}
CAPABILITIES = {  # (family, config) -> what it is evaluated on (as the adapters declared it before the parts)
    ("tg", None): SENTENCE | {"rerank", "terminals", "probe", "sample"},
    ("txl-trees", None): SENTENCE | {"rerank", "terminals", "probe", "sample"},
    ("txl-terminals", None): SENTENCE | {"terminals", "probe", "sample"},
    ("tg", "document"): {"perplexity", "terminals", "probe"},
    ("pushdown", None): SENTENCE | {"parse", "dyck"},
    ("pushdown", "dyck"): {"dyck"},
    ("pushdown", "ptb"): SENTENCE | {"parse"},
    ("base-lm", None): SENTENCE | {"dyck"},
    ("base-lm", "ptb"): SENTENCE,
    ("dtg", None): SENTENCE | {"dependency_parse"},
    ("txl-trans", None): SENTENCE | {"dependency_parse"},
    ("palm-u", None): SENTENCE | {"parse"},
    ("awd-lstm", None): SENTENCE,
    ("som", None): SENTENCE | {"parse"},
    ("rnng", None): SENTENCE | {"rerank"},
    ("hf", None): SENTENCE,
    ("proposal-parser", None): {"propose"},
    ("dep-parser", None): {"propose"},
}
CONFIGS = {None: None, "document": {"data": {"level": "document"}}, "dyck": {"data": {"corpus": "dyck"}},
           "ptb": {"data": {"corpus": "ptb"}}}


@pytest.mark.parametrize(("family", "config"), list(CAPABILITIES))
def test_capabilities_are_what_the_parts_offer(family, config):
    assert get_family(family).capabilities(CONFIGS[config]) == CAPABILITIES[family, config]


def test_every_built_in_family_registers_without_a_list():
    assert set(names()) >= {family for family, _ in CAPABILITIES}
    assert source_family("hf:models/gpt2").name == "hf" and source_family("runs/x/best.ckpt") is None


def test_method_defaults_are_declared_once_and_the_cli_leaves_them_unset():
    # the papers' values: TG §3.1's N = 300 (its beam: the official DTG search, 100/10, 15 actions, every word
    # kept); DTG's official beam (100/10, fast-track 0, 15 token steps) and N = 300 (§4.1); Pushdown's beam 300
    beam = {"beam": 100, "word_beam": 10, "max_actions": 15, "fast_track": None}
    assert get_family("tg").method("beam").options == {**beam, "n": 300}
    dtg = get_family("dtg").method("beam").options
    assert {k: dtg[k] for k in beam} == {"beam": 100, "word_beam": 10, "max_actions": 15, "fast_track": 0}
    assert get_family("pushdown").method("beam").options == {"beam": 300}
    for family in ("tg", "txl-trees", "dtg"):
        assert get_family(family).method("proposals").options == {"n": 300}
    for family in ("proposal-parser", "dep-parser"):
        assert get_family(family).proposing().n == 300
    p = argparse.ArgumentParser()
    add_arguments(p)
    args = p.parse_args(["model.ckpt"])
    assert (args.n, args.beam, args.word_beam, args.max_actions, args.fast_track) == (None,) * 5
    given = {"beam": 4, "n": None, "other": 1}
    assert Method("beam", {"beam": 20, "n": 300}).resolve(given) == {"beam": 4, "n": 300}


def test_every_entry_point_reads_the_declared_defaults():
    """The scorer and beam classes, the Dyck evaluation and the CLI's help take the methods' declarations."""
    import inspect

    from experiments.families import declared_defaults
    from experiments.families.pushdown import dyck, scorers
    from experiments.families.pushdown import methods as pushdown
    from experiments.families.tg import methods as tg
    from experiments.families.tg.beam import BeamScorer
    from experiments.families.tg.reference_beam import ReencodingBeamScorer

    for cls in (BeamScorer, ReencodingBeamScorer):
        params = inspect.signature(cls).parameters
        assert {k: params[k].default for k in ("beam", "word_beam", "max_actions")} == \
            {k: tg.BEAM.options[k] for k in ("beam", "word_beam", "max_actions")}
    assert inspect.signature(BeamScorer).parameters["fast_track"].default is tg.BEAM.options["fast_track"]
    assert inspect.signature(scorers.BeamScorer).parameters["beam"].default == pushdown.BEAM.options["beam"] == 300
    assert inspect.signature(dyck.evaluate).parameters["beam"].default == pushdown.DYCK_BEAM == 50
    from experiments.families.rnng import methods as rnng
    from experiments.families.rnng.beam import RNNGBeamScorer

    params = inspect.signature(RNNGBeamScorer).parameters
    assert {k: params[k].default for k in rnng.BEAM.options} == rnng.BEAM.options
    from experiments.families.rnng import cag_methods as cag
    from experiments.families.rnng.cag_beam import CAGBeamScorer

    params = inspect.signature(CAGBeamScorer).parameters
    assert {k: params[k].default for k in cag.BEAM.options} == cag.BEAM.options
    assert declared_defaults("beam") == "100 (cag, dtg, rnng, tg, txl-trans, txl-trees); 300 (pushdown)"
    assert declared_defaults("fast_track") == \
        "5 (cag); 0 (dtg, txl-trans); 1 (rnng); every word kept (tg, txl-trees)"
    assert declared_defaults("n", "propose") == "300 (dep-parser, proposal-parser)"
    p = argparse.ArgumentParser()
    add_arguments(p)
    help_text = " ".join(p.format_help().split())
    # (argparse wraps the help at the hyphen of txl-trees)
    assert "action beam of --method beam (default: the family's paper's: 100 (cag, dtg, rnng, tg, txl-trans, txl-" \
           in help_text and "trees); 300 (pushdown))" in help_text
