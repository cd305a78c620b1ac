from importlib import resources
from pathlib import Path

import pytest

from experiments.config import check_types, config_hash, parse_overrides, resolve_train_config, run_id
from experiments.families import get_family, names
from experiments.presets import load_presets, load_yaml, merge, train_presets_for
from lightning_modules.errors import InputError

BASE = {"family": "tg", "model": {"d_model": 64, "dropout": 0.1, "attention": "dense"},
        "train": {"max_steps": 10, "lr": 1e-3, "deterministic": True}, "runtime": {"data_dir": None}}


def test_overrides_parse_yaml_scalars_and_nest():
    assert parse_overrides(["train.max_steps=200", "model.dropout=0", "runtime.data_dir=/x y", "m.lr=3e-4"]) == {
        "train": {"max_steps": 200}, "model": {"dropout": 0}, "runtime": {"data_dir": "/x y"}, "m": {"lr": 3e-4}}


@pytest.mark.parametrize("bad", ["nokey", "=3", "a..b=1", "train.=1"])
def test_malformed_override(bad):
    with pytest.raises(InputError):
        parse_overrides([bad])


def test_strict_merge_names_the_unknown_key():
    with pytest.raises(InputError) as e:
        merge(BASE, parse_overrides(["train.max_stepz=3"]), strict=True)
    assert e.value.location == "train.max_stepz"


def test_types_checked_with_location():
    cfg = merge(BASE, parse_overrides(["train.max_steps=abc"]), strict=True)
    with pytest.raises(InputError) as e:
        check_types(cfg, BASE)
    assert e.value.location == "train.max_steps"
    check_types(merge(BASE, {"train": {"lr": 1}}), BASE)  # an int fills a float slot
    with pytest.raises(InputError):
        check_types(merge(BASE, {"train": {"deterministic": 1}}), BASE)


def test_hash_ignores_runtime_but_not_model():
    a = config_hash(BASE)
    assert config_hash(merge(BASE, {"runtime": {"data_dir": "/elsewhere"}})) == a
    assert config_hash(merge(BASE, {"model": {"d_model": 65}})) != a
    assert run_id(BASE, 3).startswith("tg-") and run_id(BASE, 3).endswith("-s3")
    assert run_id(BASE, 3) != run_id(BASE, 4)


def test_hash_has_the_runtime_settings_that_change_results_only_when_not_default():
    a = config_hash(BASE)
    assert config_hash(merge(BASE, {"runtime": {"precision": "32-true", "devices": 1, "threads": 4}})) == a
    bf16 = config_hash(merge(BASE, {"runtime": {"precision": "bf16-mixed"}}))
    two = config_hash(merge(BASE, {"runtime": {"devices": 2}}))  # twice the effective batch
    assert len({a, bf16, two}) == 3
    assert config_hash(merge(BASE, {"runtime": {"precision": "bf16-mixed", "data_dir": "/x"}})) == bf16


def test_yaml_errors_have_file_and_line(tmp_path):
    p = tmp_path / "bad.yaml"
    p.write_text("a: 1\nb: [1, 2\nc: 3\n")
    with pytest.raises(InputError) as e:
        load_yaml(p)
    assert e.value.location.startswith(f"{p}:")
    q = tmp_path / "list.yaml"
    q.write_text("- 1\n- 2\n")
    with pytest.raises(InputError):
        load_yaml(q)
    r = tmp_path / "evil.yaml"
    r.write_text("a: !!python/object/apply:os.system ['echo hi']\n")
    with pytest.raises(InputError):
        load_yaml(r)


# -- presets: extends and train_preset ---------------------------------------------------------------------
def write(folder, name, text):
    path = folder / f"{name}.yaml"
    path.write_text(text)
    return path


def test_extends_same_file_other_file_and_chains(tmp_path):
    write(tmp_path, "base", "big:\n  d: 1024\n  layers: 16\n  lr: 1.0e-4\nsmall:\n  extends: big\n  d: 128\n")
    path = write(tmp_path, "variant", "a:\n  extends: base:small\n  lr: 3.0e-4\n  extra: true\n"
                                      "b:\n  extends: a\n  layers: 2\nc:\n  d: 8\n")
    got = load_presets(path)
    assert got == {"a": {"d": 128, "layers": 16, "lr": 3e-4, "extra": True},
                   "b": {"d": 128, "layers": 2, "lr": 3e-4, "extra": True}, "c": {"d": 8}}
    assert list(got["b"]) == ["d", "layers", "lr", "extra"]  # the base's key order, new keys after
    assert load_presets(tmp_path / "base.yaml")["small"] == {"d": 128, "layers": 16, "lr": 1e-4}


