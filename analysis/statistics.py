"""Statistics over training seeds: summaries, bootstrap intervals, Welch tests, item- vs seed-level variance.

The TG paper (§3) trains many models per architecture with independent initialisations and reports the mean
and sample standard deviation of each metric, and two-sided Welch's unequal-variances t-tests between models.
This module computes those from the tidy tables of ``analysis.aggregate``:

- :func:`summarize`: per (metric, model) mean, sample sd, sem, percentile bootstrap CI of the mean over seeds.
- :func:`welch` / :func:`pairwise_welch`: Welch's t-test for one pair / every pair of models on every metric,
  with a correction for many comparisons.
- :func:`variance_components`: from item-level outcomes, the spread due to training randomness (over seeds)
  kept apart from the sampling error due to the finite set of test items.

Randomness (the bootstrap) is seeded per table row from ``seed`` and the row's labels, so the same inputs and
seed give the same numbers, and adding a metric or a model leaves the other rows' intervals unchanged.
pandas, scipy and statsmodels are imported inside the functions (the package is imported by the CLI).
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import numpy as np

from lightning_modules.errors import InputError

if TYPE_CHECKING:
    import pandas as pd

CORRECTIONS = ("none", "bonferroni", "holm", "fdr_bh")
SUMMARY_COLUMNS = ("metric", "model", "n", "mean", "sd", "sem", "ci_low", "ci_high", "min", "max")
WELCH_COLUMNS = (
    "metric", "model_a", "model_b", "n_a", "n_b", "mean_a", "mean_b", "diff", "t", "df", "p", "p_adjusted",
    "correction", "note",
)
NOT_COMPARED = "not compared, scored on different items"  # the note of a pair pairwise_welch does not test
VARIANCE_COLUMNS = ("task", "model", "n_seeds", "n_items", "mean", "seed_sd", "item_se", "ci_low", "ci_high")
_BOOTSTRAP_CHUNK = 4_000_000  # resampled values held in memory at once by the item bootstrap


# ----------------------------------------------------------------------------------------------------------
# Input checks


def _checked_table(table: pd.DataFrame, name: str, columns: Sequence[str]) -> pd.DataFrame:
    """``table`` with a float ``value`` column, or an InputError naming what is wrong with it."""
    import pandas as pd

    if not isinstance(table, pd.DataFrame):
        raise InputError(f"expected a pandas DataFrame, got {type(table).__name__}", name)
    missing = [c for c in columns if c not in table.columns]
    if missing:
        raise InputError(
            f"missing column(s) {', '.join(missing)} (has: {', '.join(map(str, table.columns))})", name
        )
    if table.empty:
        raise InputError("the table is empty (no rows)", name)
    for column in (c for c in columns if c != "value"):
        unlabelled = np.flatnonzero(table[column].isna().to_numpy())
        if len(unlabelled):
            first = table.index[unlabelled[0]]
            raise InputError(f"{len(unlabelled)} row(s) without a {column} (first at row {first})", name)
    values = pd.to_numeric(table["value"], errors="coerce").to_numpy(dtype=float)
    bad = np.flatnonzero(~np.isfinite(values))
    if len(bad):
        first = table.index[bad[0]]
        raise InputError(
            f"{len(bad)} value(s) are missing, not numbers or not finite (first at row {first}: "
            f"{table['value'].iloc[bad[0]]!r})",
            name,
        )
    return table.assign(value=values)


def _check_bootstrap(n_boot: int, ci: float, seed: int) -> None:
    if not isinstance(n_boot, int | np.integer) or n_boot < 1:
        raise InputError(f"n_boot must be a positive integer, got {n_boot!r}", "n_boot")
    if not 0 < ci < 1:
        raise InputError(f"ci must be strictly between 0 and 1, got {ci!r}", "ci")
    if not isinstance(seed, int | np.integer) or seed < 0:
        raise InputError(f"seed must be a non-negative integer, got {seed!r}", "seed")


def _first_appearance(values: Iterable) -> list:
    return list(dict.fromkeys(values))


def _selected_metrics(table: pd.DataFrame, metrics: Sequence[str] | None, name: str) -> list[str]:
    present = _first_appearance(table["metric"])
    if metrics is None:
        return present
    unknown = [m for m in metrics if m not in set(present)]
    if unknown:
        raise InputError(f"metric(s) not in the table: {', '.join(map(str, unknown))}", name)
    return list(dict.fromkeys(metrics))


def _reject_duplicates(table: pd.DataFrame, keys: list[str], name: str, why: str) -> None:
    duplicated = table.duplicated(subset=keys, keep=False)
    if duplicated.any():
        first = table.loc[duplicated, keys].iloc[0].to_dict()
        raise InputError(f"{int(duplicated.sum())} rows share {', '.join(keys)} (e.g. {first}); {why}", name)


def _runs_table(long: pd.DataFrame) -> pd.DataFrame:
    """The checked long table: one row per run and metric, at most one run per (model, seed)."""
    table = _checked_table(long, "long", ("metric", "model", "value"))
    if "seed" in table.columns:
        _reject_duplicates(
            table, ["metric", "model", "seed"], "long",
            "statistics over seeds need one run per seed of each model (filter the table or relabel models)",
        )
    return table


def _rng(seed: int, *labels: object) -> np.random.Generator:
    """A generator that depends on ``seed`` and the row's labels only (stable across runs and tables)."""
    return np.random.default_rng([int(seed), *(zlib.crc32(str(label).encode()) for label in labels)])


