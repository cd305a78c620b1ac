import pytest

from experiments.config import check_types, config_hash, load_yaml, merge, parse_overrides, run_id
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