@pytest.mark.parametrize(("text", "message", "line"), [
    ("a:\n  extends: a\n", r"a\.extends: a cycle \(p:a -> p:a\)", 2),
    ("a:\n  d: 1\n  extends: b\nb:\n  extends: a\n", r"b\.extends: a cycle \(p:a -> p:b -> p:a\)", 5),
    ("a:\n  extends: nope\n", r"a\.extends: no preset 'nope' in p\.yaml \(known: a\)", 2),
    ("a:\n  extends: other:x\n", r"a\.extends: no presets file other\.yaml beside p\.yaml", 2),
    ("a:\n  extends: q:x\n", r"a\.extends: no preset 'x' in q\.yaml", 2),
    ("a:\n  extends: q:y\n", r"y\.extends: a cycle \(p:a -> q:y -> p:a\)", 2),
    ("a:\n  extends: [b]\nb: {}\n", r"a\.extends: expected PRESET or FILE:PRESET", 2),
    ("a: 3\n", r"a: a preset must be a mapping", 1),
])
def test_extends_errors_name_the_file_line_and_key(tmp_path, text, message, line):
    write(tmp_path, "q", "y:\n  extends: p:a\n")
    path = write(tmp_path, "p", text)
    with pytest.raises(InputError, match=message) as e:
        load_presets(path)
    assert e.value.location.endswith(f".yaml:{line}") and str(tmp_path) in e.value.location


def test_train_preset_named_inherited_or_by_name(tmp_path):
    shared = {"small": {"train": {"max_steps": 1}}, "large": {"train": {"max_steps": 9}}, "runtime": {"x": 1}}
    path = write(tmp_path, "fam", "small:\n  d: 1\nmine:\n  extends: small\n  train_preset: large\n"
                                  "mine-2:\n  extends: mine\nmodel-only:\n  d: 2\n")
    got = train_presets_for(path, shared)
    assert got == {"runtime": {"x": 1}, "small": shared["small"], "mine": shared["large"], "mine-2": shared["large"]}
    assert load_presets(path)["mine-2"] == {"d": 1}  # train_preset is no model setting
    assert train_presets_for(tmp_path / "absent.yaml", shared) is shared  # presets kept in code
    bad = write(tmp_path, "bad", "a:\n  d: 1\n  train_preset: nope\n")
    with pytest.raises(InputError, match=r"a\.train_preset: no data/train preset 'nope'.*known: small, large"):
        train_presets_for(bad, shared)


def shipped(family):
    return get_family(family).model_presets()[0]


def test_shipped_variants_equal_their_explicit_form():
    """The variants written with ``extends`` are the presets they were written out in full."""
    def same(got, want):
        assert got == want and list(got) == list(want)

    tg, txl = shipped("tg"), shipped("txl-trees")
    assert set(tg) == set(txl) == set(shipped("txl-terminals")) == {"bllip", "ptb", "cpu-small"}
    for name, (lo, hi) in {"bllip": (-255, 512), "ptb": (-255, 512), "cpu-small": (-127, 256)}.items():
        same(txl[name], {**tg[name], "relpos": "linear", "min_rel": lo, "max_rel": hi})
        same(shipped("txl-terminals")[name], txl[name])
    dtg, trans = shipped("dtg"), shipped("txl-trans")
    for name, (lo, hi) in {"bllip": (-511, 1024), "ptb": (-511, 1024), "cpu-small": (-255, 512)}.items():
        same(trans[name], {**dtg[name], "relpos": "linear", "min_rel": lo, "max_rel": hi, "arc_input": "arc",
                           "output_head": "joint"})
    pushdown, base = shipped("pushdown"), shipped("base-lm")
    assert list(base) == list(pushdown) == ["bllip", "bllip-official", "wikitrees", "cpu-small", "dyck"]
    for name in base:
        plain = {"pushdown_layers": 0} | ({} if name == "dyck" else {"attachment_loss": False})
        same(base[name], {**pushdown[name], **plain})
    same(shipped("dep-parser"), shipped("proposal-parser"))
    som = shipped("som")
    for name in ("ptb", "cpu-small"):
        same(som[f"{name}-esom"], {**som[name], "disentangled": False})
    # spot values of the explicit files, as they read before extends
    assert tg["bllip"]["d_model"] == 1024 and txl["cpu-small"]["segment_length"] == 128
    assert base["dyck"]["attachment_loss"] is True and base["bllip-official"]["d_ff"] == 8192


def test_every_shipped_presets_file_is_a_family_and_its_presets_train():
    folder = Path(str(resources.files("experiments") / "families"))
    files = sorted(folder.glob("*/presets/*.yaml"))
    stems = {f.stem for f in files}
    assert stems >= {"tg", "txl-trees", "txl-terminals", "pushdown", "base-lm", "dtg", "txl-trans", "som",
                     "proposal-parser", "dep-parser"}
    for family in sorted(stems & set(names())):
        models, where = get_family(family).model_presets()
        assert Path(where).is_file()
        trainable = set(models) & set(get_family(family).train_presets())
        assert trainable >= {"cpu-small"} or family == "pushdown"
        for preset in trainable:
            cfg = resolve_train_config(family, preset)
            assert cfg["model"] == models[preset] and cfg["preset"] == preset
