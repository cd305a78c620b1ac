"""The comparison table (one row per model, metrics that compare across families) and its figures, on run
records written the way training and ``synbench eval`` write them."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from analysis.comparison import GOLD_GAP, GOLD_STRUCTURE, GOLD_WORDS, comparison_table
from analysis.comparison_figures import (
    BLIMP_PHENOMENON_HEATMAP,
    SG_CIRCUIT_HEATMAP,
    SG_VS_PPL,
    write_comparison_figures,
)

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
