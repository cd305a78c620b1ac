"""A small but complete analysis folder for the report's tests (imported by basename, like ``tg_golden``)."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

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


# The compare demo's per-model means (its report of 2026-11, 2 seeds), the shape of a real report of every family:
# 16 models, perplexity bounds up to 1e32, a gold-tree value for three of them, SG and BLiMP as fractions.
COMPARE_MEANS = {
    "tg": {"blimp": 0.25, "f1": 2.785, "ppl": 4.721e+32, "ppl@gold-tree": 5.127e+08, "sg": 0.3387, "sg.all_34": 0.3382},
    "txl-trees": {"blimp": 0.25, "f1": 2.865, "ppl": 4.634e+32, "sg": 0.3387, "sg.all_34": 0.3382},
    "txl-terminals": {"blimp": 0.5, "ppl": 9143.0, "sg": 0.2581, "sg.all_34": 0.2941},
    "pushdown": {"blimp": 0.625, "ppl": 9420.0, "sg": 0.1129, "sg.all_34": 0.1029, "parse_f1": 33.86},
    "base-lm": {"blimp": 0.625, "ppl": 6063.0, "sg": 0.2258, "sg.all_34": 0.2353},
    "awd-lstm": {"blimp": 0.5, "ppl": 4697.0, "sg": 0.1129, "sg.all_34": 0.1324},
    "palm-u": {"blimp": 0.5, "ppl": 4618.0, "sg": 0.06452, "sg.all_34": 0.08824, "unsupervised_f1": 20.45},
    "palm-s": {"blimp": 0.5, "ppl": 4618.0, "sg": 0.06452, "sg.all_34": 0.08824, "unsupervised_f1": 20.84},
    "palm-rb": {"blimp": 0.375, "ppl": 4675.0, "sg": 0.06452, "sg.all_34": 0.07353, "unsupervised_f1": 27.42},
    "hf-scratch": {"blimp": 0.75, "ppl": 5167.0, "sg": 0.2097, "sg.all_34": 0.2353},
    "dtg": {"blimp": 0.5, "ppl": 5.116e+06, "ppl@gold-tree": 4.777e+06, "sg": 0.2097, "sg.all_34": 0.1912,
            "uas_rerank": 14.5},
    "dtg-eager": {"blimp": 0.5, "ppl": 1.712e+08, "sg": 0.2097, "sg.all_34": 0.1912},
    "dtg-swift": {"blimp": 0.25, "ppl": 1.276e+07, "sg": 0.3065, "sg.all_34": 0.3088},
    "txl-trans": {"blimp": 0.125, "ppl": 4.047e+06, "sg": 0.1774, "sg.all_34": 0.1618, "uas_rerank": 15.55},
    "esom": {"blimp": 0.625, "ppl": 4248.0, "sg": 0.1452, "sg.all_34": 0.1765, "parse_f1": 20.41},
    "dsom": {"blimp": 0.75, "ppl": 4737.0, "ppl@gold-tree": 4720.0, "sg": 0.2258, "sg.all_34": 0.2206,
             "parse_f1": 19.95},
}
CIRCUITS = ("Agreement", "Center Embedding", "Garden-Path Effects", "Gross Syntactic State", "Licensing",
            "Long-Distance Dependencies")
PHENOMENA = ("anaphor_agreement", "determiner_noun_agreement", "filler_gap_dependency", "subject_verb_agreement")
BOUNDS = {"tg": "proposals", "txl-trees": "proposals", "dtg": "proposals", "dtg-eager": "proposals",
          "dtg-swift": "proposals", "txl-trans": "proposals", "pushdown": "beam"}  # the others' ppl: exact
NOT_CONVERGED = "txl-terminals"  # its validation perplexity per token above its vocabulary size


def compare_long(models: dict[str, dict[str, float]] | None = None) -> pd.DataFrame:
    """Two seeds of every model of ``models`` (default: the compare demo's means): the headline metrics, SG per
    circuit, BLiMP per phenomenon, the end-counted perplexity, the cost and the convergence check's inputs."""
    rows = []
    for model, means in (models or COMPARE_MEANS).items():
        for seed in (0, 1):
            jitter = 1.0 + 0.04 * (2 * seed - 1) * (1 + len(model) % 3)
            values = {metric: mean * jitter for metric, mean in means.items()}
            values |= {f"sg.circuit.{c}": min(1.0, means["sg"] * (0.6 + 0.15 * k) * jitter)
                       for k, c in enumerate(CIRCUITS)}
            values |= {f"blimp.phenomenon.{p}": min(1.0, means["blimp"] * (0.7 + 0.2 * k) * jitter)
                       for k, p in enumerate(PHENOMENA)}
            values |= {"ppl_end_counted": 0.72 * values["ppl"], "parameters": 185000.0 + 100 * len(model),
                       "train_tokens_per_s": 1000.0 * jitter, "train_seconds": 7.0 * jitter, "vocab_size": 5340.0,
                       "val_token_ppl": (6600.0 if model == NOT_CONVERGED else 3000.0) * jitter,
                       "best_val_loss": 8.0 * jitter}
            rows += [{"run_id": f"{model}-s{seed}", "model": model, "family": model, "seed": seed, "metric": m,
                      "value": v} for m, v in values.items()]
    return pd.DataFrame(rows)


def comparison_folder(root: Path) -> Path:
    """The analysis folder of the shipped compare demo (its spec's models and reduced settings) with the demo's
    numbers: every table as ``synbench analyze`` writes it from ``compare_long``'s runs, and the key figures."""
    from analysis import claims, comparison, comparison_figures, convergence, statistics
    from experiments.evaluate import tasks
    from experiments.experiment_spec import load_spec
    from experiments.reductions import reduced_settings

    spec = load_spec("reproduce-compare-demo")
    folder = root / spec.name / "analysis"
    folder.mkdir(parents=True)
    long = compare_long()
    metrics = [m for m in long["metric"].unique() if tasks.is_summarized(m)]
    statistics.summarize(long, metrics, n_boot=500).to_csv(folder / "summary.csv", index=False)
    welch = statistics.pairwise_welch(long, [m for m in metrics if tasks.is_tested(m)], correction="holm")
    welch.to_csv(folder / "welch.csv", index=False)
    claims.check_claims(welch, long, "compare").to_csv(folder / claims.CLAIMS_FILE, index=False)
    wide = long.drop_duplicates("run_id")[["run_id"]].assign(device="cpu (1 threads)")
    comparison.comparison_table(long, wide, {}).to_csv(folder / comparison.COMPARISON_FILE, index=False)
    with pytest.MonkeyPatch.context() as patch:  # the key figures, as PNG only (each figure costs seconds)
        patch.setattr(figures, "FORMATS", ("png",))
        drawn = figures.seed_distributions(long, ["ppl", "sg"], folder / "figures")
        drawn.add(comparison_figures.sg_vs_ppl(long, folder / "figures"))
    (folder / "figures" / figures.NOTES_FILE).write_text(json.dumps(drawn.notes))
    scoring = {"ppl": {m: [{"method": BOUNDS.get(m, "exact"), "description": f"{BOUNDS.get(m, 'exact')} (demo)"}]
                       for m in COMPARE_MEANS},
               "ppl@gold-tree": {m: [{"method": "gold", "description": "gold trees"}]
                                 for m, means in COMPARE_MEANS.items() if "ppl@gold-tree" in means}}
    (folder / "settings.json").write_text(json.dumps({
        "experiment": spec.name, "description": spec.description, "scale": "demo", "seeds": [0, 1],
        "models": {m.name: {"family": m.family, "level": "sentence"} for m in spec.models},
        "runs": {"done": 34, "total": 34, "failed": [], "missing": []},
        "data": ["ptb-sample", "ptb-sample-sd", "ptb-sample-ud"], "reduced": reduced_settings(spec),
        "skipped": {"regressions": "no regressions in the spec's analysis section",
                    "probing": "no probing in the spec's analysis section"},
        "scoring": scoring, "not_converged": convergence.not_converged(long), "created": "2026-11-28T10:47:29+00:00",
    }))
    return folder
