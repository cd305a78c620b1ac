"""``run_probing``: the mdl.csv table from checkpoints and trees (tiny random checkpoints, few epochs)."""

from __future__ import annotations

import importlib.util
import math
from pathlib import Path

import pytest

from analysis.probes import ProbeSettings
from analysis.probing import COLUMNS, run_probing
from analysis.probing_tasks import TaskSettings
from lightning_modules.data.tree import read_bracketed
from lightning_modules.errors import InputError

# tests/ is not a package: the checkpoint writer of test_features is loaded by path (one definition)
_spec = importlib.util.spec_from_file_location("analysis_test_features",
                                               Path(__file__).with_name("test_features.py"))
_features_tests = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_features_tests)
write_checkpoint = _features_tests.write_checkpoint

QUICK = ProbeSettings(batch_size=64, hidden=8, max_epochs=2)
TASKS = TaskSettings(top_k=5, word_content_k=10, word_content_start=10)


@pytest.fixture(scope="module")
def treebank(shared_data):
    folder = shared_data / "ptb_nltk_sample" / "combined"
    train = [t for i in (1, 2, 3, 4) for _, t in read_bracketed(folder / f"wsj_{i:04d}.mrg")]
    dev = [t for _, t in read_bracketed(folder / "wsj_0160.mrg")]
    return train, dev


@pytest.fixture(scope="module")
def models(tmp_path_factory, treebank):
    folder = tmp_path_factory.mktemp("probing")
    train, dev = treebank
    return {f"{f}-model": write_checkpoint(folder / f"{f}.ckpt", f, train + dev, segment_length=64)
            for f in ("tg", "txl-trees", "txl-terminals")}


def test_table_has_every_row_once(models, treebank, tmp_path, capsys):
    train, dev = treebank
    frame = run_probing(models, train, dev, layers=[0, 2], probes=("mlp",), task_settings=TASKS,
                        probe_settings=QUICK, cache_dir=tmp_path, fractions=(0.25, 0.5, 1.0), progress=False)
    assert tuple(frame.columns) == COLUMNS
    keys = ["model", "representation", "task", "layer", "probe"]
    assert not frame.duplicated(keys).any()
    reps = frame.groupby("model")["representation"].agg(lambda r: sorted(set(r))).to_dict()
    assert reps == {"tg-model": ["compose", "stack", "word"], "txl-trees-model": ["closing", "word"],
                    "txl-terminals-model": ["first+last", "word"]}
    # pos on words; the three constituent tasks on each constituent representation; 2 layers
    assert len(frame) == 2 * ((1 + 3 * 2) + (1 + 3) + (1 + 3))
    assert set(frame.loc[frame.representation == "word", "task"]) == {"pos"}
    assert set(frame.layer) == {0, 2} and set(frame.probe) == {"mlp"}
    for row in frame.itertuples():
        assert row.uniform_bits == row.n * math.log2(row.n_classes)
        assert row.compression == pytest.approx(row.uniform_bits / row.online_bits)
        assert 0 <= row.dev_accuracy <= 1
    counts = frame.attrs["probing"]["counts"]
    assert (frame.loc[frame.task == "top_constituents", "n_classes"] == 6).all()
    assert (frame.loc[frame.task == "pos", "n"] == counts["pos"]["train"]).all()
    assert frame.attrs["probing"]["units"].startswith("bits")
    assert capsys.readouterr().err == ""  # quiet without a terminal
    # same inputs and seed: the same numbers (features now from the cache)
    again = run_probing({"tg-model": models["tg-model"]}, train, dev, tasks=["grandparent"], layers=[2],
                        probes=("mlp",), task_settings=TASKS, probe_settings=QUICK, cache_dir=tmp_path,
                        fractions=(0.25, 0.5, 1.0), progress=False)
    before = frame[(frame.model == "tg-model") & (frame.task == "grandparent") & (frame.layer == 2)
                   & (frame.probe == "mlp")].reset_index(drop=True)
    assert again.equals(before)


def test_bad_input(models, treebank):
    train, dev = treebank
    with pytest.raises(InputError, match="no models"):
        run_probing({}, train, dev)
    with pytest.raises(InputError, match="unknown probe"):
        run_probing(models, train, dev, probes=("bilinear",))
    with pytest.raises(InputError, match="training and dev trees"):
        run_probing(models, train, [], task_settings=TASKS)
