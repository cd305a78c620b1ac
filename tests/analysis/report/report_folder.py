"""A small but complete analysis folder for the report's tests (imported by basename, like ``tg_golden``)."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from analysis import figures
from analysis.statistics import NOT_COMPARED

EVIL = "<script>alert(1)</script>"
REDUCED = ["N = 10 proposals (paper: 300)", "3 seeds (paper: 100)", "4 layers, d_model 128 (paper: 16)"]


def write_csv(path: Path, rows: list[dict]) -> None:
    pd.DataFrame(rows).to_csv(path, index=False)


def analysis_folder(root: Path, with_figures: bool = False) -> Path:
    """A small but complete analysis folder: 3 models (one with an HTML label) x 3 seeds, MDL, regressions."""
    folder = root / "exp" / "analysis"
    folder.mkdir(parents=True)
    models = ["txl-terminals", "tg", "txl-trees", EVIL]
    settings = {
        "experiment": "tg-demo", "scale": "demo", "seeds": [0, 1, 2], "data": ["ptb-sample"], "created": "1",
        "models": {m: {"family": "tg", "level": "sentence", "parameters": 1234567} for m in models},
        "reduced": REDUCED, "runs": {"done": 11, "total": 12, "failed": ["tg-s2"], "missing": []},
        "skipped": {"probing txl-trees": "no finished run of txl-trees with seed 0"},
    }
    (folder / "settings.json").write_text(json.dumps(settings))
    summary = [
        {"metric": metric, "model": model, "n": 3, "mean": mean + i * step, "sd": sd, "sem": sd / 3 ** 0.5,
         "ci_low": mean + i * step - sd, "ci_high": mean + i * step + sd, "min": mean, "max": mean + sd}
        for metric, mean, sd, step in (("ppl", 70.0, 0.5, 1.0), ("sg", 0.6, 0.02, 0.01),
                                       ("blimp", 0.7, 0.01, 0.01), ("sg.circuit.Licensing", 0.5, 0.05, 0.01),
                                       ("best_val_loss", 3.0, 0.1, 0.1))
        for i, model in enumerate(models)
    ]
    write_csv(folder / "summary.csv", summary)
    write_csv(folder / "welch.csv", [
        {"metric": "ppl", "model_a": "tg", "model_b": "txl-trees", "n_a": 3, "n_b": 3, "mean_a": 71.0,
         "mean_b": 72.0, "diff": -1.0, "t": -2.449, "df": 4.0, "p": 0.0702, "p_adjusted": 0.2106,
         "correction": "holm", "note": ""},
        {"metric": "sg", "model_a": "tg", "model_b": EVIL, "n_a": 3, "n_b": 1, "mean_a": 0.61, "mean_b": 0.63,
         "diff": -0.02, "t": None, "df": None, "p": None, "p_adjusted": None, "correction": "holm",
         "note": "fewer than 2 values in b: the test is undefined"},
        {"metric": "ppl", "model_a": "tg", "model_b": "txl-terminals", "n_a": 3, "n_b": 3, "mean_a": 71.0,
         "mean_b": 70.0, "diff": None, "t": None, "df": None, "p": None, "p_adjusted": None, "correction": "holm",
         "note": f"{NOT_COMPARED}: tg on test, document level, 7 items; txl-terminals on test, sentence level"},
    ])
    write_csv(folder / "variance.csv", [
        {"task": "sg", "model": "tg", "n_seeds": 3, "n_items": 40, "mean": 0.61, "seed_sd": 0.02,
         "item_se": 0.07, "ci_low": 0.5, "ci_high": 0.72},
    ])
    (folder / "regressions.json").write_text(json.dumps({
        "frequency": {
            "name": "frequency", "formula": "delta ~ HighFreq + MediumFreq + LowFreq - 1",
            "response": "delta", "n": 812, "r2": 0.031, "adj_r2": 0.0297,
            "coefficients": [
                {"name": "HighFreq", "coef": -0.0512, "se": 0.011, "t": -4.65, "p": 3.9e-06, "count": 700},
                {"name": "MediumFreq", "coef": -0.3377, "se": 0.04, "t": -8.44, "p": 1.5e-16, "count": 112},
            ],
            "dropped": [{"name": "LowFreq", "reason": "no terminal in this bucket"}],
            "models": {"A": "tg", "B": "txl-trees"}, "ensemble": {"A": 3, "B": 3}, "data": "ptb-sample valid",
        },
        "copying": {"skipped": "no document-level models"},
    }))
    write_csv(folder / "mdl.csv", [
        {"model": model, "representation": rep, "task": task, "layer": layer, "probe": probe, "n": 300,
         "n_classes": 12, "uniform_bits": 1075.49, "online_bits": 900.0 - 100 * layer,
         "compression": 1075.49 / (900.0 - 100 * layer), "dev_accuracy": 0.4}
        for model, rep in (("tg", "compose"), ("tg", "stack"), ("txl-terminals", "first+last"))
        for task in ("pos", "grandparent") for layer in (0, 1) for probe in ("linear", "mlp")
    ])
    if with_figures:
        long = pd.DataFrame([{"model": row["model"], "seed": seed, "metric": row["metric"],
                              "value": row["mean"] + 0.01 * seed}
                             for row in summary for seed in range(3)])
        figures.write_figures(folder / "figures", long=long, mdl=pd.read_csv(folder / "mdl.csv"),
                              regressions=json.loads((folder / "regressions.json").read_text()))
    return folder


def with_families(folder: Path, families: dict[str, str]) -> None:
    """Make the analysis folder's models those labels, of those families."""
    settings = json.loads((folder / "settings.json").read_text())
    settings["models"] = {label: {"family": family, "level": "sentence"} for label, family in families.items()}
    (folder / "settings.json").write_text(json.dumps(settings))
    summary = pd.read_csv(folder / "summary.csv")
    summary["model"] = summary["model"].map(dict(zip(summary["model"].unique(), families)))  # the rest: NaN
    summary.dropna(subset=["model"]).to_csv(folder / "summary.csv", index=False)


def edit_settings(folder: Path, **changes) -> None:
    """Set keys of the analysis folder's settings.json."""
    settings = json.loads((folder / "settings.json").read_text())
    settings.update(changes)
    (folder / "settings.json").write_text(json.dumps(settings))
