"""Regressions of TG §4.2: ensembles, frequency and copying indicators, indicator OLS (= statsmodels)."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest
import statsmodels.api as sm

from analysis.regressions import (
    COPYING_INDICATORS,
    EMPTY_BUCKET,
    FREQUENCY_INDICATORS,
    copying_indicators,
    ensemble_logprob,
    fit_indicator_ols,
    frequency_indicators,
)
from lightning_modules.data.tree import clean, overt_words, read_bracketed
from lightning_modules.errors import InputError

# ---------------------------------------------------------------------------------------------- ensembles


def test_ensemble_logprob_is_log_of_mean_probability():
    logprobs = np.log(np.array([[0.5, 0.1, 0.9], [0.3, 0.2, 0.05], [0.1, 0.6, 0.2]]))
    expected = np.log(np.exp(logprobs).mean(axis=0))
    np.testing.assert_allclose(ensemble_logprob(logprobs), expected, rtol=1e-13)
    np.testing.assert_allclose(ensemble_logprob(logprobs[:1]), logprobs[0])  # one seed: unchanged


def test_ensemble_logprob_is_stable():
    # exp(-1000) underflows to 0: a direct computation would give -inf.
    result = ensemble_logprob([[-1000.0, -math.inf], [-1001.0, -math.inf]])
    assert result[0] == pytest.approx(-1000.0 + math.log((1 + math.exp(-1.0)) / 2), rel=1e-15)
    assert result[1] == -math.inf


@pytest.mark.parametrize(("logprobs", "match"), [
    ([-1.0, -2.0], "shape"), (np.zeros((0, 3)), "shape"), ([[-1.0, math.nan]], "1 entries are NaN"),
])
def test_ensemble_logprob_rejects_bad_input(logprobs, match):
    with pytest.raises(InputError, match=match):
        ensemble_logprob(logprobs)


# ---------------------------------------------------------------------------------------------- frequency


def test_frequency_thresholds_at_the_exact_boundaries():
    # total 100000: 100 → f = 1e-3 exactly, 1 → f = 1e-5 exactly; both boundaries belong to the higher bucket.
    counts = {"hundred": 100, "ninety-nine": 99, "one": 1, "rest": 100000 - 200}
    tokens = ["hundred", "ninety-nine", "one", "unseen", "rest"]
    result = frequency_indicators(tokens, counts)
    assert list(result.columns) == list(FREQUENCY_INDICATORS)
    assert result.to_numpy().tolist() == [[1, 0, 0], [0, 1, 0], [0, 1, 0], [0, 0, 1], [1, 0, 0]]


def test_frequency_thresholds_below_the_boundaries():
    # total 200000: 1 → 5e-6 (low), 2 → 1e-5 (medium), 199 → 9.95e-4 (medium), 200 → 1e-3 (high).
    counts = {"a": 1, "b": 2, "c": 199, "d": 200, "rest": 200000 - 402}
    result = frequency_indicators(["a", "b", "c", "d"], counts)
    assert result.idxmax(axis=1).tolist() == ["LowFreq", "MediumFreq", "MediumFreq", "HighFreq"]


def test_frequency_custom_thresholds_and_bad_counts():
    result = frequency_indicators(["a", "b"], {"a": 3, "b": 1}, high=0.5, low=0.3)
    assert result.idxmax(axis=1).tolist() == ["HighFreq", "LowFreq"]
    with pytest.raises(InputError, match="total 0"):
        frequency_indicators(["a"], {})
    with pytest.raises(InputError, match="0 < low < high"):
        frequency_indicators(["a"], {"a": 1}, high=1e-5, low=1e-3)


# ---------------------------------------------------------------------------------------------- copying


def labels(frame: pd.DataFrame) -> list[str]:
    return frame.idxmax(axis=1).map({"InContextPrevSentences": "prev", "InContextCurSentence": "cur",
                                     "NotInContext": "none"}).tolist()


def test_copying_repeats_across_and_within_sentences():
    documents = [
        [["the", "dog", "saw", "the", "cat"], ["the", "cat", "ran", "ran"], ["The", "dog"]],
        [["dog", "dog"]],  # a new document starts with an empty context
    ]
    result = copying_indicators(documents)
    assert list(result.columns) == list(COPYING_INDICATORS)
    assert (result.sum(axis=1) == 1).all()
    assert labels(result) == [
        "none", "none", "none", "cur", "none",  # "the" repeated within the first sentence
        "prev", "prev", "none", "cur",  # seen before only in a previous sentence; "ran" repeated here
        "none", "prev",  # case-sensitive: "The" is not "the"
        "none", "cur",
    ]


def test_copying_current_sentence_wins_over_previous_ones():
    # "a" occurs in sentence 1 and earlier in sentence 2: the current-sentence condition holds.
    assert labels(copying_indicators([[["a"], ["b", "a", "a"]]])) == ["none", "none", "prev", "cur"]
    assert copying_indicators([[], [[]]]).empty


def brute_force_condition(sentences: list[list[str]], s: int, j: int) -> str:
    word = sentences[s][j]
    if word in sentences[s][:j]:
        return "cur"
    if any(word in sentence for sentence in sentences[:s]):
        return "prev"
    return "none"


def test_copying_on_ptb_documents(shared_data):
    files = sorted((shared_data / "ptb_nltk_sample" / "combined").glob("wsj_00[0-2]?.mrg"))
    assert files, "PTB sample files missing"
    documents = [[overt_words(clean(tree)) for _, tree in read_bracketed(path)] for path in files]
    result = copying_indicators(documents)
    expected = [brute_force_condition(doc, s, j) for doc in documents for s in range(len(doc))
                for j in range(len(doc[s]))]
    assert labels(result) == expected
    # wsj_0001, sentence 2: "Mr. Vinken is chairman of Elsevier N.V. , the Dutch publishing group ."
    first = documents[0]
    second = labels(result)[len(first[0]):len(first[0]) + len(first[1])]
    assert dict(zip(first[1], second)) == {
        "Mr.": "none", "Vinken": "prev", "is": "none", "chairman": "none", "of": "none", "Elsevier": "none",
        "N.V.": "none", ",": "prev", "the": "prev", "Dutch": "none", "publishing": "none", "group": "none",
        ".": "prev",
    }


# ---------------------------------------------------------------------------------------------- OLS


def fixed_regression_data(n: int = 300) -> tuple[np.ndarray, pd.DataFrame]:
    rng = np.random.default_rng(7)
    bucket = rng.choice(3, size=n, p=[0.5, 0.35, 0.15])
    delta = np.array([-0.05, -0.24, -0.55])[bucket] + rng.normal(0, 0.8, size=n)
    indicators = pd.DataFrame(np.eye(3, dtype=int)[bucket], columns=list(FREQUENCY_INDICATORS))
    return delta, indicators


def test_fit_indicator_ols_equals_statsmodels():
    delta, indicators = fixed_regression_data()
    result = fit_indicator_ols(delta, indicators, "frequency", models=("tg", "txl-trees"), ensemble=(3, 3))
    direct = sm.OLS(delta, indicators.to_numpy(dtype=float)).fit()
    coefs = result.coefficients
    np.testing.assert_allclose([c.coef for c in coefs], direct.params, rtol=1e-12)
    np.testing.assert_allclose([c.se for c in coefs], direct.bse, rtol=1e-12)
    np.testing.assert_allclose([c.t for c in coefs], direct.tvalues, rtol=1e-12)
    np.testing.assert_allclose([c.p for c in coefs], direct.pvalues, rtol=1e-10)
    # No intercept, one-hot regressors: each coefficient is its bucket's mean Δ.
    bucket = indicators.to_numpy().argmax(axis=1)
    np.testing.assert_allclose([c.coef for c in coefs], [delta[bucket == k].mean() for k in range(3)])
    assert [c.count for c in coefs] == np.bincount(bucket).tolist()
    assert result.n == len(delta) and result.dropped == []


def test_fit_indicator_ols_r2_is_centred():
    delta, indicators = fixed_regression_data()
    result = fit_indicator_ols(delta, indicators, "frequency", models=("tg", "txl-trees"), ensemble=(3, 3))
    # The intercept parametrisation: const + MediumFreq + LowFreq (HighFreq the reference bucket).
    with_intercept = sm.OLS(delta, sm.add_constant(indicators.to_numpy(dtype=float)[:, 1:])).fit()
    assert result.r2 == pytest.approx(with_intercept.rsquared, rel=1e-10)
    assert result.adj_r2 == pytest.approx(with_intercept.rsquared_adj, rel=1e-10)
    high, medium, low = (c.coef for c in result.coefficients)
    np.testing.assert_allclose(with_intercept.params, [high, medium - high, low - high], rtol=1e-10)
    # By hand: 1 − SSR / centred TSS, and the adjustment with N − 1 and N − k.
    fitted = indicators.to_numpy() @ np.array([high, medium, low])
    r2 = 1 - np.sum((delta - fitted) ** 2) / np.sum((delta - delta.mean()) ** 2)
    assert result.r2 == pytest.approx(r2, rel=1e-10)
    assert result.adj_r2 == pytest.approx(1 - (1 - r2) * (len(delta) - 1) / (len(delta) - 3), rel=1e-10)
    # Not the uncentred R² of a no-intercept fit (distance from zero), which is much larger here.
    uncentred = sm.OLS(delta, indicators.to_numpy(dtype=float), hasconst=False).fit().rsquared
    assert uncentred > result.r2 + 0.01


def test_fit_indicator_ols_drops_an_empty_bucket():
    delta, indicators = fixed_regression_data()
    indicators = indicators.assign(LowFreq=0)
    indicators.loc[indicators.sum(axis=1) == 0, "MediumFreq"] = 1
    result = fit_indicator_ols(delta, indicators, "frequency", models=("tg", "txl-trees"), ensemble=(2, 2))
    assert result.dropped == [{"name": "LowFreq", "reason": EMPTY_BUCKET}]
    assert [c.name for c in result.coefficients] == ["HighFreq", "MediumFreq"]
    assert result.formula == "delta ~ 0 + HighFreq + MediumFreq"
    direct = sm.OLS(delta, indicators[["HighFreq", "MediumFreq"]].to_numpy(dtype=float)).fit()
    np.testing.assert_allclose([c.se for c in result.coefficients], direct.bse, rtol=1e-12)
    assert result.adj_r2 == pytest.approx(direct.rsquared_adj, rel=1e-10)


def test_fit_indicator_ols_single_bucket_explains_nothing():
    delta, indicators = fixed_regression_data(30)
    one = pd.DataFrame({"HighFreq": 1, "MediumFreq": 0, "LowFreq": 0}, index=range(30))
    result = fit_indicator_ols(delta, one, "frequency", models=("tg", "txl-trees"), ensemble=(1, 1))
    assert [c.name for c in result.coefficients] == ["HighFreq"] and len(result.dropped) == 2
    assert result.coefficients[0].coef == pytest.approx(delta.mean())
    assert result.r2 == pytest.approx(0.0, abs=1e-12) and result.adj_r2 == pytest.approx(0.0, abs=1e-12)


def test_fit_indicator_ols_to_dict_shape():
    delta, indicators = fixed_regression_data(40)
    result = fit_indicator_ols(delta, indicators, "frequency", models=("tg", "txl-trees"), ensemble=(3, 2),
                               data="ptb-sample validation, 40 terminals")
    out = json.loads(json.dumps(result.to_dict(), allow_nan=False))
    assert set(out) == {"name", "formula", "response", "n", "r2", "adj_r2", "coefficients", "dropped",
                        "models", "ensemble", "data"}
    assert out["models"] == {"A": "tg", "B": "txl-trees"} and out["ensemble"] == {"A": 3, "B": 2}
    assert set(out["coefficients"][0]) == {"name", "coef", "se", "t", "p", "count"}
    assert out["formula"] == "delta ~ 0 + HighFreq + MediumFreq + LowFreq" and out["n"] == 40
    assert "log p_tg" in out["response"] and "log p_txl-trees" in out["response"]


def test_fit_indicator_ols_rejects_bad_input():
    delta, indicators = fixed_regression_data(20)
    kwargs = {"models": ("tg", "txl-trees"), "ensemble": (1, 1)}
    broken = delta.copy()
    broken[[4, 9]] = [math.inf, math.nan]
    with pytest.raises(InputError, match="2 non-finite value\\(s\\) of delta \\(first at index 4"):
        fit_indicator_ols(broken, indicators, "frequency", **kwargs)
    with pytest.raises(InputError, match="19 indicator rows for 20"):
        fit_indicator_ols(delta, indicators.iloc[1:], "frequency", **kwargs)
    with pytest.raises(InputError, match="exactly one indicator.*row 0"):
        fit_indicator_ols(delta, indicators.assign(HighFreq=1, MediumFreq=1), "frequency", **kwargs)
    with pytest.raises(InputError, match="must be 0/1"):
        fit_indicator_ols(delta, indicators * 2, "frequency", **kwargs)
    one_each = pd.DataFrame(np.eye(3, dtype=int), columns=list(FREQUENCY_INDICATORS))
    with pytest.raises(InputError, match="3 observation\\(s\\) for 3 non-empty"):
        fit_indicator_ols(delta[:3], one_each, "frequency", **kwargs)
    with pytest.raises(InputError, match="0 observation"):
        fit_indicator_ols([], one_each.iloc[:0], "frequency", **kwargs)
