"""Figures: PNG + PDF of each, written atomically; missing metrics, models, tables are notes, not errors."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from analysis import figures
from lightning_modules.errors import InputError

MODELS = ("txl-terminals", "tg", "txl-trees")  # not in the paper's order: figures must reorder them


def long_table(seeds: int = 3, metrics: dict[str, float] | None = None) -> pd.DataFrame:
    metrics = metrics or {"ppl": 60.0, "sg": 0.7, "f1": 88.0, "sg.circuit.Agreement": 0.8,
                          "sg.circuit.Licensing": 0.6, "best_val_loss": 3.1}
    rng = np.random.default_rng(0)
    rows = [{"model": model, "seed": seed, "metric": metric, "value": base * (1 + 0.02 * rng.normal())}
            for model in MODELS for seed in range(seeds) for metric, base in metrics.items()]
    return pd.DataFrame(rows)


def mdl_table() -> pd.DataFrame:
    rows = []
    for model, representations in (("tg", ("compose", "stack")), ("txl-trees", ("cnt",))):
        for rep in representations:
            for task in ("word_content", "pos"):
                for layer in range(3):
                    for probe in ("linear", "mlp"):
                        online = 1000.0 - 100 * layer - (50 if probe == "mlp" else 0)
                        rows.append({"model": model, "representation": rep, "task": task, "layer": layer,
                                     "probe": probe, "n": 200, "n_classes": 8, "uniform_bits": 600.0,
                                     "online_bits": online, "compression": 600.0 / online,
                                     "dev_accuracy": 0.5})
    return pd.DataFrame(rows)


REGRESSIONS = {
    "frequency": {
        "name": "frequency", "n": 500, "r2": 0.05, "adj_r2": 0.045,
        "coefficients": [
            {"name": "HighFreq", "coef": -0.05, "se": 0.01, "t": -5.0, "p": 1e-6, "count": 400},
            # to_dict writes non-finite values as null
            {"name": "MediumFreq", "coef": -0.2, "se": None, "t": None, "p": None, "count": 100},
        ],
        "dropped": [{"name": "LowFreq", "reason": "no terminal in this bucket"}],
    },
    "copying": {"skipped": "no document-level models"},
}


def test_every_figure_is_written_as_png_and_pdf(tmp_path) -> None:
    out = figures.write_figures(tmp_path, long=long_table(), mdl=mdl_table(), regressions=REGRESSIONS)
    stems = (figures.DISTRIBUTIONS, figures.SG_CIRCUITS, figures.MDL_CODE_LENGTH, figures.MDL_COMPRESSION,
             figures.REGRESSION_COEFFICIENTS)
    assert out.paths == [tmp_path / f"{stem}.{fmt}" for stem in stems for fmt in ("png", "pdf")]
    for path in out.paths:
        magic = b"\x89PNG" if path.suffix == ".png" else b"%PDF"
        assert path.read_bytes().startswith(magic), path
    # only the figures and the notes: no temporary file left behind
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([p.name for p in out.paths] + ["notes.json"])
    assert "regression_coefficients: copying: skipped: no document-level models" in out.notes
    assert "metric_distributions: metric 'blimp' not in the table, skipped" in out.notes
    assert json.loads((tmp_path / "notes.json").read_text()) == out.notes


def test_single_seed_gets_points_without_a_box_and_models_in_the_paper_order(tmp_path, monkeypatch) -> None:
    saved = {}

    def keep(fig, out_dir, name):
        saved[name] = fig
        return []

    monkeypatch.setattr(figures, "_save", keep)
    long = long_table(seeds=1, metrics={"sg": 0.7, "ppl": 60.0})
    long = long[~((long["model"] == "txl-trees") & (long["metric"] == "ppl"))]
    out = figures.seed_distributions(long, None, tmp_path)
    assert "metric_distributions: no 'ppl' values for model 'txl-trees'" in out.notes
    ppl, sg = saved[figures.DISTRIBUTIONS].axes[:2]
    assert [t.get_text() for t in sg.get_xticklabels()] == ["tg", "txl-trees", "txl-terminals"]
    assert [t.get_text() for t in ppl.get_xticklabels()] == ["tg", "txl-terminals"]
    assert ppl.get_yscale() == "log" and sg.get_yscale() == "linear"  # perplexities span orders of magnitude
    assert len(sg.lines) == 0 and len(sg.collections) == 3  # one scatter per model, no box lines
    tg_sg = long[(long["model"] == "tg") & (long["metric"] == "sg")]["value"].iloc[0]
    assert sg.collections[0].get_offsets()[0][1] == pytest.approx(100 * tg_sg)  # fractions in percent
    saved.clear()
    figures.seed_distributions(long_table(seeds=3, metrics={"sg": 0.7}), ["sg"], tmp_path)
    assert len(saved[figures.DISTRIBUTIONS].axes[0].lines) > 0  # boxes from 2 seeds on


def test_the_models_without_a_metric_are_one_note(tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(figures, "_save", lambda fig, out_dir, name: [])
    long = long_table(seeds=1, metrics={"sg": 0.7, "ppl": 60.0})
    out = figures.seed_distributions(long[~((long["model"] != "tg") & (long["metric"] == "ppl"))], None, tmp_path)
    assert [n for n in out.notes if "'ppl'" in n] == [
        "metric_distributions: no 'ppl' values for models 'txl-trees', 'txl-terminals'"]
    assert figures.is_perplexity("ppl@gold-tree") and figures.is_perplexity("val_ppl")
    assert not figures.is_perplexity("ppl_gold_gap") and not figures.is_perplexity("sg")


def test_missing_tables_and_metrics_are_notes_not_errors(tmp_path) -> None:
    long = long_table(metrics={"best_val_loss": 3.0})
    skipped = {"copying": {"skipped": "no docs"}}
    out = figures.write_figures(tmp_path, long=long, mdl=None, regressions=skipped)
    assert out.paths == []
    assert any("none of the metrics" in note for note in out.notes)
    assert "sg_circuits: no sg.circuit.* metrics in the table, no figure" in out.notes
    assert "mdl_code_length: no MDL rows, no figures" in out.notes
    assert "regression_coefficients: no fitted regression, no figure" in out.notes
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.json"]


def test_a_table_without_its_columns_is_an_input_error(tmp_path) -> None:
    with pytest.raises(InputError, match="lacks the column"):
        figures.seed_distributions(pd.DataFrame({"model": ["tg"], "value": [1.0]}), None, tmp_path)
    with pytest.raises(InputError, match="online_bits"):
        figures.code_lengths(mdl_table().drop(columns="online_bits"), tmp_path)
