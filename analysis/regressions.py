"""Regression analysis of per-terminal log-probability differences between two models (TG paper §4.2).

For every terminal a_i of a validation set, Δ_i = log p_A(a_i | a_<i) − log p_B(a_i | a_<i), each model an
ensemble over its seeds (:func:`ensemble_logprob`: log of the mean probability). Δ is regressed by ordinary
least squares (statsmodels) on one-hot indicator variables:

- frequency (§4.2.1): ``Δ ~ HighFreq + MediumFreq + LowFreq`` from the training unigram frequency
  (:func:`frequency_indicators`);
- copying (§4.2.2): ``Δ ~ InContextPrevSentences + InContextCurSentence + NotInContext``
  (:func:`copying_indicators`).

:func:`fit_indicator_ols` fits without an intercept (the indicators sum to one on every row, so they span
it): each coefficient is the mean Δ of its bucket. R² and adjusted R² are the *centred* ones, i.e. those of
the equivalent fit with an intercept and k − 1 dummies (as the paper's adjusted R² of 0.039 / 0.010 must be;
the uncentred R² of a no-intercept fit measures distance from zero, mostly the overall mean gap).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from lightning_modules.errors import InputError

if TYPE_CHECKING:
    import pandas as pd

FREQUENCY_INDICATORS = ("HighFreq", "MediumFreq", "LowFreq")
COPYING_INDICATORS = ("InContextPrevSentences", "InContextCurSentence", "NotInContext")
EMPTY_BUCKET = "no terminal in this bucket"


def ensemble_logprob(logprobs: Any) -> np.ndarray:
    """Log-probability of each token under the uniform mixture of seeds: log((1/S)·Σ_s p_s) per token.

    ``logprobs`` is [n_seeds, n_tokens] of natural-log probabilities; computed as logsumexp over seeds
    minus log S, stable for very negative values (a token all seeds give probability 0 stays −inf). NaN and
    +inf are rejected; tiny positive values (float32 rounding of a near-certain token) are accepted as given.
    """
    from scipy.special import logsumexp

    try:
        array = np.asarray(logprobs, dtype=float)
    except (TypeError, ValueError) as error:
        raise InputError(f"log-probabilities are not numeric: {error}", "logprobs") from None
    if array.ndim != 2 or array.shape[0] == 0:
        raise InputError(f"expected an array [n_seeds >= 1, n_tokens], got shape {array.shape}", "logprobs")
    bad = np.isnan(array) | (array == math.inf)
    if bad.any():
        s, i = np.argwhere(bad)[0]
        raise InputError(
            f"{int(bad.sum())} entries are NaN or +inf, first seed {s} token {i}: {array[s, i]!r}", "logprobs"
        )
    return logsumexp(array, axis=0) - math.log(array.shape[0])


def frequency_indicators(
    tokens: Sequence[str], train_counts: Mapping[str, int], high: float = 1e-3, low: float = 1e-5,
    total: int | None = None,
) -> pd.DataFrame:
    """One-hot frequency buckets of each token, f = its training unigram count / total training count.

    HighFreq: f ≥ ``high``; MediumFreq: ``low`` ≤ f < ``high``; LowFreq: f < ``low`` (a token absent from
    ``train_counts`` has f = 0). Defaults are the paper's 1e-3 and 1e-5. ``total`` is the number of training
    tokens when ``train_counts`` holds only some of them (e.g. those of the evaluated tokens); default: their
    sum. f is one correctly rounded division, so a count that is exactly 1e-3 (or 1e-5) of the total lands in
    the higher bucket.
    """
    import pandas as pd

    if not 0 < low < high:
        raise InputError(f"need 0 < low < high, got low={low!r}, high={high!r}", "thresholds")
    negative = [t for t, c in train_counts.items() if c < 0]
    if negative:
        raise InputError(f"{len(negative)} negative count(s), e.g. {negative[0]!r}", "train_counts")
    if total is None:
        total = sum(train_counts.values())
    elif total < sum(train_counts.values()):
        raise InputError(f"total {total} is smaller than the sum of the counts", "train_counts")
    if total <= 0:
        raise InputError("the training counts are empty (total 0)", "train_counts")
    f = np.array([train_counts.get(token, 0) / total for token in tokens], dtype=float)
    return pd.DataFrame({
        "HighFreq": (f >= high).astype(int),
        "MediumFreq": ((f >= low) & (f < high)).astype(int),
        "LowFreq": (f < low).astype(int),
    })


def copying_indicators(documents: Sequence[Sequence[Sequence[str]]]) -> pd.DataFrame:
    """Copying condition of each terminal (documents → sentences → terminals, rows in reading order).

    The paper's three conditions (§4.2.2) for the terminal w at position j of sentence s, the context being
    everything before it in its document (documents are independent):

    - InContextCurSentence: w occurs at a position < j of sentence s ("appears in the context in the current
      sentence"), whether or not it also occurs in earlier sentences;
    - InContextPrevSentences: otherwise, w occurs in a sentence < s of the document ("in a previous sentence,
      but not in the current one");
    - NotInContext: neither ("does not appear in the context at all").

    Exactly one is 1 on every row. Occurrence is exact string equality (case-sensitive: the models see the
    strings as they are), and the whole document prefix counts, not only what a model's memory holds.
    """
    import pandas as pd

    rows: list[tuple[int, int, int]] = []
    for document in documents:
        previous: set[str] = set()
        for sentence in document:
            current: set[str] = set()
            for word in sentence:
                in_current = word in current
                rows.append((int(word in previous and not in_current), int(in_current),
                             int(not in_current and word not in previous)))
                current.add(word)
            previous |= current
    return pd.DataFrame(rows, columns=list(COPYING_INDICATORS), dtype=int)


@dataclass(frozen=True)
class Coefficient:
    """One indicator's coefficient (the mean Δ of its bucket), its standard error, t, p and bucket size."""

    name: str
    coef: float
    se: float
    t: float
    p: float
    count: int


@dataclass(frozen=True)
class RegressionResult:
    """An indicator OLS fit of Δ: centred R² and adjusted R², coefficients, the (empty) buckets dropped."""

    name: str
    formula: str
    response: str
    n: int
    r2: float
    adj_r2: float
    coefficients: list[Coefficient]
    dropped: list[dict[str, str]]
    models: dict[str, str]
    ensemble: dict[str, int]
    data: str

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: ``regressions.json``'s shape (non-finite floats become None)."""
        result = asdict(self)
        result["r2"], result["adj_r2"] = _finite(self.r2), _finite(self.adj_r2)
        result["coefficients"] = [
            {key: _finite(v) if isinstance(v, float) else v for key, v in c.items()}
            for c in result["coefficients"]
        ]
        return result


def _finite(value: float) -> float | None:
    return float(value) if math.isfinite(value) else None


def _checked_indicators(indicators: pd.DataFrame, n: int) -> np.ndarray:
    """The indicator matrix as floats, after checking it is one-hot with one row per Δ."""
    import pandas as pd

    if not isinstance(indicators, pd.DataFrame) or indicators.shape[1] == 0:
        raise InputError("expected a DataFrame with one column per indicator", "indicators")
    if len(indicators) != n:
        raise InputError(f"{len(indicators)} indicator rows for {n} values of delta", "indicators")
    try:
        x = indicators.to_numpy(dtype=float)
    except (TypeError, ValueError) as error:
        raise InputError(f"indicators are not numeric: {error}", "indicators") from None
    not_binary = ~np.isin(x, (0.0, 1.0))
    if not_binary.any():
        i, j = np.argwhere(not_binary)[0]
        raise InputError(f"indicators must be 0/1: row {i}, column {indicators.columns[j]!r} is {x[i, j]!r}",
                         "indicators")
    ones = x.sum(axis=1)
    if (ones != 1).any():
        i = int(np.flatnonzero(ones != 1)[0])
        raise InputError(
            f"{int((ones != 1).sum())} row(s) do not have exactly one indicator set (first: row {i}, "
            f"{int(ones[i])} set); the indicators must partition the terminals",
            "indicators",
        )
    return x


def fit_indicator_ols(
    delta: Any,
    indicators: pd.DataFrame,
    name: str,
    *,
    models: tuple[str, str],
    ensemble: tuple[int, int],
    data: str = "",
) -> RegressionResult:
    """OLS of ``delta`` on one-hot ``indicators`` without an intercept (the paper's ``Δ ~ A + B + C``).

    ``models`` = (A, B) labels with Δ = log p_A − log p_B, ``ensemble`` = their seed counts, ``data`` a
    description of the terminals. Coefficients, standard errors (classical, homoskedastic), t and two-sided p
    come from statsmodels; R² and adjusted R² are centred (statsmodels with ``hasconst=True``: the indicators
    sum to one), equal to those of an intercept + k − 1 dummies fit: 1 − SSR/Σ(Δ − mean Δ)² and
    1 − (1 − R²)(N − 1)/(N − k). An indicator with no terminal is dropped and listed in ``dropped``. Raises
    InputError for non-finite Δ, indicators that are not one-hot, or no residual degree of freedom left.
    """
    import statsmodels.api as sm

    try:
        y = np.asarray(delta, dtype=float)
    except (TypeError, ValueError) as error:
        raise InputError(f"delta is not numeric: {error}", "delta") from None
    if y.ndim != 1:
        raise InputError(f"delta must be one value per terminal (1-D), got shape {y.shape}", "delta")
    bad = np.flatnonzero(~np.isfinite(y))
    if len(bad):
        raise InputError(
            f"{len(bad)} non-finite value(s) of delta (first at index {bad[0]}: {y[bad[0]]!r}); a model "
            "gave a terminal probability 0 or the log-probabilities are broken",
            "delta",
        )
    x = _checked_indicators(indicators, len(y))
    counts = x.sum(axis=0).astype(int)
    names = [str(c) for c in indicators.columns]
    kept = [j for j in range(len(names)) if counts[j] > 0]
    dropped = [{"name": names[j], "reason": EMPTY_BUCKET} for j in range(len(names)) if counts[j] == 0]
    if len(y) <= len(kept):
        raise InputError(
            f"{len(y)} observation(s) for {len(kept)} non-empty indicator(s): at least {len(kept) + 1} "
            "needed to estimate standard errors",
            name,
        )
    with np.errstate(divide="ignore", invalid="ignore"):
        fit = sm.OLS(y, x[:, kept], hasconst=True).fit()
        coefficients = [
            Coefficient(names[j], float(fit.params[k]), float(fit.bse[k]), float(fit.tvalues[k]),
                        float(fit.pvalues[k]), int(counts[j]))
            for k, j in enumerate(kept)
        ]
        r2, adj_r2 = float(fit.rsquared), float(fit.rsquared_adj)
    model_a, model_b = models
    return RegressionResult(
        name=name,
        formula="delta ~ 0 + " + " + ".join(names[j] for j in kept),
        response=f"delta = log p_{model_a}(a_i | a_<i) - log p_{model_b}(a_i | a_<i), each model the mean "
        "probability over its seeds",
        n=len(y),
        r2=r2,
        adj_r2=adj_r2,
        coefficients=coefficients,
        dropped=dropped,
        models={"A": model_a, "B": model_b},
        ensemble={"A": int(ensemble[0]), "B": int(ensemble[1])},
        data=data,
    )
