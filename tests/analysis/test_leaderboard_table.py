"""The leaderboard's table (``analysis.leaderboard``) in the report's units: SG and BLiMP in percent (the JSON
keeps the fractions measured and says so), numbers past 1e6 in scientific notation."""

from __future__ import annotations

from pathlib import Path

import pytest

from analysis.leaderboard import Experiment, Part, markdown, merge


def _experiment(name: str, rows: dict[str, dict[str, list[float]]]) -> Experiment:
    """An experiment's aggregate rows: model -> metric -> one value per seed."""
    runs = [{"run_id": f"{model}-s{seed}", "model": model, "family": f"fam-{model}", "seed": str(seed)}
            for model, metrics in rows.items() for seed in range(len(next(iter(metrics.values()))))]
    long = [{"run_id": f"{model}-s{seed}", "model": model, "metric": metric, "value": str(value)}
            for model, metrics in rows.items() for metric, values in metrics.items()
            for seed, value in enumerate(values)]
    return Experiment(Path(name), name, long, runs, {}, {"ppl": Part("sha", "ptb-sample test, 10 items")})


def test_sg_and_blimp_in_percent_and_huge_perplexities_readable() -> None:
    merged = merge([_experiment("a", {"joint": {"ppl": [2.47e32, 6.97e32], "sg": [0.3226, 0.3548],
                                                "blimp": [0.25, 0.25]}}),
                    _experiment("b", {"string": {"ppl": [60.0, 62.0], "sg": [0.8, 0.82]}})])
    assert merged["units"] == {"ppl": "as measured", "sg": "fraction", "blimp": "fraction"}
    assert merged["rows"][0]["metrics"]["sg"]["mean"] == pytest.approx(0.3387)  # the JSON: as measured
    table = markdown(merged)
    assert table.startswith("| experiment | model | family | seeds | parameters | ppl | sg (%) | blimp (%) |")
    assert "| a | joint | fam-joint | 2 | n/a | 4.72e+32 ± 3.2e+32 | 33.87 ± 2.28 | 25.00 ± 0.00 |" in table
    assert "| b | string | fam-string | 2 | n/a | 61.00 ± 1.41 | 81.00 ± 1.41 | n/a |" in table
