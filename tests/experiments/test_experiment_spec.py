"""Experiment specs: seeds syntax, validation errors with FILE:LINE and key, grid expansion, run ids."""

from __future__ import annotations

import textwrap

import pytest

from experiments.config import parse_overrides, run_id
from experiments.experiment_spec import expand, format_override, load_spec, parse_seeds
from experiments.presets import configs_dir
from lightning_modules.errors import InputError


def resolve(family: str, preset: str | None, overrides: list[str]) -> dict:
    """A stand-in for train's resolver: family, preset and the parsed overrides (what the run id hashes)."""
    cfg = {"family": family, "preset": preset or "cpu-small", **parse_overrides(overrides)}
    if cfg.get("model", {}).get("d_model") == "unknown":
        raise InputError("expected int, got 'unknown'", "model.d_model")
    return cfg


def write(tmp_path, text: str, name: str = "exp.yaml"):
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return path


@pytest.mark.parametrize(
    "value, expected",
    [
        (7, (7,)),
        ("0-3", (0, 1, 2, 3)),
        ("0-2,10-11", (0, 1, 2, 10, 11)),
        ([5, "1-2", 9], (5, 1, 2, 9)),
        (" 3 - 4 ", (3, 4)),
    ],
)
def test_parse_seeds(value, expected):
    assert parse_seeds(value) == expected


@pytest.mark.parametrize(
    "value, message",
    [
        ("5-2", "empty seed range"),
        ("a-b", "bad seed"),
        ([1, "0-2"], "seed 1 is listed twice"),
        (-1, "bad seed"),
        (True, "expected a seed"),
        ([], "no seeds"),
        ("0-999999", "more than"),
        (1.5, "expected a seed"),
    ],
)
def test_parse_seeds_rejects(value, message):
    with pytest.raises(InputError, match=message) as e:
        parse_seeds(value, "x.yaml:3")
    assert e.value.location == "x.yaml:3"


@pytest.mark.parametrize(
    "value",
    [
        20,
        3e-4,
        1e-5,
        0.1,
        True,
        None,
        "tiny",
        "yes",
        "1e3",
        "a: b",
        "x=y",
        "",
        [1, 2],
        ["a b", "c"],
        "/tmp/with space/x",
        "07",
        "null",
        "it's",
    ],
)
def test_format_override_round_trips_through_parse_overrides(value):
    assert parse_overrides([format_override("a.b", value)]) == {"a": {"b": value}}


def test_shipped_smoke_spec_expands(tmp_path):
    spec = load_spec("smoke")
    assert spec.name == "smoke" and [m.family for m in spec.models] == ["tg", "txl-terminals"]
    runs = expand(spec, resolve)
    assert len(runs) == 2 * 4 and [r.seed for r in runs[:4]] == [0, 1, 2, 3]
    assert {r.family for r in runs} == {"tg", "txl-terminals"}
    first = runs[0]
    assert first.run_id == run_id(resolve("tg", first.preset, list(first.overrides)), 0)
    assert "data.corpus=ptb-sample" in first.overrides and first.data == "ptb-sample"
    assert len({r.run_id for r in runs}) == len(runs)
    assert expand(spec, resolve, seeds=(10, 11))[1].seed == 11


def test_grid_is_models_by_data_by_seeds_with_nested_overrides(tmp_path):
    path = write(
        tmp_path,
        """\
        models:
          - family: tg
            name: tg-small
            overrides: {model: {n_layers: 2}, train.lr: 0.001}
          - {family: txl}
        data:
          - ptb-sample
          - {name: ewt, overrides: {data.corpus: ud-ewt, data.max_len: 40}}
        seeds: 0-1
        evaluations: [perplexity, {name: sg, suites: all}]
        """,
    )
    runs = expand(load_spec(path), resolve)
    assert [(r.model, r.data, r.seed) for r in runs[:4]] == [
        ("tg-small", "ptb-sample", 0),
        ("tg-small", "ptb-sample", 1),
        ("tg-small", "ewt", 0),
        ("tg-small", "ewt", 1),
    ]
    assert runs[2].overrides == (
        "model.n_layers=2",
        "train.lr=0.001",
        "data.corpus=ud-ewt",
        "data.max_len=40",
    )
    assert runs[2].evaluations == ({"name": "perplexity"}, {"name": "sg", "suites": "all"})
    assert len(runs) == 8 and len({r.run_id for r in runs}) == 8


