"""Learning curves from the aggregate's ``metrics_by_step`` table: mean ± sd over seeds per model, metric and step,
one panel per headline metric, and the report's section only where the analysis drew them."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from analysis.learning_curves import CURVES_FILE, LEARNING_CURVES, curves, write_learning_curves
from analysis.report.learning_curves_section import learning_curves
from analysis.report.sources import read_sources


def steps_table() -> pd.DataFrame:
    """Two models: ``a`` with seeds 0 and 1, ``b`` with seed 0 only; a headline metric, a labelled one, a
    breakdown (not drawn) and a fraction (drawn in percent)."""
    rows = []
    for model, seeds in (("b", (0,)), ("a", (0, 1))):
        for seed in seeds:
            for step in (200, 100):
                rows += [{"model": model, "seed": seed, "step": step, "metric": "ppl", "value": 1000.0 / step + seed},
                         {"model": model, "seed": seed, "step": step, "metric": "sg", "value": step / 400 + seed / 10},
                         {"model": model, "seed": seed, "step": step, "metric": "ppl@gum", "value": 50.0 + seed},
                         {"model": model, "seed": seed, "step": step, "metric": "sg.circuit.x", "value": 0.5}]
    return pd.DataFrame(rows).assign(family="f", run_id="r", experiment="e", data="d", config_hash="h")


def test_mean_and_sd_over_seeds_per_model_metric_and_step_in_headline_order():
    table = curves(steps_table())
    assert list(dict.fromkeys(table["metric"])) == ["ppl", "ppl@gum", "sg"]  # the breakdown is not a curve
    first = table[table["metric"] == "ppl"]
    assert list(zip(first["model"], first["step"])) == [("a", 100), ("a", 200), ("b", 100), ("b", 200)]
    a = first.iloc[0]
    assert (a["n"], a["mean"], a["sd"]) == (2, pytest.approx(10.5), pytest.approx(math.sqrt(0.5)))
    assert first.iloc[2]["n"] == 1 and math.isnan(first.iloc[2]["sd"])  # one seed: no spread


def test_the_figure_and_table_are_written_and_the_report_shows_them(tmp_path):
    written = write_learning_curves(steps_table(), tmp_path)
    figures = [tmp_path / "figures" / f"{LEARNING_CURVES}.{suffix}" for suffix in ("png", "pdf")]
    assert written == [tmp_path / CURVES_FILE, *figures]
    assert pd.read_csv(tmp_path / CURVES_FILE).columns.tolist() == ["model", "metric", "step", "n", "mean", "sd"]
    heading, about, image = learning_curves(read_sources(tmp_path))
    assert heading.text == "Learning curves" and "--checkpoints all" in about.text
    assert image.src == f"figures/{LEARNING_CURVES}.png" and image.pdf == f"figures/{LEARNING_CURVES}.pdf"


def test_nothing_without_evaluated_kept_checkpoints(tmp_path):
    empty = steps_table().iloc[:0]
    breakdowns = steps_table()[lambda t: t["metric"] == "sg.circuit.x"]
    for table in (None, empty, breakdowns):
        assert write_learning_curves(table, tmp_path) == []
    assert list(tmp_path.iterdir()) == [] and learning_curves(read_sources(tmp_path)) == []