# ----------------------------------------------------------------------------------------------------------
# Summaries over seeds


def _bootstrap_mean_ci(
    values: np.ndarray, n_boot: int, ci: float, rng: np.random.Generator
) -> tuple[float, float]:
    """Percentile bootstrap interval of the mean of ``values`` (NaN for fewer than 2 values)."""
    if len(values) < 2:
        return math.nan, math.nan
    means = values[rng.integers(0, len(values), size=(n_boot, len(values)))].mean(axis=1)
    low, high = np.quantile(means, [(1 - ci) / 2, (1 + ci) / 2])
    return float(low), float(high)


def _sd(values: np.ndarray) -> float:
    return float(values.std(ddof=1)) if len(values) >= 2 else math.nan


def summarize(
    long: pd.DataFrame,
    metrics: Sequence[str] | None = None,
    n_boot: int = 10000,
    ci: float = 0.95,
    seed: int = 0,
) -> pd.DataFrame:
    """Per (metric, model): n, mean, sample sd (ddof=1), sem, bootstrap CI of the mean over seeds, min, max.

    Each row of ``long`` (columns ``metric, model, value``; ``seed`` checked when present) is one run. The
    CI is the percentile interval of ``n_boot`` resampled means (NaN, like sd, for fewer than 2 runs). Rows
    are ordered by metric, then model, each in order of first appearance in ``long``.
    """
    import pandas as pd

    table = _runs_table(long)
    _check_bootstrap(n_boot, ci, seed)
    selected = _selected_metrics(table, metrics, "long")
    models = _first_appearance(table["model"])
    groups = {key: g["value"].to_numpy() for key, g in table.groupby(["metric", "model"], sort=False)}
    rows = []
    for metric in selected:
        for model in models:
            values = groups.get((metric, model))
            if values is None:
                continue
            sd = _sd(values)
            low, high = _bootstrap_mean_ci(values, n_boot, ci, _rng(seed, metric, model))
            rows.append({
                "metric": metric, "model": model, "n": len(values), "mean": float(values.mean()), "sd": sd,
                "sem": sd / math.sqrt(len(values)), "ci_low": low, "ci_high": high,
                "min": float(values.min()), "max": float(values.max()),
            })
    return pd.DataFrame(rows, columns=list(SUMMARY_COLUMNS))


# ----------------------------------------------------------------------------------------------------------
# Welch's unequal-variances t-test


@dataclass(frozen=True)
class WelchResult:
    """Two-sided Welch's t-test of mean(a) = mean(b); t, df, p NaN (and ``note`` says why) when undefined."""

    t: float
    df: float
    p: float
    mean_a: float
    mean_b: float
    n_a: int
    n_b: int
    sd_a: float
    sd_b: float
    note: str = ""


def _sample(values: Iterable[float], name: str) -> np.ndarray:
    try:
        array = np.asarray(values, dtype=float).ravel()
    except (TypeError, ValueError) as error:
        raise InputError(f"sample is not numeric: {error}", name) from None
    if not np.isfinite(array).all():
        raise InputError(f"sample has {int((~np.isfinite(array)).sum())} non-finite value(s)", name)
    return array


