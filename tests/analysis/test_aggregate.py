"""``analysis.aggregate``: what each metric was computed on, the key of the Welch tests' comparability."""

from __future__ import annotations

import pandas as pd

from analysis.aggregate import Scored, _described, _evaluated_on
from analysis.statistics import NOT_COMPARED, pairwise_welch


def test_corpora_of_the_same_words_are_the_same_items():
    """A treebank's test split and its dependency conversion's hold the same words: models scored on either
    are compared; a model on other words is not."""
    settings = {"corpus": "ptb-sample/test", "level": "sentence", "n_items": 10, "metrics": ["ppl"],
                "words_sha256": "ab" * 32}
    tg = _evaluated_on("ptb-sample", "sentence", {"ppl": 1.0}, {"ppl": settings})
    dtg = _evaluated_on("ptb-sample-sd", "sentence", {"ppl": 1.0},
                        {"ppl": {**settings, "corpus": "ptb-sample-sd/test"}})
    other = _evaluated_on("ud-ewt", "sentence", {"ppl": 1.0},
                          {"ppl": {**settings, "corpus": "ud-ewt/test", "words_sha256": "cd" * 32}})
    assert tg["ppl"] == Scored("ptb-sample/test", "ab" * 32, "sentence level, 10 items")
    on = _described({"ppl": {"tg": {tg["ppl"]}, "dtg": {dtg["ppl"]}, "ewt": {other["ppl"]}}})["ppl"]
    assert on["tg"] == on["dtg"] == "ptb-sample-sd/test = ptb-sample/test, sentence level, 10 items"
    assert on["ewt"] == "ud-ewt/test, sentence level, 10 items"
    # a training metric: the run's data and level, as before
    training = _evaluated_on("ptb-sample", "sentence", {"val_loss": 1.0}, {})["val_loss"]
    described = _described({"val_loss": {"tg": {training}}})
    assert described == {"val_loss": {"tg": "ptb-sample in training, sentence level"}}

    long = pd.DataFrame([{"model": m, "seed": s, "metric": "ppl", "value": v + s}
                         for m, v in (("tg", 10.0), ("dtg", 20.0), ("ewt", 30.0)) for s in range(3)])
    welch = pairwise_welch(long, correction="holm", evaluated_on={"ppl": on}).set_index(["model_a", "model_b"])
    assert welch.loc[("tg", "dtg"), "p"] < 0.01 and not str(welch.loc[("tg", "dtg"), "note"]).startswith(NOT_COMPARED)
    assert str(welch.loc[("tg", "ewt"), "note"]).startswith(NOT_COMPARED)
