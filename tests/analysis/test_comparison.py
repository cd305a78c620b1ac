"""The comparison table (one row per model, metrics that compare across families) and its figures, on run
records written the way training and ``synbench eval`` write them."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from analysis import comparison_figures
from analysis.comparison import GOLD_GAP, GOLD_STRUCTURE, GOLD_WORDS, comparison_table
from analysis.comparison_figures import (
    BLIMP_PHENOMENON_HEATMAP,
    SG_CIRCUIT_HEATMAP,
    SG_VS_PPL,
    place_labels,
    write_comparison_figures,
)
from analysis.figures import _new_figure

PPL = {("joint", 0): 80.0, ("joint", 1): 90.0, ("string", 0): 100.0, ("string", 1): 104.0}


def tables(tmp_path):
    """(long, wide, run folders) of a joint model (a bound, and its gold-tree value) and a string model."""
    long, wide, dirs = [], [], {}
    for model, family in (("joint", "fam-a"), ("string", "fam-b")):
        for seed in (0, 1):
            run_id = f"{model}-s{seed}"
            metrics = {"ppl": PPL[model, seed], "sg": 0.5 + 0.1 * seed, "sg.circuit.Agreement": 0.6,
                       "blimp.phenomenon.anaphor_agreement": 0.7, "parameters": 1000.0,
                       "train_tokens_per_s": 500.0 + seed, "train_seconds": 10.0, "val_token_ppl": 50.0}
            if model == "joint":
                metrics["ppl@gold-tree"] = PPL[model, seed] - 5 - seed
                metrics["ppl_words_given_tree@gold-tree"] = 40.0 + seed
                metrics["structure_nll_per_word@gold-tree"] = 0.6
            long += [{"run_id": run_id, "model": model, "family": family, "seed": seed, "metric": m, "value": v}
                     for m, v in metrics.items()]
            wide.append({"run_id": run_id, "device": "cpu (1 threads)",
                         "val_token_ppl_convention": f"{family}'s own tokens"})
            folder = tmp_path / run_id / "eval" / "ppl"
            folder.mkdir(parents=True)
            bound = model == "joint"
            (folder / "results.json").write_text(json.dumps({"metrics": {"word_ppl": PPL[model, seed]}, "settings": {
                "method": "proposals" if bound else "exact", "description": "N = 4 proposals" if bound else "exact",
                "scorer_convention": {"bound": bound}}}))
            dirs[run_id] = tmp_path / run_id
    return pd.DataFrame(long), pd.DataFrame(wide), dirs


def test_one_row_per_model_and_metric_with_the_bound_and_its_gold_tree_distance(tmp_path):
    long, wide, dirs = tables(tmp_path)
    table = comparison_table(long, wide, dirs)
    cell = {(r.model, r.metric): r for r in table.itertuples(index=False)}
    gap = cell["joint", GOLD_GAP]
    assert gap.n == 2 and gap.mean == pytest.approx(5.5) and gap.sd == pytest.approx(0.7071, abs=1e-4)
    assert ("string", GOLD_GAP) not in cell and ("string", "ppl@gold-tree") not in cell
    assert cell["joint", GOLD_WORDS].mean == pytest.approx(40.5) and cell["joint", GOLD_STRUCTURE].mean == 0.6
    assert ("string", GOLD_WORDS) not in cell
    assert cell["joint", "ppl"].detail == "upper bound (N = 4 proposals)" and cell["string", "ppl"].detail == "exact"
    assert cell["joint", "ppl"].ci_low <= 85.0 <= cell["joint", "ppl"].ci_high
    assert cell["string", "own_ppl"].mean == 50.0 and cell["string", "own_ppl"].detail == (
        "val_token_ppl: fam-b's own tokens")
    assert cell["joint", "train_seconds"].detail == "device: cpu (1 threads)"
    assert set(table["family"]) == {"fam-a", "fam-b"}
    assert "sg.circuit.Agreement" not in set(table["metric"])  # breakdowns are the heat maps' business


def test_figures_sg_against_perplexity_and_the_heat_maps(tmp_path):
    long, _, _ = tables(tmp_path)
    out = write_comparison_figures(long, tmp_path / "figures")
    assert out.notes == []
    assert sorted(p.name for p in out.paths) == sorted(f"{stem}.{fmt}" for stem in (
        SG_VS_PPL, SG_CIRCUIT_HEATMAP, BLIMP_PHENOMENON_HEATMAP) for fmt in ("png", "pdf"))
    one = long[long["model"] == "joint"].drop(columns="run_id")
    out = write_comparison_figures(one[~one["metric"].str.startswith("blimp")], tmp_path / "one")
    assert out.notes == [f"{SG_VS_PPL}: fewer than two models have both ppl and sg, no figure",
                         f"{BLIMP_PHENOMENON_HEATMAP}: no blimp.phenomenon.* metrics in the table, no figure"]


def test_the_labels_of_sg_against_perplexity_overlap_neither_each_other_nor_the_points(tmp_path, monkeypatch):
    """The compare demo's crowd: two models on one point (their bounds of 4.7e32), three within a pixel of each
    other, the rest packed at perplexity ~5000; each label stays inside the axes."""
    points = {"tg": (4.72e32, 33.87), "txl-trees": (4.63e32, 33.87), "palm-u": (4618.0, 6.45),
              "palm-s": (4618.0, 6.45), "palm-rb": (4675.0, 6.45), "awd-lstm": (4697.0, 11.29),
              "pushdown": (9420.0, 11.29), "esom": (4248.0, 14.52), "dsom": (4737.0, 22.58),
              "base-lm": (6063.0, 22.58), "hf-scratch": (5167.0, 20.97), "txl-terminals": (9143.0, 25.81)}
    fig = _new_figure(7.0, 4.2)
    ax = fig.add_subplot()
    ax.scatter([x for x, _ in points.values()], [y for _, y in points.values()])
    ax.set_xscale("log")
    boxes = place_labels(ax, list(points.values()), list(points))
    frame = ax.get_window_extent()
    assert len(boxes) == len(points)
    assert not [(a, b) for i, a in enumerate(boxes) for b in boxes[i + 1:] if a.overlaps(b)]
    assert all(frame.x0 <= b.x0 and b.x1 <= frame.x1 and frame.y0 <= b.y0 and b.y1 <= frame.y1 for b in boxes)
    centres = ax.transData.transform(list(points.values()))
    assert not any(b.contains(x, y) for b in boxes for x, y in centres)
    # the figure itself places its labels so
    saved = {}
    monkeypatch.setattr(comparison_figures, "_save", lambda fig, out_dir, name: saved.setdefault(name, fig) and [])
    long = pd.DataFrame([{"model": m, "family": m, "seed": 0, "metric": metric, "value": v}
                         for m, (ppl, sg) in points.items() for metric, v in (("ppl", ppl), ("sg", sg / 100))])
    comparison_figures.sg_vs_ppl(long, tmp_path)
    texts = saved[SG_VS_PPL].axes[0].texts
    assert sorted(t.get_text() for t in texts) == sorted(points)