@pytest.mark.parametrize(
    "text, line, message",
    [
        ("models: []\nseeds: 1\n", 1, "models: expected a non-empty list"),
        (
            "models:\n  - family: tg\n    overides: {a: 1}\nseeds: 1\n",
            3,
            r"models\[0\].overides: unknown key",
        ),
        ("models:\n  - name: x\nseeds: 1\n", 2, r"models\[0\]: missing 'family'"),
        ("models:\n  - family: tg\nseeds: 5-2\n", 3, "empty seed range"),
        ("models:\n  - family: tg\n", None, "missing 'seeds'"),
        ("models:\n  - family: tg\nseeds: 1\nseed: 2\n", 4, "seed: unknown key"),
        ("models:\n  - family: tg\n    overrides: {bad key: 1}\nseeds: 1\n", 3, "bad config key"),
        ("models:\n  - family: tg\n  - family: tg\nseeds: 1\n", 3, "two models are named 'tg'"),
        ("models:\n  - family: tg\nseeds: 1\nlauncher: {pbs: {}}\n", 4, "launcher.pbs: unknown key"),
        (
            "models:\n  - family: tg\nseeds: 1\ndata: [{overrides: {}}]\n",
            4,
            "data\\[0\\]: expected a corpus name",
        ),
        ("models:\n  - family: 'tg grammar'\nseeds: 1\n", 2, "expected a name"),
        ("models:\n  - source: models/gpt2\nseeds: 1\n", 2, r"models\[0\].source: expected hf:DIR"),
        ("models:\n  - source: 'hf:'\nseeds: 1\n", 2, r"models\[0\].source: expected hf:DIR"),
        ("models:\n  - source: [hf:x]\nseeds: 1\n", 2, r"models\[0\].source: expected hf:DIR"),
    ],
)
def test_validation_errors_name_file_line_and_key(tmp_path, text, line, message):
    path = write(tmp_path, text)
    with pytest.raises(InputError, match=message) as e:
        load_spec(path)
    assert e.value.location == (f"{path}:{line}" if line else str(path))


def test_resolver_errors_point_at_the_model_entry(tmp_path):
    path = write(
        tmp_path,
        "seeds: 0\nmodels:\n  - family: tg\n  - family: txl\n    overrides: {model.d_model: unknown}\n",
    )
    with pytest.raises(InputError, match="model 'txl': model.d_model: expected int") as e:
        expand(load_spec(path), resolve)
    assert e.value.location == f"{path}:4"


def test_duplicate_runs_and_clashing_overrides_are_errors(tmp_path):
    path = write(tmp_path, "seeds: 0\nmodels:\n  - {family: tg, name: a}\n  - {family: tg, name: b}\n")
    with pytest.raises(InputError, match="b and a are the same run") as e:
        expand(load_spec(path), resolve)
    assert e.value.location == f"{path}:4"
    path = write(
        tmp_path, "seeds: 0\nmodels:\n  - {family: tg, overrides: {data.corpus: x}}\ndata: [ptb-sample]\n"
    )
    with pytest.raises(InputError, match="sets data.corpus, which model 'tg' sets too"):
        expand(load_spec(path), resolve)


def test_unknown_spec_names_shipped_ones(tmp_path):
    with pytest.raises(InputError, match="no experiment 'nope'.*smoke"):
        load_spec("nope")
    with pytest.raises(InputError, match="not found"):
        load_spec(tmp_path / "missing.yaml")
    bad = write(tmp_path, "models: [\n")
    with pytest.raises(InputError, match="invalid YAML") as e:
        load_spec(bad)
    assert e.value.location.startswith(str(bad) + ":")


@pytest.mark.parametrize("name", sorted(p.stem for p in (configs_dir() / "experiment").glob("*.yaml")))
def test_every_shipped_spec_is_valid_and_expands(name):
    """Each shipped experiment validates and expands to distinct runs (its mistakes show here, not hours in)."""
    spec = load_spec(name)
    runs = expand(spec, resolve)
    assert spec.name == name and runs and len({r.run_id for r in runs}) == len(runs)