def welch(a: Iterable[float], b: Iterable[float]) -> WelchResult:
    """Welch's two-sided t-test with Welch–Satterthwaite degrees of freedom (= scipy ``equal_var=False``).

    t = (mean_a − mean_b) / sqrt(s_a²/n_a + s_b²/n_b), df = (s_a²/n_a + s_b²/n_b)² / ((s_a²/n_a)²/(n_a − 1) +
    (s_b²/n_b)²/(n_b − 1)), p = 2·P(T_df > |t|). With fewer than 2 values in a sample, or both variances zero,
    the test is undefined: t, df and p are NaN and ``note`` says why (no exception, no warning).
    """
    from scipy import stats

    a, b = _sample(a, "a"), _sample(b, "b")
    n_a, n_b = len(a), len(b)
    mean_a = float(a.mean()) if n_a else math.nan
    mean_b = float(b.mean()) if n_b else math.nan
    sd_a, sd_b = _sd(a), _sd(b)
    described = {"mean_a": mean_a, "mean_b": mean_b, "n_a": n_a, "n_b": n_b, "sd_a": sd_a, "sd_b": sd_b}
    small = [name for name, n in (("a", n_a), ("b", n_b)) if n < 2]
    if small:
        note = f"fewer than 2 values in {' and '.join(small)}: the test is undefined"
        return WelchResult(math.nan, math.nan, math.nan, **described, note=note)
    var_a, var_b = sd_a**2 / n_a, sd_b**2 / n_b
    if var_a + var_b == 0:
        note = "both samples have zero variance: the test is undefined"
        return WelchResult(math.nan, math.nan, math.nan, **described, note=note)
    t = (mean_a - mean_b) / math.sqrt(var_a + var_b)
    df = (var_a + var_b) ** 2 / (var_a**2 / (n_a - 1) + var_b**2 / (n_b - 1))
    p = float(2 * stats.t.sf(abs(t), df))
    return WelchResult(t, df, p, **described)


def adjusted_p(p: np.ndarray, correction: str) -> np.ndarray:
    """``p`` corrected over its finite entries as one family (NaN stays NaN)."""
    from statsmodels.stats.multitest import multipletests

    adjusted = np.full_like(p, math.nan)
    finite = np.isfinite(p)
    if correction == "none":
        adjusted[finite] = p[finite]
    elif finite.any():
        adjusted[finite] = multipletests(p[finite], method=correction)[1]
    return adjusted


def pairwise_welch(
    long: pd.DataFrame, metrics: Sequence[str] | None = None, correction: str = "holm",
    evaluated_on: Mapping[str, Mapping[str, str]] | None = None,
) -> pd.DataFrame:
    """Welch's t-test for every pair of models on every metric, with p-values corrected for many comparisons.

    For each metric, every pair (model_a, model_b) of the models that report it, in order of first appearance
    (a model without the metric has no rows for it); ``diff`` = mean_a − mean_b. ``correction`` is one of
    ``none``, ``bonferroni``, ``holm`` (family-wise error) or ``fdr_bh`` (Benjamini–Hochberg false discovery
    rate), via statsmodels ``multipletests``. **The family is the whole returned table**: all comparisons
    with a finite p, across metrics and pairs (so selecting metrics changes the adjusted values). Undefined
    tests keep p = p_adjusted = NaN and say why in ``note``.

    ``evaluated_on`` ({metric: {model: what its values were computed on}}, ``aggregate``'s summary): two models
    whose values of a metric were computed on different items (another corpus, level or item count, e.g.
    sentence- vs document-level perplexity) are not tested — their row keeps the means, NaN elsewhere and a
    note, and stays out of the correction's family. A model missing from it is compared as before.
    """
    import pandas as pd

    if correction not in CORRECTIONS:
        choices = ", ".join(CORRECTIONS)
        raise InputError(f"unknown correction {correction!r} (choose from {choices})", "correction")
    table = _runs_table(long)
    selected = _selected_metrics(table, metrics, "long")
    models = _first_appearance(table["model"])
    groups = {key: g["value"].to_numpy() for key, g in table.groupby(["metric", "model"], sort=False)}
    rows = []
    for metric in selected:
        present = [m for m in models if (metric, m) in groups]
        for i, model_a in enumerate(present):
            for model_b in present[i + 1:]:
                r = welch(groups[metric, model_a], groups[metric, model_b])
                on_a, on_b = ((evaluated_on or {}).get(metric, {}).get(m) for m in (model_a, model_b))
                comparable = on_a is None or on_b is None or on_a == on_b
                if not comparable:
                    r = replace(r, t=math.nan, df=math.nan, p=math.nan,
                                note=f"{NOT_COMPARED}: {model_a} on {on_a}; {model_b} on {on_b}")
                rows.append({
                    "metric": metric, "model_a": model_a, "model_b": model_b, "n_a": r.n_a, "n_b": r.n_b,
                    "mean_a": r.mean_a, "mean_b": r.mean_b,
                    "diff": r.mean_a - r.mean_b if comparable else math.nan, "t": r.t, "df": r.df,
                    "p": r.p, "correction": correction, "note": r.note,
                })
    result = pd.DataFrame(rows, columns=[c for c in WELCH_COLUMNS if c != "p_adjusted"])
    adjusted = adjusted_p(result["p"].to_numpy(dtype=float), correction)
    result.insert(WELCH_COLUMNS.index("p_adjusted"), "p_adjusted", adjusted)
    return result


