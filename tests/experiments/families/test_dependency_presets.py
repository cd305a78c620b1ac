"""Each paper's families read its dependency scheme (issue 27): DTG, TXL (trans) and the dependency parser
Stanford basic dependencies, SOM Universal Dependencies; the Collins head-rule trees stay an override."""

from experiments.config import resolve_train_config
from experiments.experiment_spec import load_spec
from experiments.families.dependency_presets import data_presets


def test_the_papers_schemes_by_preset_and_the_collins_override() -> None:
    for family in ("dtg", "txl-trans", "dep-parser"):
        assert resolve_train_config(family, "ptb")["data"]["corpus"] == "ptb-sample-sd"
        assert resolve_train_config(family, "bllip")["data"]["corpus"] == "bllip-lg-sd"
        assert resolve_train_config(family, "ptb", ["data.corpus=ptb-sample-dep"])["data"]["corpus"] == \
            "ptb-sample-dep"
    for preset in ("ptb", "ptb-esom"):
        assert resolve_train_config("som", preset)["data"]["corpus"] == "ptb-sample-ud"
    assert {scheme: data_presets(scheme)["ptb"]["corpus"] for scheme in ("sd", "ud", "collins")} == {
        "sd": "ptb-sample-sd", "ud": "ptb-sample-ud", "collins": "ptb-sample-dep"}


def test_the_reproductions_read_the_papers_schemes() -> None:
    """Every scale's dependency models and Table 3's gold: SD for DTG, UD for SOM."""
    for paper, scheme in (("dtg", "sd"), ("som", "ud")):
        for scale in ("demo", "cpu-small", "paper"):
            spec = load_spec(f"reproduce-{paper}-{scale}")
            corpora = {m.overrides.get("data.corpus") for m in spec.models
                       if m.family in ("dtg", "txl-trans", "dep-parser", "som")}
            corpora.discard("ptb")  # SOM's Table 8 models read the constituency trees
            expected = {None} if (paper, scale) == ("dtg", "paper") else {
                f"{'ptb' if scale == 'paper' else 'ptb-sample'}-{scheme}"}
            assert corpora == expected, (paper, scale, corpora)
    uas = [e for e in load_spec("reproduce-dtg-paper").evaluations if e["name"] == "uas-rerank"]
    assert [e["corpus"] for e in uas] == ["ptb-sd"]