# ----------------------------------------------------------------------------------------------------------
# Item-level vs seed-level variance


def _bootstrap_items_ci(
    item_means: np.ndarray, n_boot: int, ci: float, rng: np.random.Generator
) -> tuple[float, float]:
    """Percentile bootstrap interval of the mean of ``item_means``, resampling items in bounded chunks."""
    n = len(item_means)
    if n < 2:
        return math.nan, math.nan
    chunk = max(1, _BOOTSTRAP_CHUNK // n)
    means = np.concatenate([
        item_means[rng.integers(0, n, size=(min(chunk, n_boot - start), n))].mean(axis=1)
        for start in range(0, n_boot, chunk)
    ])
    low, high = np.quantile(means, [(1 - ci) / 2, (1 + ci) / 2])
    return float(low), float(high)


def variance_components(
    items: pd.DataFrame, n_boot: int = 2000, ci: float = 0.95, seed: int = 0
) -> pd.DataFrame:
    """Per (task, model): the seed-level (training) spread kept apart from the item-level (test set) error.

    ``items`` has one row per (model, seed, task, item) outcome (``value`` 0/1 or a float); every seed of a
    (task, model) must be scored on the same items. With S seeds and I items, x[s, i] the outcome:

    - ``mean``: the seed-averaged score, mean over s and i of x[s, i].
    - ``seed_sd``: sample sd (ddof=1) over seeds of each seed's score mean_i x[s, i]. All seeds see the same
      items, so this spread is due to training randomness alone (initialisation, data order): how much a new
      training run would differ *on this test set*. It is what the Welch tests over seeds compare.
    - ``item_se``: sqrt(mean_s var_i(x[s, ·]) / I), the standard error of one seed's score due to the finite
      item set (var over items with ddof=1): how much a seed's score would move on a fresh draw of I items
      from the same population, with the model fixed.
    - ``ci_low``, ``ci_high``: percentile bootstrap interval of the seed-averaged score resampling *items*
      (the same resampled items for all seeds), i.e. the uncertainty from the finite test set that remains
      after averaging out the seeds.

    They are kept apart because they answer different questions: a model difference can be far outside the
    seed spread (every retraining reproduces it) and still within the item error (a different test set might
    not), and summing them would hide which one limits a conclusion. Undefined entries (fewer than 2 seeds or
    items) are NaN. Rows are in order of first appearance of task, then model.
    """
    import pandas as pd

    table = _checked_table(items, "items", ("model", "seed", "task", "item", "value"))
    _check_bootstrap(n_boot, ci, seed)
    _reject_duplicates(
        table, ["task", "model", "seed", "item"], "items", "each seed scores each item once"
    )
    rows = []
    for (task, model), group in table.groupby(["task", "model"], sort=False):
        matrix = group.pivot(index="seed", columns="item", values="value")
        holes = matrix.isna().to_numpy()
        if holes.any():
            s, i = np.argwhere(holes)[0]
            raise InputError(
                f"task {task!r}, model {model!r}: {int(holes.sum())} (seed, item) outcome(s) missing (e.g. "
                f"seed {matrix.index[s]}, item {matrix.columns[i]!r}); every seed must be scored on the same "
                "items",
                "items",
            )
        x = matrix.to_numpy(dtype=float)
        n_seeds, n_items = x.shape
        seed_scores = x.mean(axis=1)
        item_var = x.var(axis=1, ddof=1) if n_items >= 2 else np.full(n_seeds, math.nan)
        low, high = _bootstrap_items_ci(x.mean(axis=0), n_boot, ci, _rng(seed, task, model))
        rows.append({
            "task": task, "model": model, "n_seeds": n_seeds, "n_items": n_items, "mean": float(x.mean()),
            "seed_sd": _sd(seed_scores), "item_se": float(math.sqrt(item_var.mean() / n_items)),
            "ci_low": low, "ci_high": high,
        })
    return pd.DataFrame(rows, columns=list(VARIANCE_COLUMNS))
